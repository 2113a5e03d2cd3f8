"""``spark_jobs/logs/ops.py``: the ``_ops`` records ``status``, rollback and the UI read, against
the run records a real lake holds (``tests/fixtures/lakes/history``) and alerts and maintenance
records written here, read back as plain JSON files (no JVM). One hop's records round-tripping
is ``tests/unit/spark_jobs/model/test_records.py``'s."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from spark_jobs.logs.ops import (
    read_alerts,
    read_maintenance,
    read_record,
    read_records,
    write_alert,
    write_maintenance,
    write_record,
)
from spark_jobs.model.lake import Lake
from spark_jobs.model.records import MaintenanceRecord, RunRecord
from spark_jobs.model.spec import load_spec
from testkit.lakes import fixture_lake, spec_copy

pytestmark = pytest.mark.unit


def _empty_lake(tmp_path) -> Lake:
    spec = load_spec(spec_copy(tmp_path / "pipelines") / "ad_events" / "ad_events.yaml")
    return Lake(str(tmp_path / "lake"), spec)


def test_every_hops_records_come_oldest_first_and_a_rewritten_run_replaces_its_own(tmp_path):
    lake = fixture_lake("history", tmp_path)
    runs = Path(lake.runs)
    on_disk = [json.loads(path.read_text()) for path in sorted(runs.glob("*.json"))]
    by_start = sorted(on_disk, key=lambda record: record["started_at"])
    # the backfill b1 ran between r1 and r2: its file's name sorts first, its start does not
    assert [r["run_id"] for r in on_disk][0] == "b1" != by_start[0]["run_id"]
    assert read_records(lake) == by_start

    # a run's record is written when the hop starts, then again when it ends: one record
    first = by_start[0]
    rewritten = RunRecord(
        pipeline=first["pipeline"],
        hop=first["hop"],
        run_id=first["run_id"],
        mode=first["mode"],
        started_at=first["started_at"],
    )
    rewritten.finish("failed", "boom")
    write_record(lake, rewritten)
    assert len(read_records(lake)) == len(on_disk)
    again = read_record(lake, first["run_id"], first["hop"])
    assert (again["status"], again["error"]) == ("failed", "boom")
    assert sorted(path.name for path in runs.iterdir()) == sorted(
        f"{r['run_id']}.{r['hop']}.json" for r in on_disk
    )


def _at(seconds: int) -> str:
    """An alert's ``at``, as the freshness callback writes it."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def test_an_alert_file_is_named_by_its_time_and_dag_run_kept_inside_the_alerts_folder(tmp_path):
    lake = _empty_lake(tmp_path)
    later = {"at": _at(7200), "dag_run": "manual__../../x y+1", "stale": ["gold"]}
    earlier = {"at": _at(5400), "dag_run": None, "stale": []}
    paths = [write_alert(lake, later), write_alert(lake, earlier)]
    # every character but letters, digits, -, _ and . made a _: no / leaves the folder
    assert paths == [
        f"{lake.alerts}/{later['at'].replace(':', '_')}.manual__.._.._x_y_1.json",
        f"{lake.alerts}/{earlier['at'].replace(':', '_')}.None.json",
    ]
    assert sorted(path.name for path in Path(lake.alerts).iterdir()) == sorted(
        Path(path).name for path in paths
    )
    assert read_alerts(lake) == [earlier, later]


def test_maintenance_records_are_read_oldest_first_whatever_their_names(tmp_path):
    lake = _empty_lake(tmp_path)
    assert read_maintenance(lake) == []
    newer = MaintenanceRecord(lake.spec.name, maintenance_id="maintain-a", started_at=200.0)
    newer.tables.append({"table": "tables/bronze/ad_events", "files_before": 4, "files_after": 1})
    older = MaintenanceRecord(lake.spec.name, maintenance_id="maintain-b", started_at=100.0)
    older.records["runs"] = 3
    for record in (newer, older):
        record.finish()
        path = write_maintenance(lake, record)
        assert path == f"{lake.maintenance}/{record.maintenance_id}.json"
    read = read_maintenance(lake)
    # status shows the last one as the newest
    assert [record["maintenance_id"] for record in read] == ["maintain-b", "maintain-a"]
    assert read[0]["records"] == {"runs": 3}
    assert read[1]["tables"] == [
        {"table": "tables/bronze/ad_events", "files_before": 4, "files_after": 1}
    ]
