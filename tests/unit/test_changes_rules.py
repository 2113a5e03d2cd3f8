"""A changes hop's spec keys (refused with the fix when wrong) and the plain-Python model of its
rules on hand-picked feeds (the model that tests/spark/test_changes.py holds the engine to)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spark_jobs.model.errors import UsageError
from testkit.changes_model import Change, scd1, scd2

pytestmark = pytest.mark.unit

BRONZE = "  - {name: bronze, kind: ingest, table: t/b, time_column: at}\n"


def load(tmp_path, hop: str):
    from spark_jobs.model.spec import load_spec

    path = tmp_path / "crm.yaml"
    path.write_text("name: crm\nlanding: landing/crm\nhops:\n" + BRONZE + hop)
    return load_spec(path)


def test_a_changes_hop_reads_its_rules_with_their_defaults(tmp_path):
    spec = load(tmp_path, "  - {name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id], "
                          "sequence_by: lsn, operation: op, scd: 2}\n")
    rules = spec.hop("c").changes
    assert (rules.sequence_by, rules.operation, rules.deletes, rules.scd, rules.validity) == (
        "lsn", "op", ("d", "delete"), 2, ("valid_from", "valid_to"))
    columns = ["id", "name", "tier", "lsn", "at", "op", "_source_file", "_batch_id", "_ingest_time"]
    assert rules.kept_columns(columns) == ["id", "name", "tier", "lsn", "at", "_source_file", "valid_from", "valid_to"]
    assert rules.tracked_columns(columns, ("id",), "at") == ["name", "tier"]
    assert spec.hop("bronze").changes is None


def test_a_sequence_of_several_columns_orders_by_their_struct_and_keeps_them_as_columns(tmp_path):
    from spark_jobs.model.changes import SEQUENCE

    spec = load(tmp_path, "  - {name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id], "
                          "sequence_by: [lsn, index], scd: 2}\n")
    rules = spec.hop("c").changes
    assert (rules.sequence_by, rules.sequence_columns) == (SEQUENCE, ("lsn", "index"))
    columns = ["id", "tier", "lsn", "index", "at", SEQUENCE]
    assert rules.kept_columns(columns) == ["id", "tier", "lsn", "index", "at", "valid_from", "valid_to"]
    assert rules.value_columns(columns, ("id",)) == ["tier", "at"]  # twins of one pair are told apart by these
    with pytest.raises(UsageError, match="the changes have no column 'index'"):
        rules.check_columns(["id", "tier", "lsn", "at"], ("id",), "hop c")


@pytest.mark.parametrize("hop, message", [
    ("{name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id]}",
     "hop c (kind changes) lacks sequence_by: add the column"),
    ("{name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, sequence_by: lsn}",
     "hop c (kind changes) lacks keys: add the columns"),
    ("{name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id], sequence_by: lsn, scd: 3}",
     "hop c has scd 3: use 1"),
    ("{name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id], sequence_by: lsn, "
     "track_history: [tier]}", "hop c has track_history or validity, which only an `scd: 2` hop keeps"),
    ("{name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id], sequence_by: lsn, scd: 2, "
     "validity: [v, v]}", "hop c has validity ['v', 'v']: name two columns"),
    ("{name: c, kind: append, upstream: bronze, table: t/c, time_column: at, sequence_by: lsn}",
     "hop c (kind append) has sequence_by, which only a changes hop takes: remove it"),
    ("{name: c, kind: changes, table: t/c, time_column: at, keys: [id], sequence_by: lsn}",
     "hop c (kind changes) reads a table: add `upstream"),
    ("{name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id], sequence_by: lsn}\n"
     "  - {name: g, kind: append, upstream: c, table: t/g, time_column: at}",
     "hop g reads 'c', a changes hop, whose batches rewrite rows in place: no hop can stream its table yet"),
    ("{name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id], sequence_by: [lsn, lsn]}",
     "hop c has sequence_by ['lsn', 'lsn']: name a column, or a list of different columns"),
    ("{name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id], sequence_by: []}",
     "hop c has sequence_by [], not a column's name or a list of them: use e.g. `lsn` or `[lsn, event_index]`"),
], ids=["no-sequence", "no-keys", "scd-3", "history-on-1", "validity", "on-append", "no-upstream", "below",
        "sequence-twice", "sequence-empty"])
def test_a_wrong_changes_hop_is_refused_with_the_fix(tmp_path, hop, message):
    with pytest.raises(UsageError, match=re.escape("crm.yaml: " + message)):
        load(tmp_path, f"  - {hop}\n")


def test_a_change_older_than_a_delete_does_not_bring_its_key_back_in_either_type():
    feed = [Change("a", 1, "c", "Ada", "gold"), Change("a", 3, "d", "Ada", "gold"), Change("a", 2, "u", "Bo", "gold")]
    assert scd1(feed) == []
    assert [(row["name"], row["valid_from"], row["valid_to"]) for row in scd2(feed)] == [("Bo", 1, 3)]


def test_twins_of_one_sequence_count_once_a_delete_first_else_the_greatest_values():
    assert scd1([Change("a", 1, "c", "Ada", "gold"), Change("a", 1, "d", "Ada", "gold")]) == []
    assert [row["name"] for row in scd1([Change("a", 1, "c", None, "gold"), Change("a", 1, "c", "Ada", "gold"),
                                         Change("a", 1, "u", "Ada", "gold")])] == ["Ada"]


def test_a_late_change_splits_a_history_at_its_sequence_and_untracked_changes_stay_in_their_version():
    feed = [Change("a", 1, "c", "Ada", "gold"), Change("a", 5, "u", "Ada", "silver"), Change("a", 2, "u", "Bo", "gold"),
            Change("a", 3, "u", "Cy", "bronze")]
    assert [(row["name"], row["tier"], row["valid_from"], row["valid_to"]) for row in scd2(feed)] == [
        ("Bo", "gold", 1, 3), ("Cy", "bronze", 3, 5), ("Ada", "silver", 5, None)]
    assert [(row["name"], row["lsn"]) for row in scd1(feed)] == [("Ada", 5)]


def test_the_crm_sample_writes_inserts_updates_deletes_and_late_changes_as_debezium_events(tmp_path, monkeypatch):
    import json

    from spark_jobs import service
    from testkit.paths import EXAMPLES

    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(EXAMPLES))
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path))
    result = service.generate("crm", 400, seed=5, start_ms=1_780_000_000_000, late_fraction=0.1)
    events = [json.loads(line) for line in Path(result.files[0]).read_text().splitlines()]
    assert {event["op"] for event in events} == {"c", "u", "d"}
    assert all((event["before"] if event["op"] == "d" else event["after"])["customer_id"] for event in events)
    positions = [event["source"]["lsn"] for event in events]
    late = sum(1 for index, position in enumerate(positions) if position < max(positions[:index], default=0))
    assert late == result.late_events > 0  # each late event arrives after a newer one


def test_other_change_rules_are_an_incompatible_code_change_and_another_filter_is_not(tmp_path):
    """A changes hop's table is what its rules built: new rules cannot go on with it (refresh),
    while a change of its query alone (a filter in its transform) can."""
    from dataclasses import replace
    from types import SimpleNamespace

    from spark_jobs.control import fingerprint
    hop = load(tmp_path, "  - {name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id], "
                         "sequence_by: lsn, operation: op}\n").hop("c")
    plan = "Project [id#1, lsn#2]\n+- StreamingRelation delta, [id#1, lsn#2]"
    filtered = "Project [id#1, lsn#2]\n+- Filter (lsn#2 > 0)\n   +- StreamingRelation delta, [id#1, lsn#2]"
    before = fingerprint.of_plan(plan, hop, "code-1")
    # As the code before a sequence could be several columns computed it: a lake's fingerprints hold.
    assert (before.query, before.state) == ("a21d4f0209b952ca", "c0d92fa1da310c47")
    assert fingerprint.change(before, fingerprint.of_plan(filtered, hop, "code-2")) == "compatible"
    for rules in ({"scd": 2}, {"sequence_by": "ts"}, {"deletes": ("D",)}, {"except_columns": ("note",)}):
        other = replace(hop, changes=replace(hop.changes, **rules))
        assert fingerprint.change(before, fingerprint.of_plan(plan, other, "code-2")) == "incompatible", rules
    lake = SimpleNamespace(spec=SimpleNamespace(name="crm"))  # the refusal reads the pipeline's name only
    assert fingerprint.refusal(lake, other, before, fingerprint.of_plan(plan, other, "code-2")).startswith(
        "hop c's query changed since its checkpoint was written and its table was built by other change rules")
