"""Code updates: a team changes its pipeline's code between runs.

Each run records each hop's query fingerprint (the analysed plan and the spec's parameters);
``run`` compares a changed hop's new query with the one its checkpoint was run with before any
query starts. A change the state can follow (silver's filter: a stateless hop) goes on with
the new code; one it cannot (gold's window) is refused with one line naming ``lakehouse
refresh``, and the refresh recomputes the hops with the new code. The tables are compared with
the code's rules applied to the landing files, here in plain Python.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

from spark_jobs.cli import main
from spark_jobs.logs import delta_log
from testkit.expected import skeleton_events

pytestmark = [pytest.mark.spark, pytest.mark.integration]

NAME = "upd"
START_MS = 1_772_323_200_000  # 2026-03-01T00:00:00Z
TABLES = {
    "bronze": f"tables/bronze/{NAME}",
    "silver": f"tables/silver/{NAME}",
    "gold": f"tables/gold/{NAME}_per_minute",
}


def events_of(files: list[Path]) -> list[dict]:
    """The valid events of these landing files (the skeleton's bronze rules),
    amounts as decimals.
    """
    return [{**event, "amount": Decimal(str(event["amount"]))} for event in skeleton_events(files)]


def gold_of(silver: list[dict], window_ms: int) -> dict:
    counts: Counter = Counter()
    sums: Counter = Counter()
    for event in silver:
        key = (event["kind"], event["event_time"] - event["event_time"] % window_ms)
        counts[key] += 1
        sums[key] += event["amount"]
    return {key: (count, sums[key]) for key, count in counts.items()}


def tables(spark, home: Path) -> dict:
    def rows(hop: str):
        return spark.read.format("delta").load(str(home / TABLES[hop])).collect()

    return {
        "silver": sorted(row.id for row in rows("silver")),
        "gold": {
            (row.kind, int(row.window_start.timestamp() * 1000)): (row.events, row.amount)
            for row in rows("gold")
        },
    }


def expected(silver: list[dict], window_ms: int) -> dict:
    return {"silver": sorted(event["id"] for event in silver), "gold": gold_of(silver, window_ms)}


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))
    # The next command imports the team's code anew, as a new process would.
    for name in [name for name in sys.modules if name.startswith("lakehouse_pipelines_")]:
        del sys.modules[name]


def _land(home: Path, minute: int, seed: int) -> list[Path]:
    before = (
        set((home / "landing" / NAME).glob("*.json"))
        if (home / "landing" / NAME).exists()
        else set()
    )
    assert (
        main(
            [
                "generate",
                NAME,
                "--events",
                "300",
                "--seed",
                str(seed),
                "--bad-fraction",
                "0.02",
                "--start",
                f"2026-03-01T00:{minute:02d}:00",
            ]
        )
        == 0
    )
    return sorted(set((home / "landing" / NAME).glob("*.json")) - before)


def test_a_compatible_change_goes_on_an_incompatible_one_is_refused_and_refresh_recomputes(
    spark, airflow_in_process, tmp_path, monkeypatch, capsys
):
    specs, home = tmp_path / "team", tmp_path / "lake"
    specs.mkdir()
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(specs))
    monkeypatch.setenv("LAKEHOUSE_HOME", str(home))
    assert main(["new", NAME]) == 0
    # small data: one state partition
    _edit(specs / NAME / f"{NAME}.yaml", "shuffle_partitions: 4", "shuffle_partitions: 1")
    # the gates are not what is tested here
    monkeypatch.setenv("LAKEHOUSE_QUALITY", str(tmp_path / "no-suites"))
    first = events_of(_land(home, 0, seed=1))
    assert main(["run", NAME]) == 0
    assert tables(spark, home) == expected([e for e in first if e["amount"] > 0], 60_000)
    records = {
        path.name.split(".")[1]: json.loads(path.read_text())
        for path in (home / "_ops/runs" / NAME).glob("*")
    }
    assert (
        records["gold"]["fingerprint"]["stateful"] == ["Aggregate"]
        and records["silver"]["fingerprint"]["state"] is None
    )

    # A compatible change: silver (stateless) keeps amounts above 50 now. The stream goes on;
    # rows written before keep the old code's results.
    _edit(specs / NAME / f"{NAME}_transforms.py", 'F.col("amount") > 0', 'F.col("amount") > 50')
    second = events_of(_land(home, 10, seed=2))
    capsys.readouterr()
    assert main(["run", NAME]) == 0
    assert (
        "[silver] the query changed since the last run, not its state: the stream goes on"
        in capsys.readouterr().err
    )
    silver = [e for e in first if e["amount"] > 0] + [e for e in second if e["amount"] > 50]
    assert tables(spark, home) == expected(silver, 60_000)

    # An incompatible change: gold's window. Refused before any query starts (no hop ran: no
    # run record, no table version), one line naming the fix.
    _edit(specs / NAME / f"{NAME}.yaml", "window: 1 minute", "window: 2 minutes")
    versions = {hop: delta_log.table_version(str(home / table)) for hop, table in TABLES.items()}
    runs = sorted((home / "_ops/runs" / NAME).glob("*"))
    capsys.readouterr()
    assert main(["run", NAME]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and error.startswith(
        "error: hop gold's query changed since its checkpoint was "
        "written and what its state (Aggregate) was built by changed"
    )
    assert f"`lakehouse refresh {NAME} --hop gold`" in error
    assert {
        hop: delta_log.table_version(str(home / table)) for hop, table in TABLES.items()
    } == versions
    assert sorted((home / "_ops/runs" / NAME).glob("*")) == runs
    # From a point: gold's state would be rebuilt there with the new code (the plan says so).
    assert (
        main(["refresh", NAME, "--hop", "gold", "--from", "2100-01-01T00:00:00", "--dry-run"]) == 0
    )
    assert re.search(
        r"gold: its state is rebuilt at batch \d+ with the new code", capsys.readouterr().out
    )
    assert main(["refresh", NAME, "--hop", "silver", "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert [step["hop"] for step in plan["hops"]] == ["silver", "gold"]
    assert {
        hop: delta_log.table_version(str(home / table)) for hop, table in TABLES.items()
    } == versions

    # The fix, through the refresh DAG (plan, then the refresh's Spark task, then the journal's
    # check): silver and gold from the start with the code as it is now. Every table is the new
    # code applied to all the data; then runs go on with it.
    from testkit.airflow import dag_test

    _run_id, state, tasks = dag_test(
        f"{NAME}__refresh", conf={"hop": "silver", "from_time": None, "dry_run": False}
    )
    assert state == "success" and tasks == {
        "plan": "success",
        "refresh": "success",
        "verify": "success",
    }, tasks
    silver = [e for e in first + second if e["amount"] > 50]
    assert tables(spark, home) == expected(silver, 120_000)

    # Producers start resending events, so silver de-duplicates now: a stateful operator where
    # there was none, which its checkpoint cannot follow. Refreshed from a point between two runs:
    # silver's state is rebuilt there from bronze with the new code (the events read before the
    # point are in it), the run after the point is replayed with it.
    third = _land(home, 20, seed=3)
    assert main(["run", NAME]) == 0
    time.sleep(1.1)  # commit times have the filesystem's resolution
    point = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    time.sleep(1.1)
    fourth = _land(home, 21, seed=4)
    assert main(["run", NAME]) == 0
    silver += [e for e in events_of(third + fourth) if e["amount"] > 50]
    _edit(
        specs / NAME / f"{NAME}_transforms.py",
        'return events.where(F.col("amount") > 50)',
        'return events.withWatermark("event_ts", "10 minutes").dropDuplicates(["id", "event_time"])'
        '.where(F.col("amount") > 50)',
    )
    capsys.readouterr()
    assert main(["run", NAME]) == 2
    assert "its stateful operators changed (none -> Deduplicate)" in capsys.readouterr().err
    # The state's checkpoint is swapped while the refresh holds the pipeline's lock (a run between
    # the rollback and the swap would read the old checkpoint or have it replaced under it).
    from spark_jobs.control.coordination.lock import pipeline_lock
    from spark_jobs.control.rollback import rebuild
    from spark_jobs.model.errors import PipelineBusy
    from spark_jobs.service import open_lake

    swaps = []

    def restart_under_the_lock(state, *args):
        with pytest.raises(PipelineBusy), pipeline_lock(open_lake(NAME), "probe", wait_s=0):
            pass
        swaps.append(state.hop.name)
        return real_restart(state, *args)

    real_restart = rebuild.restart_at
    monkeypatch.setattr(rebuild, "restart_at", restart_under_the_lock)
    assert main(["refresh", NAME, "--hop", "silver", "--from", point, "--json"]) == 0
    assert swaps == ["silver"]
    done = json.loads(capsys.readouterr().out)
    assert [step["hop"] for step in done["plan"]["hops"]] == ["silver", "gold"] and done["plan"][
        "hops"
    ][0]["undone"] == [2]
    assert "silver: its state is rebuilt at batch 1 with the new code" in " ".join(
        done["plan"]["notes"]
    )
    assert tables(spark, home) == expected(silver, 120_000)
    # Resent lines of the runs before and after the point (within the watermark): silver
    # keeps one of each.
    resent = [line for path in (third[0], fourth[0]) for line in path.read_text().splitlines()[:40]]
    (home / "landing" / NAME / "resent.json").write_text("\n".join(resent) + "\n")
    assert main(["run", NAME]) == 0
    assert tables(spark, home) == expected(silver, 120_000)
    # Back to the rebuilt batch 0 (the state-only one) and replayed: the same tables again.
    assert main(["rollback", NAME, "--hop", "silver", "--to-batch", "0"]) == 0
    assert main(["run", NAME]) == 0
    assert tables(spark, home) == expected(silver, 120_000)
