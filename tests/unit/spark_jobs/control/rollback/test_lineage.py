"""``spark_jobs/control/rollback/lineage.py``: batches joined to the table versions they wrote, on
lakes real runs wrote and on hand-made or delta-rs-written logs (no JVM): query ids, the appends a
later RESTORE took out, the version a rollback cuts at once the log was cleaned up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_jobs.control.hop_state import HopState
from spark_jobs.control.removable.table_files import TablePlan
from spark_jobs.control.rollback import lineage
from spark_jobs.logs import delta_log
from testkit.lakes import fixture_lake
from tests.unit.spark_jobs._helpers import _write_log

pytestmark = pytest.mark.unit


def test_each_batch_maps_to_the_table_version_it_wrote(tmp_path):
    """history: each run's record names the version its batches left the table at; the batch
    ids of the checkpoint's query give the same versions from the Delta log's ``txn`` marks."""
    lake = fixture_lake("history", tmp_path)
    for hop in lake.spec.hops:
        table = lake.table(hop)
        written = lineage.batch_versions(table, lineage.query_ids(HopState(lake, hop)))
        for path in Path(lake.runs).glob(f"r*.{hop.name}.json"):
            record = json.loads(path.read_text())
            wrote = [written[batch] for batch in record["batch_ids"] if batch in written]
            assert wrote and max(wrote) == record["tables"][table]["version_after"], (
                hop.name,
                record["run_id"],
            )
    # the backfill wrote gold without a stream's txn: no batch claims the version it made
    gold = lake.spec.hop("gold")
    backfilled = json.loads(Path(lake.runs, "b1.gold.json").read_text())["tables"][
        lake.table(gold)
    ]["version_after"]
    assert (
        backfilled
        not in lineage.batch_versions(
            lake.table(gold), lineage.query_ids(HopState(lake, gold))
        ).values()
    )


def test_an_earlier_rollback_keeps_its_old_query_id_in_the_lineage(tmp_path):
    lake = fixture_lake("replayed", tmp_path)
    journal = json.loads(next(Path(lake.rollbacks).glob("*.json")).read_text())
    for step in journal["plan"]["hops"]:
        ids = lineage.query_ids(HopState(lake, lake.spec.hop(step["hop"])))
        assert step["old_query_id"] in ids and step["new_query_id"] in ids


@pytest.mark.parametrize("seed", range(20), ids=lambda seed: f"seed{seed}")
def test_undone_after_flags_every_append_of_a_range_a_later_restore_or_emptying_took_out(
    tmp_path, seed
):
    """Random logs of appends, RESTOREs (to a version, or to a timestamp) and emptying DELETEs,
    against a plain-Python replay of which appends each version holds: an append of ``(start,
    end]`` that a version after ``end`` dropped while the version before it held it is always
    flagged; a range whose appends every later version holds, never."""
    import random

    from spark_jobs.control.rollback import lineage

    rng = random.Random(seed)
    log = tmp_path / "t/_delta_log"
    held: list[frozenset[int]] = []  # the appends each version holds
    for version in range(rng.randint(3, 12)):
        info = {"operation": "WRITE", "timestamp": 1000 * (version + 1)}
        actions = [{"add": {"path": f"f{version}", "dataChange": True}}]
        state = (held[-1] if held else frozenset()) | {version}
        draw = rng.random()
        if version and draw < 0.25:  # RESTORE to an earlier version (by number or by time)
            target = rng.randrange(version)
            parameters = (
                {"version": target}
                if rng.random() < 0.5
                else {"timestamp": f"1970-01-01 00:00:{target + 1:02d}"}
            )
            info = {
                "operation": "RESTORE",
                "timestamp": 1000 * (version + 1),
                "operationParameters": parameters,
            }
            actions = [{"remove": {"path": "x", "dataChange": True}}]
            state = held[target]
        elif version and draw < 0.35:  # an emptying DELETE
            info = {
                "operation": "DELETE",
                "timestamp": 1000 * (version + 1),
                "operationParameters": {"predicate": "[]"},
            }
            actions = [{"remove": {"path": "x", "dataChange": True}}]
            state = frozenset()
        held.append(state)
        _write_log(
            log / f"{version:020d}.json",
            [json.dumps({"commitInfo": info}), *map(json.dumps, actions)],
        )
    table = str(tmp_path / "t")
    appends = [
        version for version, commit in enumerate(lineage.commits(table)) if commit.appends_only
    ]
    for start in range(-1, len(held)):
        for end in range(start + 1, len(held)):
            in_range = [c for c in appends if start < c <= end]
            dropped = any(
                c in held[v - 1] and c not in held[v]
                for c in in_range
                for v in range(end + 1, len(held))
            )
            kept = all(c in held[v] for c in in_range for v in range(end, len(held)))
            flagged = lineage.undone_after(table, start, end)
            assert flagged or not dropped, (start, end, held)
            assert not flagged or not kept, (start, end, held)


def test_a_batch_whose_commit_went_with_the_log_is_not_skipped_by_a_rollback(tmp_path):
    """delta-rs writes a stream's commits (``txn`` q:0, q:1), a backfill's (no ``txn``), a
    checkpoint there, then q:2; the log is cleaned up to the checkpoint, so batch 1's commit is
    gone and the first commit left is the backfill's. Undoing batches 1 and 2 must restore the
    table to before batch 1 (gone: refused), not to the backfill's version, which holds batch 1's
    rows. Undoing batch 2 only restores the backfill's version."""
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    from spark_jobs.control.removable.table_files import clean_log
    from spark_jobs.control.rollback import lineage

    table = str(tmp_path / "table")

    def write(n: int, batch: int | None) -> None:
        properties = (
            CommitProperties(app_transactions=[Transaction("q", batch)])
            if batch is not None
            else None
        )
        write_deltalake(table, pa.table({"n": [n]}), mode="append", commit_properties=properties)

    write(0, 0)
    write(1, 1)
    write(100, None)  # a backfill
    DeltaTable(table).create_checkpoint()
    write(2, 2)
    clean_log(TablePlan("t", table, 3, 2, "test", None), dry_run=False)
    assert delta_log.versions(table) == [2, 3]
    ids = lineage.Lineage(frozenset({"q"}))
    assert lineage.cut_version(table, ids, 1) == 2  # the backfill's version: batches 0 and 1 in it
    assert lineage.cut_version(table, ids, 0) == 1  # before batch 1's commit, which is gone
    assert lineage.restore_problem(table, 1) is not None
    # undoing every batch empties it (a start over)
    assert lineage.cut_version(table, ids, -1) == -1


def test_batches_a_start_over_emptied_do_not_count_as_gone_after_the_log_is_cleaned(tmp_path):
    """delta-rs: a stream q1's batches 0..5, the table emptied (a start over), a new stream q2's
    batches 0..3, a checkpoint at q2's batch 1; the log cleaned up to it. q1's batches are not in
    effect (the emptying undid them) and do not count as gone: q2's own decide. Undoing batch 3
    restores the version before it; undoing batches 1..3 needs the version before batch 1's
    commit, gone."""
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    from spark_jobs.control.removable.table_files import clean_log
    from spark_jobs.control.rollback import lineage

    table = str(tmp_path / "table")

    def write(app: str, batch: int) -> None:
        write_deltalake(
            table,
            pa.table({"n": [batch]}),
            mode="append",
            commit_properties=CommitProperties(app_transactions=[Transaction(app, batch)]),
        )

    for batch in range(6):
        write("q1", batch)
    DeltaTable(table).delete()
    for batch in range(2):
        write("q2", batch)
    DeltaTable(table).create_checkpoint()
    keep = delta_log.versions(table)[-1]
    for batch in range(2, 4):
        write("q2", batch)
    clean_log(TablePlan("t", table, keep + 2, keep, "test", None), dry_run=False)
    assert delta_log.versions(table)[0] == keep
    # batch 1's commit is the checkpoint's own: kept
    assert delta_log.hidden_transactions(table) == {"q2": 0}
    ids = lineage.Lineage(frozenset({"q1", "q2"}))
    assert lineage.cut_version(table, ids, 3) is None  # nothing after batch 3
    assert (
        lineage.cut_version(table, ids, 2) == keep + 1
        and lineage.restore_problem(table, keep + 1) is None
    )
    assert (
        lineage.cut_version(table, ids, 0) == keep - 1
        and lineage.restore_problem(table, keep - 1) is not None
    )
