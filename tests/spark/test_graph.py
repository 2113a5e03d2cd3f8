"""Hops as a graph: two ingest hops with landing folders of their own, a hop with two
hops below it, branches that never meet. A team's pipeline made by ``lakehouse new`` and
re-shaped here; nothing in the platform changes for it.

Every table is compared with what the landing files say, computed here in plain Python; a
rollback of one ingest hop undoes exactly its branch (both hops below it) and leaves the other
branch's tables and checkpoints untouched, and the replay makes every table equal again.
"""

from __future__ import annotations

import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest

from spark_jobs.cli import main
from spark_jobs.logs import checkpoint_log, delta_log
from testkit.expected import delta_rows, skeleton_events, utc_ms

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

NAME = "forks"
SPEC = f"""\
name: {NAME}
description: two sources, a fan-out, branches that never meet
schedule: "*/5 * * * *"
shuffle_partitions: 2
window: 1 minute
allowed_lateness: 1 minute
hops:
  - {{name: bronze_a, kind: ingest, landing: landing/{NAME}_a, table: tables/bronze/{NAME}_a,
     quarantine: tables/quarantine/{NAME}_a, time_column: event_time}}
  - {{name: bronze_b, kind: ingest, landing: landing/{NAME}_b, table: tables/bronze/{NAME}_b,
     quarantine: tables/quarantine/{NAME}_b, time_column: event_time}}
  - {{name: positive_a, kind: append, upstream: bronze_a, table: tables/silver/{NAME}_positive_a, time_column: event_time}}
  - {{name: other_a, kind: append, upstream: bronze_a, table: tables/silver/{NAME}_other_a, time_column: event_time}}
  - {{name: positive_b, kind: append, upstream: bronze_b, table: tables/silver/{NAME}_positive_b, time_column: event_time}}
  - {{name: gold_a, kind: aggregate, upstream: positive_a, table: tables/gold/{NAME}_a, keys: [kind, window_start],
     time_column: window_start}}
  - {{name: gold_b, kind: aggregate, upstream: positive_b, table: tables/gold/{NAME}_b, keys: [kind, window_start],
     time_column: window_start, window: 3 minutes, allowed_lateness: 5 minutes}}
"""  # noqa: E501
# gold_b's own event time (the pipeline's is gold_a's): its windows and its watermark delay, in ms.
EVENT_TIME = {"gold_a": (60_000, 60_000), "gold_b": (180_000, 300_000)}
MODULE = f"""\
from pyspark.sql import functions as F

from . import {NAME}_transforms as transforms

TRANSFORMS = {{
    "bronze_a": lambda frame, spec, inputs: transforms.parse(frame),
    "bronze_b": lambda frame, spec, inputs: transforms.parse(frame),
    "positive_a": lambda frame, spec, inputs: transforms.positive(frame),
    "other_a": lambda frame, spec, inputs: frame.where(F.col("amount") <= 0).select(*transforms.SILVER_COLUMNS),
    "positive_b": lambda frame, spec, inputs: transforms.positive(frame),
    "gold_a": lambda frame, spec, inputs: transforms.per_minute(frame, spec.window, spec.allowed_lateness),
    "gold_b": lambda frame, spec, inputs: transforms.per_minute(
        frame.join(F.broadcast(inputs["kinds"]), "kind", "left_semi"), spec.window, spec.allowed_lateness),
}}
# gold_b's transform reads a static input (every kind, so it keeps every row): the stream's batch
# and its recount of the windows a batch touched both run with it.
STATIC_INPUTS = {{"gold_b": lambda spark, lake: {{"kinds": spark.createDataFrame([("a",), ("b",), ("c",)], "kind string")}}}}


def split_ingested(parsed):
    return transforms.valid(parsed), transforms.invalid(parsed)
"""  # noqa: E501
START_MS = 1_772_323_200_000


def _valid_events(folder: Path) -> list[dict]:
    return skeleton_events(sorted(folder.glob("*.json")))


def _expected(home: Path) -> dict[str, object]:
    """Each table's content as the landing files say: ids for the row tables, counts and sums per
    kind and window for each gold (a minute for gold_a, three for gold_b)."""
    a, b = _valid_events(home / f"landing/{NAME}_a"), _valid_events(home / f"landing/{NAME}_b")
    positive = lambda events: sorted(e["id"] for e in events if Decimal(str(e["amount"])) > 0)  # noqa: E731

    def gold(events: list[dict], window_ms: int) -> dict:
        found: dict = {}
        for event in events:
            if Decimal(str(event["amount"])) > 0:
                key = (event["kind"], event["event_time"] - event["event_time"] % window_ms)
                count, total = found.get(key, (0, Decimal(0)))
                found[key] = (count + 1, total + Decimal(str(event["amount"])))
        return found

    return {
        "bronze_a": sorted(e["id"] for e in a),
        "bronze_b": sorted(e["id"] for e in b),
        "positive_a": positive(a),
        "other_a": sorted(e["id"] for e in a if Decimal(str(e["amount"])) <= 0),
        "positive_b": positive(b),
        "gold_a": gold(a, EVENT_TIME["gold_a"][0]),
        "gold_b": gold(b, EVENT_TIME["gold_b"][0]),
    }


def _actual(home: Path) -> dict[str, object]:
    """The tables as delta-rs reads them (:func:`testkit.expected.delta_rows`)."""
    found = {
        hop: sorted(row_id for (row_id,) in delta_rows(home, table, "id"))
        for hop, table in (
            ("bronze_a", f"tables/bronze/{NAME}_a"),
            ("bronze_b", f"tables/bronze/{NAME}_b"),
            ("positive_a", f"tables/silver/{NAME}_positive_a"),
            ("other_a", f"tables/silver/{NAME}_other_a"),
            ("positive_b", f"tables/silver/{NAME}_positive_b"),
        )
    }
    for hop in ("gold_a", "gold_b"):
        found[hop] = {
            (kind, utc_ms(start)): (events, amount)
            for kind, start, events, amount in delta_rows(
                home, f"tables/gold/{NAME}_{hop[-1]}", "kind", "window_start", "events", "amount"
            )
        }
    return found


def _watermarks_follow_each_hops_lateness(home: Path) -> None:
    """Each gold's watermark after its last batch is the newest event it read less its own delay."""
    for hop, source in (("gold_a", "a"), ("gold_b", "b")):
        newest = max(
            e["event_time"]
            for e in _valid_events(home / f"landing/{NAME}_{source}")
            if Decimal(str(e["amount"])) > 0
        )
        checkpoint = str(home / f"checkpoints/{NAME}/{hop}")
        last = checkpoint_log.commit_batch_ids(checkpoint)[-1]
        assert (
            checkpoint_log.read_commit_watermark(checkpoint, last) == newest - EVENT_TIME[hop][1]
        ), hop


def _land(home: Path, source: str, seed: int, offset: int) -> None:
    """A generated file of sample events into ``source``'s landing folder (the generator writes
    the first ingest hop's; the file is moved where it belongs)."""
    from spark_jobs import service

    written = service.generate(
        NAME, 120, files=1, seed=seed, start_ms=START_MS + offset * 120_000, bad_fraction=0.05
    )
    target = home / f"landing/{NAME}_{source}"
    target.mkdir(parents=True, exist_ok=True)
    for path in written.files:
        if Path(path).parent != target:
            shutil.move(path, target / f"{source}-{Path(path).name}")


@pytest.fixture
def forks(tmp_path, monkeypatch, capsys):
    specs, suites = tmp_path / "team" / "pipelines", tmp_path / "team" / "quality"
    specs.mkdir(parents=True)
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(specs))
    monkeypatch.setenv("LAKEHOUSE_QUALITY", str(suites))
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "lake"))
    assert main(["new", NAME]) == 0
    (specs / NAME / f"{NAME}.yaml").write_text(SPEC)
    (specs / NAME / f"{NAME}.py").write_text(MODULE)
    shutil.rmtree(suites / NAME)  # the skeleton's suites name its three hops; these hops have none
    capsys.readouterr()
    return tmp_path / "lake"


def _status(capsys) -> dict:
    capsys.readouterr()
    assert main(["status", NAME, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _versions(home: Path, *relatives: str) -> dict[str, int | None]:
    return {relative: delta_log.table_version(str(home / relative)) for relative in relatives}


def test_a_graph_of_hops_runs_rolls_back_one_branch_and_replays_exactly(spark, forks, capsys):
    from spark_jobs.control.status import pending_work
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.spec import get_spec

    home = forks
    for offset, source in enumerate("aab"):
        _land(home, source, seed=offset, offset=offset)
    lake = Lake.open(get_spec(NAME))
    assert set(pending_work(lake)) == {
        "bronze_a",
        "bronze_b",
        "positive_a",
        "other_a",
        "positive_b",
        "gold_a",
        "gold_b",
    }
    assert main(["run", NAME]) == 0
    assert _actual(home) == _expected(home)
    _watermarks_follow_each_hops_lateness(home)
    status = _status(capsys)
    assert status["landing"] == {"files": 3, "new_files": 0}

    # New data on one source: only its ingest hop has work (the next run brings it through).
    _land(home, "b", seed=7, offset=3)
    assert _status(capsys)["landing"] == {"files": 4, "new_files": 1}
    assert {hop: bool(reason) for hop, reason in pending_work(lake).items()} == {
        "bronze_a": False,
        "bronze_b": True,
        "positive_a": False,
        "other_a": False,
        "positive_b": False,
        "gold_a": False,
        "gold_b": False,
    }

    # Bronze_a's batch 1 is read by positive_a on its own, then batch 2 by both: other_a's batch
    # 1 reads bronze_a's batches 1 and 2 together. Undoing batch 2 alone would cut through it,
    # so bronze_a goes back to batch 0 (where every hop below it ended a batch); both hops below
    # it (and gold below one of them) follow, and b's branch keeps its tables and checkpoints.
    _land(home, "a", seed=9, offset=4)
    assert main(["run", NAME, "--hop", "bronze_a"]) == 0
    assert main(["run", NAME, "--hop", "positive_a"]) == 0
    _land(home, "a", seed=11, offset=5)
    assert main(["run", NAME]) == 0
    assert _actual(home) == _expected(home)
    b_branch = _versions(
        home, f"tables/bronze/{NAME}_b", f"tables/silver/{NAME}_positive_b", f"tables/gold/{NAME}_b"
    )
    b_offsets = {
        hop: checkpoint_log.offset_batch_ids(str(home / f"checkpoints/{NAME}/{hop}"))
        for hop in ("bronze_b", "positive_b", "gold_b")
    }
    capsys.readouterr()
    assert main(["rollback", NAME, "--hop", "bronze_a", "--to-batch", "1", "--no-cascade"]) != 0
    refusal = capsys.readouterr()
    assert "--no-cascade: positive_a batches" in refusal.out + refusal.err
    assert main(["rollback", NAME, "--hop", "bronze_a", "--to-batch", "1", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["executed"]
    steps = {step["hop"]: step for step in document["plan"]["hops"]}
    assert list(steps) == ["bronze_a", "positive_a", "other_a", "gold_a"]
    assert steps["bronze_a"]["undone"] == [1, 2] and steps["other_a"]["undone"] == [1]
    assert steps["positive_a"]["undone"] == [1, 2]
    assert document["plan"]["notes"] == [
        "bronze_a: back to batch 0 instead of 1, because other_a batch 1 read bronze_a's "
        "table across that point"
    ]
    assert _versions(home, *b_branch) == b_branch
    assert {
        hop: checkpoint_log.offset_batch_ids(str(home / f"checkpoints/{NAME}/{hop}"))
        for hop in b_offsets
    } == b_offsets
    assert main(["run", NAME]) == 0
    assert _actual(home) == _expected(home)
    _watermarks_follow_each_hops_lateness(home)
    # A backfill of gold_b from the middle of one of its three-minute windows recomputes whole
    # windows of its own size (the pipeline's one-minute window would split 00:03-00:06).
    assert (
        main(
            [
                "backfill",
                NAME,
                "--hop",
                "gold_b",
                "--start",
                "2026-03-01T00:04:30Z",
                "--end",
                "2026-03-01T00:09:00Z",
                "--quality",
                "off",
            ]
        )
        == 0
    )
    assert _actual(home) == _expected(home)
