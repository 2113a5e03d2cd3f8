"""``spark_jobs/model/records.py``: run and maintenance records, against the clock, plain JSON and
the ``_ops`` files :mod:`spark_jobs.logs.ops` writes them to (an example's spec; no JVM)."""

from __future__ import annotations

import datetime as dt
import json
import re
import time

import pytest

from spark_jobs.logs.ops import read_record, read_records, write_record
from spark_jobs.model.lake import Lake
from spark_jobs.model.records import (
    MaintenanceRecord,
    RunRecord,
    TableChange,
    new_maintenance_id,
    new_run_id,
)
from spark_jobs.model.spec import load_spec
from spark_jobs.service.commands import checked_run_id
from testkit.lakes import spec_copy

pytestmark = pytest.mark.unit

RUN_ID = re.compile(r"(\d{8}T\d{6}Z)-[0-9a-f]{6}")


def test_a_run_id_is_the_utc_second_it_was_made_then_a_random_suffix():
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    ids = [new_run_id() for _ in range(20)]
    after = dt.datetime.now(dt.UTC)
    assert len(set(ids)) == len(ids)  # unique within one second
    for run_id in ids:
        made = RUN_ID.fullmatch(run_id)
        assert made, run_id
        moment = dt.datetime.strptime(made[1], "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
        assert before <= moment <= after
        # one can be given back to the CLI's --run-id as it is
        assert checked_run_id(run_id) == run_id
    maintenance_id = new_maintenance_id()
    assert maintenance_id.startswith("maintain-")
    assert RUN_ID.fullmatch(maintenance_id.removeprefix("maintain-"))


def test_a_run_record_starts_running_and_finishes_with_its_status_error_and_duration():
    before = time.time()
    record = RunRecord(pipeline="team", hop="silver", run_id="r1", mode="batch")
    assert record.status == "running" and record.error is None and record.ended_at is None
    assert before <= record.started_at <= time.time()
    other = RunRecord(pipeline="team", hop="gold", run_id="r1", mode="batch")
    record.batch_ids.append(3)
    record.tables["t"] = TableChange(None, 0)
    assert (other.batch_ids, other.tables) == ([], {})  # no list or dict shared between records

    record.started_at = time.time() - 2.5
    record.finish("failed", "boom")
    assert (record.status, record.error) == ("failed", "boom")
    assert record.started_at + 2.5 <= record.ended_at <= time.time()
    assert record.duration_s == pytest.approx(record.ended_at - record.started_at, abs=0.0005)
    assert record.duration_s == round(record.duration_s, 3)


def test_records_carry_the_platform_clock_moved_by_the_clock_shift(monkeypatch):
    monkeypatch.setenv("LAKEHOUSE_CLOCK_SHIFT", "8 days")
    shift_s = 8 * 24 * 3600
    before = time.time() + shift_s
    run = RunRecord(pipeline="team", hop="silver", run_id="r1", mode="batch")
    maintenance = MaintenanceRecord("team")
    assert before <= run.started_at <= time.time() + shift_s
    assert before <= maintenance.started_at <= time.time() + shift_s
    run.finish("succeeded")
    maintenance.finish()
    # both ends moved alike: the durations are the real ones
    assert 0 <= run.duration_s < 60 and 0 <= maintenance.duration_s < 60


def test_a_run_record_round_trips_through_its_ops_file(tmp_path):
    spec = load_spec(spec_copy(tmp_path / "pipelines") / "ad_events" / "ad_events.yaml")
    lake = Lake(str(tmp_path / "lake"), spec)
    record = RunRecord(
        pipeline=spec.name,
        hop="silver",
        run_id="r2",
        mode="backfill",
        started_at=200.0,
        batch_ids=[4, 5],
        tables={"tables/silver": TableChange(None, 3), "quarantine/silver": TableChange(1, 1)},
        rows_in=10,
        rows_out=7,
        rows_dropped_by_rule={"no_user": 3},
        quality={"success": True},
    )
    record.finish("succeeded")
    older = RunRecord(pipeline=spec.name, hop="silver", run_id="r1", mode="batch", started_at=100.0)
    write_record(lake, record)
    write_record(lake, older)

    written = read_record(lake, "r2", "silver")
    assert written == json.loads(json.dumps(record.to_dict()))  # plain JSON, nothing made a str
    # what the rollback planner reads of a table's versions
    assert written["tables"]["tables/silver"] == {"version_before": None, "version_after": 3}
    tables = {name: TableChange(**change) for name, change in written["tables"].items()}
    assert RunRecord(**{**written, "tables": tables}) == record
    assert [r["run_id"] for r in read_records(lake, "silver")] == ["r1", "r2"]
    assert read_record(lake, "r2", "gold") is None


def test_maintenance_totals_sum_the_tables_and_count_no_pruning_in_a_dry_run():
    tables = [
        {
            "table": "tables/bronze",
            "files_before": 10,
            "files_after": 2,
            "stored_before": 1000,
            "stored_after": 700,
            "files_compacted": 8,
            "files_vacuumed": 9,
            "bytes_vacuumed": 300,
            "log_files_deleted": 4,
        },
        # a table with nothing to vacuum or clean: keys missing or None count as 0
        {
            "table": "tables/silver",
            "files_before": 3,
            "files_after": 3,
            "stored_before": 50,
            "stored_after": 50,
            "files_vacuumed": None,
        },
    ]
    state = [{"hop": "silver", "state_files": 5}, {"hop": "gold", "state_files": 2}]
    landing = [{"files": 6, "pruned": "6 files archived"}]
    records = {"runs": 3, "alerts": 1}
    done = MaintenanceRecord("team", tables=tables, state=state, landing=landing, records=records)
    same_tables = {
        "files_before": 13,
        "files_after": 5,
        "stored_before": 1050,
        "stored_after": 750,
        "files_compacted": 8,
        "files_vacuumed": 9,
        "bytes_vacuumed": 300,
        "log_files_deleted": 4,
    }
    assert done.totals() == same_tables | {
        "state_files_deleted": 7,
        "landing_pruned": 6,
        "records_pruned": 4,
    }
    dry = MaintenanceRecord(
        "team", dry_run=True, tables=tables, state=state, landing=landing, records=records
    )
    assert dry.totals() == same_tables | {
        "state_files_deleted": 0,
        "landing_pruned": 0,
        "records_pruned": 0,
    }
    assert dry.maintenance_id != done.maintenance_id
    document = done.to_dict()
    assert document["totals"] == done.totals()
    assert json.loads(json.dumps(document)) == document
