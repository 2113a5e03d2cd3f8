"""``spark_jobs/control/events.py``: the event log kept in step with the ``_ops`` records, on a
real Delta table written and read by delta-rs (no JVM).

The model test draws a random history of two pipelines sharing one lake (runs started and
finished, with batches and gates; rollbacks; maintenance; alerts; refusals), interleaved with
syncs, two syncs of one pipeline racing in two processes, and syncs killed with SIGKILL at a
random moment. A plain-Python model keeps what happened, independently of the code that derives
events; after a last sync the table must hold each happening exactly once, numbered 1..n per
pipeline in the order things happened, with the counts the model wrote.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from spark_jobs.control import events
from spark_jobs.control.rollback.journals import write_journal
from spark_jobs.control.rollback.plans import Journal, JournalStatus, Plan, Request
from spark_jobs.logs import event_log
from spark_jobs.logs.ops import write_alert, write_maintenance, write_record, write_refusal
from spark_jobs.model.lake import Lake
from spark_jobs.model.records import MaintenanceRecord, RunRecord
from spark_jobs.model.spec import load_spec
from testkit.lakes import spec_copy
from testkit.paths import file_tree

pytestmark = pytest.mark.unit

HOPS = ("bronze", "silver", "gold")
ROOT = Path(__file__).resolve().parents[4]


def _lakes(tmp_path) -> dict[str, Lake]:
    home = str(tmp_path / "lake")
    one = load_spec(spec_copy(tmp_path / "one") / "ad_events" / "ad_events.yaml")
    other = load_spec(spec_copy(tmp_path / "two", name="other") / "ad_events" / "ad_events.yaml")
    return {spec.name: Lake(home, spec) for spec in (one, other)}


_SYNC = """
import sys
from pathlib import Path
from spark_jobs.control.events import sync
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import load_spec
print(sync(Lake(sys.argv[1], load_spec(Path(sys.argv[2])))))
"""


def _syncer(lake: Lake, spec_path: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", _SYNC, lake.home, str(spec_path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'plugins'}"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


class History:
    """What the random steps did, kept apart from the code under test: per pipeline, the id of
    each happening with what its event must say, and the order they happened in."""

    def __init__(self, rng: random.Random, lakes: dict[str, Lake]):
        self.rng, self.lakes = rng, lakes
        self.expected: dict[str, dict[str, dict]] = {name: {} for name in lakes}
        self.order: dict[str, list[str]] = {name: [] for name in lakes}
        self.running: list[RunRecord] = []
        self.rollbacks: list[tuple[str, Journal]] = []
        self.clock = 1_000_000.0 + time.time()  # now, and later: within the records' retention
        self.runs = 0

    def tick(self) -> float:
        self.clock += self.rng.randint(1, 50)
        return self.clock

    def happened(self, pipeline: str, event_id: str, **what) -> None:
        self.expected[pipeline][event_id] = what
        self.order[pipeline].append(event_id)

    def start_run(self) -> None:
        pipeline = self.rng.choice(sorted(self.lakes))
        hop = self.rng.choice(HOPS)
        self.runs += 1
        mode = self.rng.choice(("run-once", "backfill"))
        record = RunRecord(pipeline, hop, f"r{self.runs}", mode, started_at=self.tick())
        write_record(self.lakes[pipeline], record)
        self.running.append(record)
        self.happened(pipeline, f"{pipeline}/run/r{self.runs}/{hop}/started", type="run_started")

    def finish_run(self) -> None:
        record = self.running.pop(self.rng.randrange(len(self.running)))
        key = f"{record.pipeline}/run/{record.run_id}/{record.hop}"
        for batch in range(self.rng.randint(0, 3)):
            rows = self.rng.randint(0, 500)
            at = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(self.tick()))
            record.progress.append({"batch_id": batch, "timestamp": at, "rows": rows})
            record.batch_ids.append(batch)
            self.happened(record.pipeline, f"{key}/batch/{batch}", type="batch", batch=batch)
        status = self.rng.choice(("succeeded", "succeeded", "failed", "skipped"))
        record.rows_in = self.rng.randint(0, 1000)
        record.rows_out = self.rng.randint(0, 1000)
        self.clock += 1
        record.finish(status, "boom" if status == "failed" else None)
        record.ended_at = self.tick()
        level = "ERROR" if status == "failed" else "INFO"
        self.happened(
            record.pipeline,
            f"{key}/finished",
            type="run_finished",
            level=level,
            rows=(record.rows_in, record.rows_out),
        )
        if status == "succeeded" and self.rng.random() < 0.5:
            verdict = self.rng.choice(("passed", "failed"))
            record.quality = {"gate": verdict, "failed": [], "warned": [], "rows": 1, "seconds": 0}
            level = "ERROR" if verdict == "failed" else "INFO"
            self.happened(record.pipeline, f"{key}/gate", type="gate", level=level)
        write_record(self.lakes[record.pipeline], record)

    def start_rollback(self) -> None:
        pipeline = self.rng.choice(sorted(self.lakes))
        self.runs += 1
        rollback_id = f"rb-{self.runs}"
        plan = Plan(rollback_id, pipeline, Request("bronze", to_batch=0), 0)
        journal = Journal(plan, created_at=self.tick(), origin={"user": "u", "interface": "cli"})
        write_journal(self.lakes[pipeline], journal)
        self.rollbacks.append((pipeline, journal))
        self.happened(
            pipeline, f"{pipeline}/rollback/{rollback_id}/started", type="rollback_started"
        )

    def finish_rollback(self) -> None:
        pipeline, journal = self.rollbacks.pop(self.rng.randrange(len(self.rollbacks)))
        journal.status = JournalStatus.SUCCEEDED
        journal.finished_at = self.tick()
        journal.duration_s = journal.finished_at - journal.created_at
        write_journal(self.lakes[pipeline], journal)
        key = f"{pipeline}/rollback/{journal.rollback_id}/finished"
        self.happened(pipeline, key, type="rollback_finished")

    def other(self) -> None:
        pipeline = self.rng.choice(sorted(self.lakes))
        lake = self.lakes[pipeline]
        kind = self.rng.choice(("maintenance", "alert", "refusal"))
        at = self.tick()
        if kind == "maintenance":
            record = MaintenanceRecord(pipeline, maintenance_id=f"m{at:.0f}", started_at=at)
            record.ended_at = at
            write_maintenance(lake, record)
            self.happened(pipeline, f"{pipeline}/maintenance/m{at:.0f}", type="maintenance")
        elif kind == "alert":
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
            write_alert(lake, {"at": stamp, "dag_run": f"d{at:.0f}", "stale": ["gold"]})
            self.happened(pipeline, f"{pipeline}/alert/{stamp}/d{at:.0f}", type="freshness_alert")
        else:
            refusal = {"refusal_id": f"x{at:.0f}", "at": at, "error": "PipelineBusy"}
            write_refusal(lake, refusal | {"message": "busy", "origin": {"command": "run"}})
            self.happened(pipeline, f"{pipeline}/refused/x{at:.0f}", type="refused")


def _race(lake: Lake, spec_path: Path, rng: random.Random, kill: bool) -> None:
    """Two syncs of one pipeline at once; with ``kill``, one more killed at a random moment."""
    racers = [_syncer(lake, spec_path) for _ in range(2)]
    if kill:
        doomed = _syncer(lake, spec_path)
        time.sleep(rng.uniform(0.2, 1.5))
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
    for racer in racers:
        _out, err = racer.communicate(timeout=120)
        assert racer.returncode == 0, err


def _step(history: History, spec_paths: dict[str, Path], races: int) -> int:
    """One random step; how many races have run."""
    rng, lakes = history.rng, history.lakes
    roll = rng.random()
    if roll < 0.25:
        history.start_run()
    elif roll < 0.5 and history.running:
        history.finish_run()
    elif roll < 0.58:
        history.start_rollback()
    elif roll < 0.66 and history.rollbacks:
        history.finish_rollback()
    elif roll < 0.78:
        history.other()
    elif roll < 0.88 or races >= 4:
        events.sync(lakes[rng.choice(sorted(lakes))])
    else:
        name = rng.choice(sorted(lakes))
        _race(lakes[name], spec_paths[name], rng, kill=races % 2 == 1)
        return races + 1
    return races


def _check_logged(history: History, table: str, name: str) -> None:
    logged = event_log.read(table, event_log.Filter(pipeline=name))
    ids = [event["event_id"] for event in logged]
    assert [key for key, count in Counter(ids).items() if count > 1] == []
    assert set(ids) == set(history.expected[name])
    assert sorted(event["sequence"] for event in logged) == list(range(1, len(logged) + 1))
    by_id = {event["event_id"]: event for event in logged}
    for key, what in history.expected[name].items():
        event = by_id[key]
        assert event["event_type"] == what["type"]
        assert event["level"] == what.get("level", event["level"])
        assert event["batch"] == what.get("batch")
        if "rows" in what:
            assert (event["details"]["rows_in"], event["details"]["rows_out"]) == what["rows"]
    # a run's events numbered in the order they happened (within a sync by time, across syncs
    # by sync)
    runs: dict[str, list[str]] = {}
    for key in history.order[name]:
        if "/run/" in key:
            runs.setdefault(key.split("/batch/")[0].rsplit("/", 1)[0], []).append(key)
    for steps in runs.values():
        sequences = [by_id[key]["sequence"] for key in steps]
        assert sequences == sorted(sequences), steps


@pytest.mark.parametrize("seed", [3])
def test_a_random_history_is_logged_once_each_in_the_order_it_happened(tmp_path, seed):
    lakes = _lakes(tmp_path)
    spec_paths = {
        name: Path(tmp_path / folder / "ad_events" / "ad_events.yaml")
        for name, folder in (("ad_events", "one"), ("other", "two"))
    }
    history = History(random.Random(seed), lakes)
    races = 0
    for _step_number in range(60):
        races = _step(history, spec_paths, races)
    assert races >= 2  # the seed races (and kills) at least once each
    for lake in lakes.values():
        events.sync(lake)
        assert events.sync(lake) == 0  # nothing left to add
    for name in lakes:
        _check_logged(history, lakes["ad_events"].events, name)


def test_events_past_the_records_retention_are_not_logged_and_maintain_deletes_them(tmp_path):
    lake = _lakes(tmp_path)["ad_events"]
    now = time.time()
    old = RunRecord("ad_events", "bronze", "old", "run-once", started_at=now - 100 * 86400)
    new = RunRecord("ad_events", "bronze", "new", "run-once", started_at=now - 10)
    for record in (old, new):
        write_record(lake, record)
    assert events.sync(lake) == 1  # the default retention.records is 90 days
    logged = event_log.read(lake.events)
    assert [event["event_id"] for event in logged] == ["ad_events/run/new/bronze/started"]

    # events logged while they were young age out: maintain deletes them, then compacts
    aged = [
        event_log.Event(f"aged/{number}", now - days * 86400, "ad_events", "batch", "m")
        for number, days in enumerate((95, 91, 89))
    ]
    for event in aged:  # one commit each: three more small files
        event_log.append_missing(lake.events, "ad_events", [event])
    tree = file_tree(Path(lake.events))
    dry = events.maintain(lake, int(now * 1000), dry_run=True)
    assert dry == {"events_deleted": 2, "files_compacted": 0, "files_vacuumed": 0}
    assert file_tree(Path(lake.events)) == tree
    done = events.maintain(lake, int(now * 1000), dry_run=False)
    assert done["events_deleted"] == 2 and done["files_compacted"] >= 2
    left = [event["event_id"] for event in event_log.read(lake.events)]
    assert left == ["aged/2", "ad_events/run/new/bronze/started"]


GUIDE = ROOT / "docs" / "guides" / "event-log.md"


def guide_blocks(language: str) -> list[str]:
    """The code blocks of ``language`` in the event log's guide, in order."""
    text = GUIDE.read_text()
    fence = f"```{language}\n"
    return [part.split("```", 1)[0] for part in text.split(fence)[1:]]


def test_the_guides_pandas_example_reads_the_log_a_sync_wrote(tmp_path, capsys):
    import contextlib
    import io

    lake = _lakes(tmp_path)["ad_events"]
    now = time.time()
    for number, (hop, rows) in enumerate((("bronze", 7), ("silver", 5), ("bronze", 4))):
        record = RunRecord("ad_events", hop, f"r{number}", "run-once", started_at=now - 60)
        record.rows_out = rows
        record.finish("succeeded")
        write_record(lake, record)
    events.sync(lake)
    [example] = guide_blocks("python")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(example.replace("/path/to/lake", lake.home), {})  # noqa: S102 - the guide's own code
    printed = dict(line.split() for line in out.getvalue().splitlines()[1:-1])
    assert printed == {"bronze": "11", "silver": "5"}
