"""``spark_jobs/model/changes.py``: a changes hop's rules as its spec keys give them, with their
defaults and the columns they keep (no JVM)."""

from __future__ import annotations

import pytest

from spark_jobs.model.errors import UsageError
from tests.unit.spark_jobs._helpers import load

pytestmark = pytest.mark.unit


def test_a_changes_hop_reads_its_rules_with_their_defaults(tmp_path):
    spec = load(
        tmp_path,
        "  - {name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id], "
        "sequence_by: lsn, operation: op, scd: 2}\n",
    )
    rules = spec.hop("c").changes
    assert (rules.sequence_by, rules.operation, rules.deletes, rules.scd, rules.validity) == (
        "lsn",
        "op",
        ("d", "delete"),
        2,
        ("valid_from", "valid_to"),
    )
    columns = ["id", "name", "tier", "lsn", "at", "op", "_source_file", "_batch_id", "_ingest_time"]
    assert rules.kept_columns(columns) == [
        "id",
        "name",
        "tier",
        "lsn",
        "at",
        "_source_file",
        "valid_from",
        "valid_to",
    ]
    assert rules.tracked_columns(columns, ("id",), "at") == ["name", "tier"]
    assert spec.hop("bronze").changes is None


def test_a_sequence_of_several_columns_orders_by_their_struct_and_keeps_them_as_columns(tmp_path):
    from spark_jobs.model.changes import SEQUENCE

    spec = load(
        tmp_path,
        "  - {name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id], "
        "sequence_by: [lsn, index], scd: 2}\n",
    )
    rules = spec.hop("c").changes
    assert (rules.sequence_by, rules.sequence_columns) == (SEQUENCE, ("lsn", "index"))
    columns = ["id", "tier", "lsn", "index", "at", SEQUENCE]
    assert rules.kept_columns(columns) == [
        "id",
        "tier",
        "lsn",
        "index",
        "at",
        "valid_from",
        "valid_to",
    ]
    # twins of one pair are told apart by these
    assert rules.value_columns(columns, ("id",)) == ["tier", "at"]
    with pytest.raises(UsageError, match="the changes have no column 'index'"):
        rules.check_columns(["id", "tier", "lsn", "at"], ("id",), "hop c")


def test_truncates_and_the_unavailable_text_have_defaults_and_one_value_marks_one_thing():
    from spark_jobs.model.changes import TRUNCATES, UNAVAILABLE, ChangesSpec
    from spark_jobs.model.errors import UsageError

    raw = {"keys": ["id"], "sequence_by": "position", "operation": "op"}
    rules = ChangesSpec.from_raw(raw, "hop c")
    assert (rules.truncates, rules.unavailable_value) == (TRUNCATES, UNAVAILABLE)
    assert (
        ChangesSpec.from_raw({**raw, "unavailable_value": None}, "hop c").unavailable_value is None
    )
    assert ChangesSpec.from_raw({**raw, "truncates": ["T"]}, "hop c").truncates == ("T",)
    with pytest.raises(UsageError, match="'t' among both deletes and truncates"):
        ChangesSpec.from_raw({**raw, "deletes": ["d", "t"]}, "hop c")


def test_a_snapshot_feed_has_one_time_column_and_no_operation():
    from spark_jobs.model.changes import SNAPSHOT_OP, ChangesSpec
    from spark_jobs.model.errors import UsageError

    raw = {"keys": ["id"], "sequence_by": "snapshot_at", "snapshots": True}
    rules = ChangesSpec.from_raw(raw, "hop c")
    assert (rules.snapshots, rules.operation, rules.deletes, rules.truncates) == (
        True,
        SNAPSHOT_OP,
        ("d",),
        (),
    )
    assert SNAPSHOT_OP in rules.dropped()
    for wrong in ({"operation": "op"}, {"sequence_by": ["snapshot_at", "n"]}):
        with pytest.raises(UsageError, match="takes snapshots, which have no operation column"):
            ChangesSpec.from_raw({**raw, **wrong}, "hop c")


@pytest.mark.parametrize(
    "keys, remembers",
    [
        ("sequence_by: lsn, operation: op", True),
        ("sequence_by: [epoch, lsn], operation: op, except_columns: [note]", True),
        # a table without its sequence cannot tell a late change: every batch reads the feed
        ("sequence_by: [epoch, lsn], operation: op, except_columns: [lsn]", False),
        # a snapshot feed's deletes come from whole snapshots
        ("sequence_by: taken_at, snapshots: true", False),
    ],
    ids=["log", "two-columns", "sequence-dropped", "snapshots"],
)
def test_a_log_feed_keeps_its_deleted_keys_in_a_table_rollback_and_maintenance_see(
    tmp_path, keys, remembers
):
    from spark_jobs.model.lake import Lake

    spec = load(
        tmp_path,
        "  - {name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id], "
        f"{keys}}}\n",
    )
    lake = Lake(spec, str(tmp_path / "lake"))
    hop = spec.hop("c")
    assert hop.changes.remembers_deletes is remembers
    expected = [lake.path("t/c")] + ([lake.path("t/c_deleted_keys")] if remembers else [])
    assert lake.tables_of(hop) == expected
    assert lake.deleted_keys(spec.hop("bronze")) is None
