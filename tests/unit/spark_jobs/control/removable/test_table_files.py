"""``spark_jobs/control/removable/table_files.py``: which files and log entries ``lakehouse
maintain`` deletes, from a table's log alone (no JVM): random logs of appends, removes, deletion
vectors, RESTOREs that add removed files back and change-data files, against a plain-Python model
that replays every snapshot; and how far the rollback window reaches on fixture lakes."""

from __future__ import annotations

import json
import random
from pathlib import Path
from urllib.parse import quote, unquote

import pytest

from spark_jobs.control.hop_state import HopState
from spark_jobs.control.removable.table_files import TablePlan, vacuum
from spark_jobs.logs import delta_log

pytestmark = pytest.mark.unit


def _vector(number: int) -> dict:
    return {
        "storageType": "u",
        "pathOrInlineDv": f"vector{number:04d}",
        "offset": 1,
        "sizeInBytes": 34,
        "cardinality": 1,
    }


class _Files:
    """The model's files: a file is its path and its deletion vector (none, or a number)."""

    def __init__(self, rng: random.Random):
        self.rng, self.serial = rng, 0
        self.live: dict[str, int | None] = {}  # path -> its deletion vector in the snapshot
        self.removed: list[tuple[str, int | None]] = []

    @staticmethod
    def named(kind: str, path: str, vector: int | None) -> dict:
        return {
            kind: {
                "path": path,
                "dataChange": True,
                **({"deletionVector": _vector(vector)} if vector else {}),
            }
        }

    def replace(self, path: str, vector: int | None) -> list[dict]:
        """The file's vector changed in one commit: its remove and add, in either order."""
        pair = [self.named("remove", path, self.live[path]), self.named("add", path, vector)]
        self.removed.append((path, self.live[path]))
        self.live[path] = vector
        return pair if self.rng.random() < 0.5 else pair[::-1]

    def restore(self, path: str, vector: int | None) -> list[dict]:
        """A RESTORE adds back a file an earlier commit removed (swapping the
        path's vector back).
        """
        if (path, vector) not in self.removed or self.live.get(path, -1) == vector:
            return []
        self.removed.remove((path, vector))
        if path in self.live:
            return self.replace(path, vector)
        self.live[path] = vector
        return [self.named("add", path, vector)]

    def commit(self, version: int) -> list[dict]:
        rng, actions = (
            self.rng,
            [{"commitInfo": {"timestamp": 1_000 * version, "operation": "WRITE"}}],
        )
        restores = (
            rng.sample(self.removed, min(len(self.removed), rng.randint(0, 2)))
            if rng.random() < 0.2
            else []
        )
        gone = (
            rng.sample(sorted(self.live), min(len(self.live), rng.randint(0, 3)))
            if rng.random() < 0.5
            else []
        )
        for path in gone:
            actions.append(self.named("remove", path, self.live[path]))
            self.removed.append((path, self.live.pop(path)))
        for path, vector in restores:
            actions.extend(self.restore(path, vector))
        for path in rng.sample(
            sorted(set(self.live) - set(gone)), min(len(self.live), rng.randint(0, 2))
        ):
            if rng.random() < 0.3:  # rows of the file deleted: a new vector
                self.serial += 1
                actions.extend(self.replace(path, self.serial))
        for _ in range(rng.randint(0, 2)):
            self.serial += 1
            path = f"{quote('day=2026-01-01 00:00')}/part-{self.serial:05d}.parquet"
            actions.append({"add": {"path": path, "dataChange": True}})
            self.live[path] = None
        if rng.random() < 0.2:
            self.serial += 1
            actions.append(
                {
                    "cdc": {
                        "path": f"_change_data/cdc-{self.serial:05d}.parquet",
                        "dataChange": False,
                    }
                }
            )
        return actions


def _random_log(
    table: Path, rng: random.Random, commits: int
) -> tuple[list[set[str]], list[list[str]]]:
    """Write ``commits`` JSON commits with data files on disk; return each version's snapshot
    (paths as the log spells them) and each version's change-data files. A commit that deletes
    rows of a file removes it and adds it back with a deletion vector, a RESTORE puts an earlier
    vector back, each pair in either order (Delta writes a RESTORE's add first)."""
    (table / "_delta_log").mkdir(parents=True)
    files = _Files(rng)
    snapshots, changes = [], []
    for version in range(commits):
        actions = files.commit(version)
        for path in {a[kind]["path"] for a in actions for kind in ("add", "cdc") if kind in a}:
            file = table / unquote(path)
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text("x")
            (file.parent / f".{file.name}.crc").write_text("c")
        (table / "_delta_log" / f"{version:020d}.json").write_text(
            "\n".join(map(json.dumps, actions)) + "\n"
        )
        snapshots.append(set(files.live))
        changes.append([a["cdc"]["path"] for a in actions if "cdc" in a])
    return snapshots, changes


@pytest.mark.parametrize("seed", range(40), ids=[f"seed{seed}" for seed in range(40)])
def test_vacuum_deletes_exactly_what_no_version_from_keep_from_on_uses(tmp_path, seed):
    rng = random.Random(seed)
    table = tmp_path / "table"
    snapshots, changes = _random_log(table, rng, rng.randint(1, 25))
    keep_from = rng.randrange(len(snapshots))
    mentioned = {path for snapshot in snapshots[: keep_from + 1] for path in snapshot}
    still_used = set().union(*snapshots[keep_from:])
    expected = (mentioned - still_used) | {path for cdc in changes[: keep_from + 1] for path in cdc}

    assert set(delta_log.unused_files(str(table), keep_from)) == expected
    assert set(delta_log.live_files(str(table))) == snapshots[-1]
    step = TablePlan("hop", str(table), len(snapshots) - 1, keep_from, "the test", 0)
    assert vacuum(step, dry_run=True)["files_vacuumed"] == 0 and all(
        (table / unquote(path)).exists() for path in expected
    )
    done = vacuum(step, dry_run=False)
    assert done["files_vacuumed"] == len(expected)
    on_disk = {str(path.relative_to(table)) for path in table.rglob("*.parquet")}
    spelt = {unquote(path) for path in still_used}
    later_changes = {path for cdc in changes[keep_from + 1 :] for path in cdc}
    # every file a version from keep_from on uses, nothing else
    assert on_disk == spelt | later_changes
    assert not [
        path for path in table.rglob(".*.crc") if not path.with_name(path.name[1:-4]).exists()
    ]


def test_a_run_refuses_when_what_a_stream_must_read_next_is_gone(tmp_path):
    """The gap check on a lake real runs wrote: gold made to lag (its last
    batches' logs removed).
    """
    from spark_jobs.control.removable.table_files import check_readable, stream_gap
    from spark_jobs.control.status import unread_upstream_versions
    from spark_jobs.logs import checkpoint_log
    from spark_jobs.model.errors import DataGone
    from testkit.lakes import fixture_lake

    lake = fixture_lake("history", tmp_path)
    gold, silver = lake.spec.hop("gold"), lake.table(lake.spec.hop("silver"))
    assert stream_gap(HopState(lake, gold)) is None
    unread = []
    while not unread:  # gold's last batches undone by hand, until it has silver versions to read
        last = checkpoint_log.offset_batch_ids(lake.checkpoint(gold))[-1]
        for log in ("offsets", "commits"):
            Path(lake.checkpoint(gold), log, str(last)).unlink()
        unread = unread_upstream_versions(HopState(lake, gold))
    # lagging is fine while what it will read is there
    assert unread and stream_gap(HopState(lake, gold)) is None

    added = [
        action["add"]["path"]
        for action in delta_log.read_commit(silver, unread[0])
        if "add" in action
    ]
    Path(silver, unquote(added[0])).unlink()
    assert (
        stream_gap(HopState(lake, gold)) == f"data file {added[0]} of silver's version {unread[0]}"
    )
    with pytest.raises(DataGone, match=r"`lakehouse refresh ad_events --hop gold`"):
        check_readable(lake, lake.spec.hops)

    # a later commit, then the log cleaned up past gold's place
    newest = delta_log.versions(silver)[-1]
    logs = Path(silver, "_delta_log")
    (logs / f"{newest + 1:020d}.json").write_text((logs / f"{newest:020d}.json").read_text())
    for version in range(newest + 1):
        (logs / f"{version:020d}.json").unlink()
    assert (
        stream_gap(HopState(lake, gold))
        == f"silver's versions {unread[0]}..{newest} (its log starts at version {newest + 1})"
    )


def test_an_old_runs_increment_names_what_is_gone(tmp_path):
    """A quality check of an old run reads its versions' change feed: what it needs that is gone
    is named before Spark reads (``lakehouse quality --run``)."""
    from spark_jobs.control.removable.table_files import increment_gone
    from testkit.lakes import fixture_lake

    lake = fixture_lake("history", tmp_path)
    table = lake.table(lake.spec.hop("bronze"))
    versions = delta_log.versions(table)
    assert len(versions) >= 3
    first, middle, latest = versions[0], versions[1], versions[-1]
    assert (
        increment_gone(table, None, latest) is None
        and increment_gone(table, latest, latest) is None
    )
    added = [
        action["add"]["path"] for action in delta_log.read_commit(table, middle) if "add" in action
    ]
    Path(table, unquote(added[0])).unlink()
    assert increment_gone(table, middle, latest) is None  # the runs after it read other files
    label = "bronze/ad_events"
    assert (
        increment_gone(table, first, latest)
        == f"data file {added[0]} of {label}'s version {middle}"
    )
    Path(table, "_delta_log", f"{first:020d}.json").unlink()
    assert (
        increment_gone(table, None, middle) == f"version {first} of {label} (no longer in its log)"
    )


def test_the_log_is_cleaned_up_to_a_checkpoint_no_needed_version_is_older_than(tmp_path):
    """Log files older than the newest checkpoint at or before keep_from go; delta-rs (an
    independent reader and writer: 14 appends, checkpoints at versions 5 and 10) still reads
    every version from that checkpoint on, row for row as before."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from spark_jobs.control.removable.table_files import clean_log

    table = str(tmp_path / "table")
    for version in range(15):
        write_deltalake(table, pa.table({"n": [version]}), mode="append")
        if version in (5, 10):
            DeltaTable(table).create_checkpoint()
    logs = Path(table, "_delta_log")
    snapshots = {
        version: sorted(DeltaTable(table, version=version).to_pyarrow_table()["n"].to_pylist())
        for version in range(15)
    }

    def step(keep_from: int) -> TablePlan:
        return TablePlan("t", table, 14, keep_from, "test", None)

    # no checkpoint old enough: nothing goes
    assert delta_log.log_files_before(table, 4) == (None, [])
    before = sorted(path.name for path in logs.iterdir())
    assert clean_log(step(12), dry_run=True)["log_files_deleted"] == 0
    assert sorted(path.name for path in logs.iterdir()) == before
    assert delta_log.log_files_before(table, 9)[0] == 5
    done = clean_log(step(12), dry_run=False)
    expected = [
        name
        for name in before
        if name.lstrip(".")[:20].isdigit() and int(name.lstrip(".")[:20]) < 10
    ]
    assert done["log_files_deleted"] == len(expected) > 10
    assert sorted(path.name for path in logs.iterdir()) == sorted(set(before) - set(expected))
    assert delta_log.versions(table)[0] == 10
    for version in range(10, 15):
        assert (
            sorted(DeltaTable(table, version=version).to_pyarrow_table()["n"].to_pylist())
            == snapshots[version]
        )


@pytest.mark.parametrize("seed", range(12), ids=[f"seed{seed}" for seed in range(12)])
def test_files_no_commit_names_are_found_when_older_than_the_bound(tmp_path, seed):
    """Files a write left that no commit took (in partition folders and ``_change_data``) are
    listed when older than the bound; every file the log names, newer strays, hidden and ``_``
    files are not. Then vacuum deletes exactly those and what no version from keep_from uses."""
    import os

    rng = random.Random(seed)
    table = tmp_path / "table"
    snapshots, changes = _random_log(table, rng, rng.randint(1, 12))
    bound_s = 1_000_000
    for path in table.rglob("*"):  # every file the log names is older than the bound too
        os.utime(path, (bound_s - 100,) * 2)
    strays = {}
    for serial in range(rng.randint(0, 6)):
        folder = rng.choice(("day=2026-01-01 00:00", "_change_data", ""))
        path = table / folder / f"stray-{serial}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("s")
        old = rng.random() < 0.6
        os.utime(path, (bound_s - 10 if old else bound_s + 10,) * 2)
        strays[str(path)] = old
    (table / "_lakehouse_cleaned_log.json").write_text("{}")
    (table / "day=2026-01-01 00:00" / ".hidden.parquet").write_text("h")
    os.utime(table / "_lakehouse_cleaned_log.json", (1, 1))
    expected = sorted(path for path, old in strays.items() if old)

    assert delta_log.unnamed_files(str(table), bound_s * 1000) == expected
    keep_from = len(snapshots) - 1
    unused = set(delta_log.unused_files(str(table), keep_from))
    done = vacuum(
        TablePlan("hop", str(table), keep_from, keep_from, "the test", bound_s * 1000),
        dry_run=False,
    )
    assert done["files_vacuumed"] == len(unused) + len(expected)
    assert not any(Path(path).exists() for path in expected)
    assert all(Path(path).exists() for path, old in strays.items() if not old)
    assert all((table / unquote(path)).exists() for path in snapshots[-1])


def test_what_a_cleaned_log_said_of_backfills_is_kept(tmp_path):
    """After the log's early commits go, a table no backfill wrote still reads as such (a bronze
    stream then skips comparing its rows with a backfill's), one a backfill wrote too."""
    from spark_jobs.control.removable.table_files import backfill_writes, clean_log
    from testkit.lakes import fixture_lake

    lake = fixture_lake("replayed", tmp_path)
    # gold's version 2: a backfill's WRITE, no txn
    for hop, backfilled in (("bronze", False), ("gold", True)):
        table = lake.table(lake.spec.hop(hop))
        assert backfill_writes(table) is backfilled
        latest = delta_log.versions(table)[-1]
        assert (
            clean_log(TablePlan(hop, table, latest, latest, "test", None), dry_run=False)[
                "log_files_deleted"
            ]
            > 0
        )
        assert delta_log.versions(table)[0] > 0 and backfill_writes(table) is backfilled
        # cleaned by someone else: assume a backfill wrote
        Path(table, "_lakehouse_cleaned_log.json").unlink()
        assert backfill_writes(table) is True


def _aged(lake, hours: dict[str, list[float]], start_s: float) -> None:
    """Set each hop's checkpoint commit files' modification times: batch n at
    ``start_s + hours[n]`` h.
    """
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

    from spark_jobs.control.removable.table_files import plan, window_targets
    from spark_jobs.control.rollback import lineage
    from spark_jobs.model.lake import Lake
    from testkit.lakes import fixture_lake

    lake = fixture_lake("straddle", tmp_path)
    lake = Lake(lake.home, dataclasses.replace(lake.spec, retention={"rollback": "1 hour"}))
    start = 1_000_000_000
    _aged(lake, {"bronze": [0, 1, 2, 3], "silver": [0, 3], "gold": [0, 3]}, start)
    now_ms = int((start + 3.5 * 3600) * 1000)  # the window begins at hour 2.5

    def infos_of(hop):
        return lineage.hop_batches(HopState(lake, hop))

    targets = window_targets(lake, now_ms, infos_of)
    assert targets["bronze"] == 0 and targets["silver"] == 0 and targets["gold"] == 0
    bronze = {step.table: step for step in plan(lake, lake.spec.hops, now_ms, targets)}[
        lake.table(lake.spec.hop("bronze"))
    ]
    # Back to batch 0: the table as batch 0 left it, the version before batch 1's first commit.
    first_of_batch_1 = min(
        version
        for version in delta_log.versions(bronze.table)
        if (delta_log.transaction(bronze.table, version) or {}).get("version", -1) >= 1
    )
    assert bronze.keep_from == first_of_batch_1 - 1 and "back to batch 0" in bronze.held_by, bronze


def test_a_window_that_reaches_before_the_first_batch_keeps_the_first_batchs_version(tmp_path):
    """A rollback to before the first batch empties the table and needs no version; the oldest
    one inside the window that restores is to batch 0: its version is what stays."""
    from spark_jobs.control.removable.table_files import plan
    from testkit.lakes import fixture_lake

    lake = fixture_lake("straddle", tmp_path)
    targets = {hop.name: -1 for hop in lake.spec.hops}
    steps = {step.table: step for step in plan(lake, lake.spec.hops, 0, targets)}
    bronze = steps[lake.table(lake.spec.hop("bronze"))]
    first_of_batch_1 = min(
        version
        for version in delta_log.versions(bronze.table)
        if (delta_log.transaction(bronze.table, version) or {}).get("version", -1) >= 1
    )
    assert bronze.keep_from == first_of_batch_1 - 1 and "back to batch 0" in bronze.held_by, bronze


def test_a_reader_keeps_the_version_its_restart_asks_for_again(tmp_path):
    """A stream restarting asks its Delta source again for its last logged batch, from the offsets
    of the batch before it: ``maintain`` keeps the upstream's log from that batch's version, not
    only from the last batch's (Spark failed gold's next run with "transaction log starts at" the
    version after). Offsets read here as text, not through the checkpoint reader."""
    from spark_jobs.control.removable.table_files import plan
    from testkit.lakes import fixture_lake

    lake = fixture_lake("history", tmp_path)
    gold, silver = lake.spec.hop("gold"), lake.spec.hop("silver")
    offsets = Path(lake.checkpoint(gold), "offsets")

    def start(batch: int) -> int:
        return json.loads((offsets / str(batch)).read_text().splitlines()[2])["reservoirVersion"]

    logged = sorted(int(path.name) for path in offsets.iterdir() if path.name.isdigit())
    latest = delta_log.versions(lake.table(silver))[-1]
    # undone by hand: gold lags, its last two apart
    while start(logged[-2]) >= min(start(logged[-1]), latest):
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
    from spark_jobs.control.removable.table_files import _restored_from

    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    operations = ["WRITE", "MERGE", ("RESTORE", 0), "MERGE", ("RESTORE", 2), "MERGE"]
    for version, operation in enumerate(operations):
        name, target = operation if isinstance(operation, tuple) else (operation, None)
        info = {
            "operation": name,
            "operationParameters": {"version": target} if target is not None else {},
        }
        (log / f"{version:020d}.json").write_text(json.dumps({"commitInfo": info}) + "\n")
    table = str(tmp_path / "t")
    assert [_restored_from(table, version) for version in range(len(operations))] == [
        0,
        1,
        0,
        3,
        0,
        5,
    ]
    (log / f"{0:020d}.json").unlink()  # a target no longer in the log is still the version named
    assert _restored_from(table, 4) == 0
