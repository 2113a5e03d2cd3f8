"""``spark_jobs/control/removable/expired.py``: what ``lakehouse maintain`` prunes besides tables'
files, without a JVM: landing files past ``retention.landing`` (on a fixture lake's checkpoint),
records past ``retention.records`` (random record folders against a plain-Python rule), and the
backfills a pruned span refuses."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import random
import time
from pathlib import Path

import pytest

from spark_jobs.control.hop_state import HopState
from spark_jobs.control.removable import expired
from spark_jobs.control.rollback.lineage import hop_batches
from spark_jobs.logs import file_source_log
from spark_jobs.logs.fs import write_json
from spark_jobs.model.lake import Lake
from testkit.lakes import fixture_lake

pytestmark = pytest.mark.unit


DAY_MS = 24 * 3600 * 1000


def _with_retention(lake: Lake, **retention) -> Lake:
    return Lake(lake.home, dataclasses.replace(lake.spec, retention=retention))


def _logged(checkpoint: Path) -> dict[str, int]:
    """``{landing path: batch}`` from the file source log's files, read as plain JSON lines."""
    found = {}
    for path in sorted((checkpoint / "sources" / "0").iterdir()):
        for line in path.read_text().splitlines()[1:]:
            entry = json.loads(line)
            found[entry["path"].removeprefix("file://")] = int(entry["batchId"])
    return found


def _plan(lake: Lake, now_ms: int) -> expired.LandingPlan:
    plans = expired.landing_plan(
        lake, lake.spec.hops, now_ms, lambda hop: hop_batches(HopState(lake, hop))
    )
    assert len(plans) == 1  # ad_events: one landing folder, read by bronze
    return plans[0]


def test_expired_landing_files_are_those_committed_outside_the_window(tmp_path):
    lake = fixture_lake("history", tmp_path)
    bronze = Path(lake.checkpoint(lake.spec.hop("bronze")))
    logged = _logged(bronze)
    assert len(set(logged.values())) > 1, (
        "the fixture's bronze read files in one batch: the test exercises nothing"
    )
    (Path(lake.landing) / "events-new.json").write_text("")  # landed, not read yet
    gone = min(logged)
    Path(gone).unlink()  # read, then removed by hand: nothing to prune
    # The fixture's clocks: each file's time as its source log recorded it when the fixture was
    # made, its batches' commit times now set to the newest of those, and "now" an hour on.
    listed = max(
        int(entry["timestamp"]) for entry in file_source_log.file_source_entries(str(bronze))
    )
    for commit in (bronze / "commits").iterdir():
        os.utime(commit, (listed / 1000,) * 2)
    now = listed + 3_600_000

    assert (
        expired.landing_plan(
            lake, lake.spec.hops, now + 9 * DAY_MS, lambda hop: hop_batches(HopState(lake, hop))
        )
        == []
    )
    windowed = _with_retention(lake, rollback="1 day", landing="1 day")
    assert _plan(windowed, now).files == ()  # every batch is inside the window
    # Two days on, every batch is outside it; the last batch's commit gone: it runs again,
    # its files stay.
    last = max(logged.values())
    (bronze / "commits" / str(last)).unlink()
    plan = _plan(windowed, now + 2 * DAY_MS)
    assert set(plan.files) == {
        path for path, batch in logged.items() if batch < last and path != gone
    }
    assert plan.archive == f"{lake.home}/_archive/landing/ad_events" and plan.through_batch == {
        "bronze": last - 1
    }
    # Within the landing retention (a file younger than 3 days stays) nothing goes.
    assert (
        _plan(_with_retention(lake, rollback="1 day", landing="3 days"), now + 2 * DAY_MS).files
        == ()
    )

    before = sorted(path.name for path in Path(lake.landing).iterdir())
    done = expired.prune_landing(windowed, plan, (1_000, 2_000), dry_run=True)
    assert done["pruned"].startswith(f"would archive {len(plan.files)} landing files")
    assert sorted(path.name for path in Path(lake.landing).iterdir()) == before
    expired.prune_landing(windowed, plan, (1_000, 2_000), dry_run=False)
    moved = {Path(path).name for path in plan.files}
    assert sorted(path.name for path in Path(plan.archive).iterdir()) == sorted(moved)
    assert sorted(path.name for path in Path(lake.landing).iterdir()) == sorted(set(before) - moved)
    assert expired.pruned_span(windowed, "bronze") | {"files": len(moved)} == {
        "hop": "bronze",
        "landing": plan.folder,
        "archive": plan.archive,
        "files": len(moved),
        "first_ms": 1_000,
        "last_ms": 2_000,
    }


def test_delete_leaves_no_archive_and_spans_widen(tmp_path):
    lake = _with_retention(
        fixture_lake("history", tmp_path),
        rollback="1 day",
        landing="1 day",
        expired_landing="delete",
    )
    plan = _plan(lake, int(time.time() * 1000) + 2 * DAY_MS)
    half = dataclasses.replace(plan, files=plan.files[: len(plan.files) // 2])
    rest = dataclasses.replace(plan, files=plan.files[len(plan.files) // 2 :])
    expired.prune_landing(lake, half, (5_000, 6_000), dry_run=False)
    expired.prune_landing(lake, rest, (3_000, 4_000), dry_run=False)
    assert plan.archive is None and not Path(lake.home, "_archive").exists()
    assert not [path for path in plan.files if Path(path).exists()]
    span = expired.pruned_span(lake, "bronze")
    assert (span["files"], span["first_ms"], span["last_ms"], span["archive"]) == (
        len(plan.files),
        3_000,
        6_000,
        None,
    )


@pytest.mark.parametrize(
    "start, end, refused",
    [
        (0, 1_000, False),
        (0, 1_001, True),
        (2_000, 3_000, True),
        (2_001, 9_000, False),
        (1_500, 1_600, True),
    ],
)
def test_a_backfill_over_pruned_events_is_refused(tmp_path, start, end, refused):
    lake = fixture_lake("history", tmp_path)
    hops = lake.spec.hops
    assert expired.backfill_refusal(lake, hops, start, end) is None  # nothing pruned yet
    write_json(
        expired.horizons_folder(lake),
        "bronze.json",
        {
            "hop": "bronze",
            "landing": lake.landing,
            "archive": None,
            "files": 3,
            "first_ms": 1_000,
            "last_ms": 2_000,
        },
    )
    reason = expired.backfill_refusal(lake, hops, start, end)
    assert (reason is not None) == refused, reason
    if refused:
        assert (
            reason.startswith("bronze's landing files with events from")
            and "deleted by retention.landing" in reason
        )
    # silver reads a table
    assert expired.backfill_refusal(lake, (lake.spec.hop("silver"),), start, end) is None
    write_json(
        expired.horizons_folder(lake),
        "bronze.json",
        {
            "hop": "bronze",
            "landing": lake.landing,
            "archive": lake.archive_of(lake.spec.hop("bronze")),
            "files": 3,
            "first_ms": 1_000,
            "last_ms": 2_000,
        },
    )
    # archived: a backfill reads them there
    assert expired.backfill_refusal(lake, hops, start, end) is None


def _stamp(rng: random.Random, now: float) -> float:
    return now - rng.uniform(0, 200) * 86400


def test_records_older_than_their_retention_go_the_newest_of_each_hop_and_backfills_stay(tmp_path):
    lake = fixture_lake("history", tmp_path)
    for seed in range(12):
        rng = random.Random(seed)
        home = tmp_path / f"records-{seed}"
        retention = {"records": f"{rng.choice([30, 90, 120])} days"}
        each = Lake(str(home), dataclasses.replace(lake.spec, retention=retention))
        now = time.time()
        runs = [
            {
                "run_id": f"r{n}",
                "hop": rng.choice(["bronze", "silver"]),
                "started_at": _stamp(rng, now),
                "mode": rng.choice(["run-once", "run-once", "backfill"]),
            }
            for n in range(rng.randint(1, 25))
        ]
        journals = [
            {
                "plan": {},
                "status": rng.choice(["succeeded", "running"]),
                "created_at": _stamp(rng, now),
                "name": f"j{n}",
            }
            for n in range(rng.randint(0, 6))
        ]
        kept_alerts = [_stamp(rng, now) for _ in range(rng.randint(0, 5))]
        for run in runs:
            write_json(each.runs, f"{run['run_id']}.{run['hop']}.json", run)
            write_json(
                f"{home}/_ops/quality/{lake.spec.name}", f"{run['run_id']}.{run['hop']}.json", {}
            )
        for journal in journals:
            write_json(each.rollbacks, f"{journal['name']}.json", journal)
        for n, at in enumerate(kept_alerts):
            stamp = dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            write_json(each.alerts, f"a{n}.json", {"at": stamp})

        # The rule, in plain Python.
        cutoff = now - int(retention["records"].split()[0]) * 86400
        newest = {
            hop: max((run for run in runs if run["hop"] == hop), key=lambda run: run["started_at"])[
                "run_id"
            ]
            for hop in {run["hop"] for run in runs}
        }
        runs_gone = {
            run["run_id"]
            for run in runs
            if run["started_at"] < cutoff
            and newest[run["hop"]] != run["run_id"]
            and run["mode"] != "backfill"
        }
        journals_gone = [
            j for j in journals if j["created_at"] < cutoff and j["status"] == "succeeded"
        ]
        alerts_gone = [at for at in kept_alerts if int(at) < cutoff]  # ISO text keeps whole seconds

        counts = expired.prune_records(each, int(now * 1000), dry_run=True)
        assert counts["runs"] == len(runs_gone) and len(list(Path(each.runs).iterdir())) == len(
            runs
        )
        counts = expired.prune_records(each, int(now * 1000), dry_run=False)
        assert counts == {
            "runs": len(runs_gone),
            "rollbacks": len(journals_gone),
            "maintenance": 0,
            "alerts": len(alerts_gone),
            "refusals": 0,
        }, seed
        left = {path.name.split(".")[0] for path in Path(each.runs).iterdir()}
        assert left == {run["run_id"] for run in runs} - runs_gone
        quality = {
            path.name.split(".")[0]
            for path in Path(home, "_ops", "quality", lake.spec.name).iterdir()
        }
        assert quality == left  # a run's quality summary goes with its record
