"""``spark_jobs/control/rollback/impact.py``: what a rollback plan takes away, as the rollback
page shows it, for plans made on the real lakes of ``tests/fixtures/lakes`` (``history``: runs
r0, r1, r2 of every hop and a backfill b1 of gold; ``replayed``: that lake rolled back to bronze's
batch 0 and run again as r3). The expected rows and files are read from the tables' Delta logs
(the rows in the files each commit added), the runs from the run records (no JVM)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from spark_jobs.control.rollback import planner
from spark_jobs.control.rollback.impact import takes_away
from spark_jobs.control.rollback.plans import Request
from testkit.lakes import fixture_lake

pytestmark = pytest.mark.unit


def _records(lake) -> list[dict]:
    return [json.loads(path.read_text()) for path in Path(lake.runs).glob("*.json")]


def _added(table: str, after: int, upto: int) -> tuple[int, int]:
    """Rows and files the commits ``(after, upto]`` of ``table`` added, from their add actions
    (the history lake's merges update no row, so every row they write is in a file they add)."""
    rows = files = 0
    for version in range(after + 1, upto + 1):
        log = Path(table, "_delta_log", f"{version:020d}.json")
        for line in log.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            if "add" in action:
                files += 1
                rows += json.loads(action["add"]["stats"])["numRecords"]
    return rows, files


def _last_version(table: str) -> int:
    return max(int(path.stem) for path in Path(table, "_delta_log").glob("*.json"))


def test_a_cascade_counts_per_table_the_rows_and_files_undone_and_names_the_runs(tmp_path):
    """Bronze back to batch 0 (r0's): every hop loses what r1 and r2 wrote, gold also the
    backfill's overwrite (it restores to r0's version); the runs are the newest first."""
    lake = fixture_lake("history", tmp_path)
    plan = planner.plan(lake, Request("bronze", to_batch=0))
    found = takes_away(lake, plan)
    records = _records(lake)
    by_run = {(record["run_id"], record["hop"]): record for record in records}

    assert [(each["hop"], each["below"]) for each in found] == [
        ("bronze", False),
        ("silver", True),
        ("gold", True),
    ]
    for each in found:
        hop = each["hop"]
        later = by_run["r1", hop]["batch_ids"] + by_run["r2", hop]["batch_ids"]
        assert each["batches"] == sorted(later)
        assert each["runs"] == [
            {
                "run_id": run,
                "started_at": by_run[run, hop]["started_at"],
                "mode": "run-once",
            }
            for run in ("r2", "r1")
        ]
        assert each["reread"] == plan.step(hop).reread
        tables = lake.tables_of(lake.spec.hop(hop))
        assert [table["table"] for table in each["tables"]] == [
            Path(table).relative_to(Path(lake.home, "tables")).as_posix() for table in tables
        ]
        for table, shown in zip(tables, each["tables"], strict=True):
            back_to = by_run["r0", hop]["tables"][table]["version_after"]
            now = _last_version(table)
            rows, files = _added(table, back_to, now)
            assert (shown["back_to"], shown["version_now"]) == (back_to, now)
            assert (shown["rows"], shown["files"]) == (rows, files), (hop, table)
    gold = found[2]["tables"][0]
    # b1's overwrite is among gold's commits undone: its rows count with the runs'
    b1 = by_run["b1", "gold"]["tables"][lake.table(lake.spec.hop("gold"))]["version_after"]
    assert gold["back_to"] < b1 <= gold["version_now"] and gold["rows"] > 0


def test_only_hops_that_lose_batches_are_listed_and_below_means_below_the_hop_asked_for(tmp_path):
    """A plan from silver: silver is the hop asked for, gold below it. A step that undoes no
    batch, or that is refused (beyond retention), takes nothing away: it is left out."""
    lake = fixture_lake("history", tmp_path)
    plan = planner.plan(lake, Request("silver", to_batch=0))
    assert [(each["hop"], each["below"]) for each in takes_away(lake, plan)] == [
        ("silver", False),
        ("gold", True),
    ]
    silver, gold = plan.hops

    def listed(*steps) -> list[str]:
        return [each["hop"] for each in takes_away(lake, dataclasses.replace(plan, hops=steps))]

    assert listed(silver, dataclasses.replace(gold, refused=["gold: beyond retention"])) == [
        "silver"
    ]
    assert listed(dataclasses.replace(silver, undone=[]), gold) == ["gold"]


def test_after_a_rollback_the_runs_undone_are_those_of_the_current_query_only(tmp_path):
    """replayed: r1's batch 1 of bronze was undone by the rollback, and r3 ran batch 1 again
    under the checkpoint's new query id. Rolling bronze back to batch 0 again undoes r3's batch,
    not r1's (gone already)."""
    lake = fixture_lake("replayed", tmp_path)
    plan = planner.plan(lake, Request("bronze", to_batch=0))
    [bronze] = [each for each in takes_away(lake, plan) if each["hop"] == "bronze"]
    current = json.loads(Path(lake.checkpoint(lake.spec.hop("bronze")), "metadata").read_text())
    expected = [
        record["run_id"]
        for record in sorted(_records(lake), key=lambda record: -record["started_at"])
        if record["hop"] == "bronze"
        and record["query_id"] == current["id"]
        and set(record["batch_ids"]) & set(bronze["batches"])
    ]
    assert expected == ["r3"]
    assert [run["run_id"] for run in bronze["runs"]] == expected
