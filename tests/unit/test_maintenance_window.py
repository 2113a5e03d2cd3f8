"""``lakehouse maintain`` against the rollback window, from fixture lakes' logs alone (no JVM): how far
the window reaches, what a dry run reads, which state files go, and what a rollback or a restarting
reader still finds after the logs were cleaned up."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from spark_jobs.control.maintenance.tables import TablePlan
from spark_jobs.logs import delta_log

pytestmark = pytest.mark.unit

def _aged(lake, hours: dict[str, list[float]], start_s: float) -> None:
    """Set each hop's checkpoint commit files' modification times: batch n at ``start_s + hours[n]`` h."""
    import os

    for hop, stamps in hours.items():
        for batch, hour in enumerate(stamps):
            path = Path(lake.checkpoint(lake.spec.hop(hop)), "commits", str(batch))
            os.utime(path, (start_s + hour * 3600,) * 2)


def test_the_window_reaches_as_far_as_a_cascade_inside_it_takes_a_hop(tmp_path):
    """straddle: bronze batches 0..3, silver's batch 1 read bronze's 1..3 at once. With a 1-hour
    window beginning between bronze's batches 2 and 3, bronze's own oldest target is batch 2, but
    rolling bronze back to 2 takes it back to 0 (silver's batches end there): the window must
    keep what a rollback to 0 needs, for bronze and for silver."""
    import dataclasses

    from spark_jobs.control.maintenance.tables import plan, window_targets
    from spark_jobs.control.rollback import lineage
    from spark_jobs.model.lake import Lake
    from testkit.lakes import fixture_lake

    lake = fixture_lake("straddle", tmp_path)
    lake = Lake(lake.home, dataclasses.replace(lake.spec, retention={"rollback": "1 hour"}))
    start = 1_000_000_000
    _aged(lake, {"bronze": [0, 1, 2, 3], "silver": [0, 3], "gold": [0, 3]}, start)
    now_ms = int((start + 3.5 * 3600) * 1000)  # the window begins at hour 2.5

    def infos_of(hop):
        return lineage.hop_batches(lake, hop)

    targets = window_targets(lake, now_ms, infos_of)
    assert targets["bronze"] == 0 and targets["silver"] == 0 and targets["gold"] == 0
    bronze = {step.table: step for step in plan(lake, lake.spec.hops, now_ms, targets)}[lake.table(lake.spec.hop("bronze"))]
    # Back to batch 0: the table as batch 0 left it, the version before batch 1's first commit.
    first_of_batch_1 = min(version for version in delta_log.versions(bronze.table)
                           if (delta_log.transaction(bronze.table, version) or {}).get("version", -1) >= 1)
    assert bronze.keep_from == first_of_batch_1 - 1 and "back to batch 0" in bronze.held_by, bronze


def test_a_window_that_reaches_before_the_first_batch_keeps_the_first_batchs_version(tmp_path):
    """A rollback to before the first batch empties the table and needs no version; the oldest
    one inside the window that restores is to batch 0: its version is what stays."""
    from spark_jobs.control.maintenance.tables import plan
    from testkit.lakes import fixture_lake

    lake = fixture_lake("straddle", tmp_path)
    targets = {hop.name: -1 for hop in lake.spec.hops}
    steps = {step.table: step for step in plan(lake, lake.spec.hops, 0, targets)}
    bronze = steps[lake.table(lake.spec.hop("bronze"))]
    first_of_batch_1 = min(version for version in delta_log.versions(bronze.table)
                           if (delta_log.transaction(bronze.table, version) or {}).get("version", -1) >= 1)
    assert bronze.keep_from == first_of_batch_1 - 1 and "back to batch 0" in bronze.held_by, bronze


def test_a_dry_run_reads_the_logs_only_starts_no_jvm_and_changes_nothing(tmp_path):
    """``maintain --dry-run`` on the history fixture, in a fresh process: exit 0, no PySpark
    imported, no file changed, and each table's file count what delta-rs (an independent reader)
    counts."""
    import os
    import subprocess
    import sys

    from deltalake import DeltaTable

    from testkit.lakes import fixture_lake
    from testkit.paths import file_tree

    lake = fixture_lake("history", tmp_path)
    env = {**os.environ, "LAKEHOUSE_HOME": lake.home, "LAKEHOUSE_PIPELINES": str(Path(lake.spec.source).parent.parent)}
    code = ("import json, sys; from spark_jobs.cli import main; import contextlib, io; out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out): code = main(['maintain', 'ad_events', '--dry-run', '--json'])\n"
            "print(json.dumps({'code': code, 'pyspark': 'pyspark' in sys.modules, 'out': json.loads(out.getvalue())}))")
    tree = file_tree(Path(lake.home))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (result["code"], result["pyspark"]) == (0, False), done.stderr[-2000:]
    assert file_tree(Path(lake.home)) == tree
    counts = {entry["table"]: entry["files_before"] for entry in result["out"]["tables"]}
    assert counts and counts == {table: len(DeltaTable(table).file_uris()) for table in counts}


@pytest.mark.parametrize("seed", range(30), ids=[f"seed{seed}" for seed in range(30)])
def test_old_state_files_go_and_every_version_from_the_kept_one_still_loads(tmp_path, seed):
    """Random HDFS-backed stores (deltas for versions 1..n, snapshots at random versions, some
    partitions of a join's several stores): after deleting what ``state_before(V)`` lists, every
    version from V on that loaded before still loads, and what is gone is exactly the files older
    than the newest snapshot at or before V (computed here by a loop over the files)."""
    from spark_jobs.logs import state_store

    rng = random.Random(seed)
    checkpoint = tmp_path / "checkpoint"
    latest = rng.randint(1, 30)
    written: dict[Path, int] = {}
    for partition in range(rng.randint(1, 3)):
        folder = checkpoint / "state" / "0" / str(partition)
        for store in (["left", "right"] if rng.random() < 0.3 else [""]):
            where = folder / store if store else folder
            where.mkdir(parents=True, exist_ok=True)
            for version in range(1, latest + 1):
                for kind in ["delta"] + (["snapshot"] if rng.random() < 0.25 else []):
                    path = where / f"{version}.{kind}"
                    path.write_text("x")
                    (where / f".{version}.{kind}.crc").write_text("c")
                    written[path] = version
    keep = rng.randint(0, latest)
    before = state_store.state_files(str(checkpoint))
    loadable = {(store, v) for store, versions in before.items() for v in range(keep, latest + 1)
                if state_store.state_loadable(versions, v)}
    expected = set()
    for store in {path.parent for path in written}:
        snapshots = [v for path, v in written.items() if path.parent == store and path.suffix == ".snapshot" and v <= keep]
        if snapshots:
            expected |= {str(path) for path, v in written.items() if path.parent == store and v < max(snapshots)}
    old = state_store.state_before(str(checkpoint), keep)
    assert set(old) == expected
    for path in old:
        Path(path).unlink()
    after = state_store.state_files(str(checkpoint))
    assert {(store, v) for store, versions in after.items() for v in range(keep, latest + 1)
            if state_store.state_loadable(versions, v)} == loadable


def test_a_batch_whose_commit_went_with_the_log_is_not_skipped_by_a_rollback(tmp_path):
    """delta-rs writes a stream's commits (``txn`` q:0, q:1), a backfill's (no ``txn``), a
    checkpoint there, then q:2; the log is cleaned up to the checkpoint, so batch 1's commit is
    gone and the first commit left is the backfill's. Undoing batches 1 and 2 must restore the
    table to before batch 1 (gone: refused), not to the backfill's version, which holds batch 1's
    rows. Undoing batch 2 only restores the backfill's version."""
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    from spark_jobs.control.maintenance.tables import clean_log
    from spark_jobs.control.rollback import lineage

    table = str(tmp_path / "table")

    def write(n: int, batch: int | None) -> None:
        properties = CommitProperties(app_transactions=[Transaction("q", batch)]) if batch is not None else None
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
    assert lineage.cut_version(table, ids, -1) == -1  # undoing every batch empties it (a start over)


def test_batches_a_start_over_emptied_do_not_count_as_gone_after_the_log_is_cleaned(tmp_path):
    """delta-rs: a stream q1's batches 0..5, the table emptied (a start over), a new stream q2's
    batches 0..3, a checkpoint at q2's batch 1; the log cleaned up to it. q1's batches are not in
    effect (the emptying undid them) and do not count as gone: q2's own decide. Undoing batch 3
    restores the version before it; undoing batches 1..3 needs the version before batch 1's
    commit, gone."""
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    from spark_jobs.control.maintenance.tables import clean_log
    from spark_jobs.control.rollback import lineage

    table = str(tmp_path / "table")

    def write(app: str, batch: int) -> None:
        write_deltalake(table, pa.table({"n": [batch]}), mode="append",
                        commit_properties=CommitProperties(app_transactions=[Transaction(app, batch)]))

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
    assert delta_log.hidden_transactions(table) == {"q2": 0}  # batch 1's commit is the checkpoint's own: kept
    ids = lineage.Lineage(frozenset({"q1", "q2"}))
    assert lineage.cut_version(table, ids, 3) is None  # nothing after batch 3
    assert lineage.cut_version(table, ids, 2) == keep + 1 and lineage.restore_problem(table, keep + 1) is None
    assert lineage.cut_version(table, ids, 0) == keep - 1 and lineage.restore_problem(table, keep - 1) is not None


def test_a_reader_keeps_the_version_its_restart_asks_for_again(tmp_path):
    """A stream restarting asks its Delta source again for its last logged batch, from the offsets
    of the batch before it: ``maintain`` keeps the upstream's log from that batch's version, not
    only from the last batch's (Spark failed gold's next run with "transaction log starts at" the
    version after). Offsets read here as text, not through the checkpoint reader."""
    from spark_jobs.control.maintenance.tables import plan
    from testkit.lakes import fixture_lake

    lake = fixture_lake("history", tmp_path)
    gold, silver = lake.spec.hop("gold"), lake.spec.hop("silver")
    offsets = Path(lake.checkpoint(gold), "offsets")

    def start(batch: int) -> int:
        return json.loads((offsets / str(batch)).read_text().splitlines()[2])["reservoirVersion"]

    logged = sorted(int(path.name) for path in offsets.iterdir() if path.name.isdigit())
    latest = delta_log.versions(lake.table(silver))[-1]
    while start(logged[-2]) >= min(start(logged[-1]), latest):  # undone by hand: gold lags, its last two apart
        for log in ("offsets", "commits"):
            Path(lake.checkpoint(gold), log, str(logged[-1])).unlink(missing_ok=True)
        logged.pop()
    plans = plan(lake, lake.spec.hops, 0, targets={hop.name: None for hop in lake.spec.hops})
    kept = next(each for each in plans if each.table == lake.table(silver))
    assert kept.keep_from <= start(logged[-2]) < min(start(logged[-1]), latest), kept


def test_a_window_that_restores_to_a_restore_keeps_the_version_that_restore_named(tmp_path):
    """A rollback inside the window that takes a table back to an earlier rollback's RESTORE
    reads, once the log before that RESTORE is cleaned up, the version the RESTORE named
    (``lineage.cut_version``): that version stays, through a chain of RESTOREs (shop's model with
    late events, seed 4: the log cleaned up to a RESTORE to version 0 cut gold's window)."""
    from spark_jobs.control.maintenance.tables import _restored_from

    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    operations = ["WRITE", "MERGE", ("RESTORE", 0), "MERGE", ("RESTORE", 2), "MERGE"]
    for version, operation in enumerate(operations):
        name, target = operation if isinstance(operation, tuple) else (operation, None)
        info = {"operation": name, "operationParameters": {"version": target} if target is not None else {}}
        (log / f"{version:020d}.json").write_text(json.dumps({"commitInfo": info}) + "\n")
    table = str(tmp_path / "t")
    assert [_restored_from(table, version) for version in range(len(operations))] == [0, 1, 0, 3, 0, 5]
    (log / f"{0:020d}.json").unlink()  # a target no longer in the log is still the version named
    assert _restored_from(table, 4) == 0
