"""Rollback on the checkpoint logs, against real Spark and Delta (docs/concepts/rollback.md).

The defining check: roll back, run again, and every table holds exactly what the landing files
say (conftest computes that in plain Python): no row lost, none twice.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from spark_jobs.cli import main
from spark_jobs.logs import checkpoint_log, file_source_log
from testkit.expected import assert_tables_match_landing, expected_gold, gold_counter
from testkit.lakes import increment
from testkit.paths import VENV_BIN, refusals, unrefused_tree

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _rollback(capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main(["rollback", "ad_events", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _checkpoint(home: Path, hop: str) -> str:
    return str(home / "checkpoints/ad_events" / hop)


def test_bronze_rollback_cascades_across_compaction_and_replays_exactly(
    spark, lake_home, pipelines, capsys
):
    pipelines(source_log_compact_interval=2)
    # Spark deletes source log files a compact file supersedes after this delay (10 min by
    # default): with 0, the rollback has to rebuild the log past a compaction from its entries.
    spark.conf.set("spark.sql.streaming.fileSource.log.cleanupDelay", "0")
    try:
        for seed in range(4):
            increment(seed)
    finally:
        spark.conf.unset("spark.sql.streaming.fileSource.log.cleanupDelay")
    bronze = _checkpoint(lake_home, "bronze")
    assert checkpoint_log.commit_batch_ids(bronze) == [0, 1, 2, 3]
    assert any(compact for _path, compact in file_source_log.file_source_log(bronze).values())

    seed = int(os.environ.get("ROLLBACK_SEED", random.randrange(10**6)))
    rng = random.Random(seed)
    target = rng.randint(0, 2)
    print(f"ROLLBACK_SEED={seed}: rolling bronze back to batch {target}")
    document = _rollback(capsys, "--hop", "bronze", "--to-batch", str(target))
    assert document["executed"] and [step["hop"] for step in document["plan"]["hops"]] == [
        "bronze",
        "silver",
        "gold",
    ]
    assert document["plan"]["hops"][0]["undone"] == list(range(target + 1, 4))
    assert checkpoint_log.offset_batch_ids(bronze)[-1] == target
    assert (
        max(int(entry["batchId"]) for entry in file_source_log.file_source_entries(bronze))
        == target
    )
    for step in document["plan"]["hops"]:
        assert (
            checkpoint_log.query_id(step["checkpoint"])
            == step["new_query_id"]
            != step["old_query_id"]
        )

    assert main(["run", "ad_events"]) == 0
    assert_tables_match_landing(lake_home)

    # Again from silver, then gold by time: chained rollbacks map batches to versions through
    # earlier RESTOREs and query ids.
    silver = _checkpoint(lake_home, "silver")
    target = rng.randint(0, checkpoint_log.commit_batch_ids(silver)[-1] - 1)
    print(f"rolling silver back to batch {target}")
    document = _rollback(capsys, "--hop", "silver", "--to-batch", str(target))
    kept = document["plan"]["hops"][0]["target_batch"]
    # A batch that read bronze before the first rollback's RESTORE, short of its target, cannot
    # go on past it without skipping kept appends: silver then starts over (the plan says so).
    assert kept == target or (
        kept == -1 and any("starts over" in note for note in document["plan"]["notes"])
    )
    assert checkpoint_log.offset_batch_ids(silver)[-1:] == ([kept] if kept >= 0 else [])
    increment(8)
    assert_tables_match_landing(lake_home)

    gold = Path(_checkpoint(lake_home, "gold"))
    stamps = {
        n: (gold / "commits" / str(n)).stat().st_mtime
        for n in checkpoint_log.commit_batch_ids(str(gold))
    }
    candidates = [
        n for n in stamps if n + 1 in stamps and int(stamps[n + 1] * 1000) > int(stamps[n] * 1000)
    ]
    target = rng.choice(candidates)
    moment = dt.datetime.fromtimestamp(stamps[target], dt.UTC).replace(tzinfo=None).isoformat()
    print(f"rolling gold back to {moment} (batch {target})")
    document = _rollback(capsys, "--hop", "gold", "--to-time", moment)
    assert document["plan"]["requested_batch"] == target
    assert main(["run", "ad_events"]) == 0
    assert_tables_match_landing(lake_home)


def test_straddling_batches_take_the_upper_hop_back_to_a_shared_boundary(spark, lake_home, capsys):
    increment(0)  # bronze 0, silver 0 (reads bronze v0), gold
    for seed in (1, 2, 3):
        increment(seed, hop="bronze")  # bronze 1..3
    assert main(["run", "ad_events"]) == 0  # silver 1 reads bronze v1..v3 at once

    document = _rollback(capsys, "--hop", "bronze", "--to-batch", "2")
    steps = {step["hop"]: step for step in document["plan"]["hops"]}
    assert steps["bronze"]["target_batch"] == 0 and steps["silver"]["target_batch"] == 0
    assert any("instead of 2" in note for note in document["plan"]["notes"])
    assert main(["run", "ad_events"]) == 0
    assert_tables_match_landing(lake_home)


def test_gold_alone_by_run_id_without_cascade(spark, three_increments, capsys):
    lake_home = three_increments  # runs r0, r1, r2
    gold_record = json.loads((lake_home / "_ops/runs/ad_events/r1.gold.json").read_text())
    document = _rollback(capsys, "--hop", "gold", "--to-run", "r1", "--no-cascade")
    assert [step["hop"] for step in document["plan"]["hops"]] == ["gold"]
    assert document["plan"]["hops"][0]["target_batch"] == min(gold_record["batch_ids"]) - 1
    assert document["plan"]["hops"][0]["state_version"] == min(gold_record["batch_ids"])
    assert main(["run", "ad_events"]) == 0
    assert_tables_match_landing(lake_home)


def test_replay_under_the_old_query_id_is_skipped_by_delta_which_the_new_id_prevents(
    spark, lake_home, capsys
):
    """The txn trap (delta-io/delta#1813): after RESTORE, a batch replayed under the same
    query id is silently skipped. Putting the old id back shows the loss; the rollback's new id
    is what prevents it."""
    for seed in range(2):
        increment(seed, hop="bronze")
    silver = _checkpoint(lake_home, "silver")
    assert main(["run", "ad_events", "--hop", "silver", "--max-files-per-trigger", "1"]) == 0
    assert len(checkpoint_log.commit_batch_ids(silver)) >= 2
    document = _rollback(capsys, "--hop", "silver", "--to-batch", "0", "--no-cascade")
    old_id = document["plan"]["hops"][0]["old_query_id"]
    checkpoint_log.set_query_id(silver, old_id)
    assert main(["run", "ad_events"]) == 0
    with pytest.raises(AssertionError, match="^assert"):
        assert_tables_match_landing(lake_home)


class _Crash(BaseException):
    """A crash in this process: nothing that catches errors sees it, and nothing is
    recorded after it.
    """


def test_a_crash_after_each_step_is_finished_by_running_the_command_again(
    spark, three_increments, capsys, monkeypatch
):
    """After each step of the journal in turn the rollback dies before recording it, the worst
    moment; running the same command again finishes it. The crashes are in-process (an exception
    no handler catches, raised at the same point as the environment's exit); one of them, in the
    middle, is a real process exit (``LAKEHOUSE_ROLLBACK_CRASH_AFTER``, ``os._exit``)."""
    from spark_jobs.control.rollback import execute as rollbacks

    lake_home = three_increments
    argv = ["rollback", "ad_events", "--hop", "bronze", "--to-batch", "0"]
    plan = _rollback(capsys, "--hop", "bronze", "--to-batch", "0", "--dry-run")["plan"]
    steps = sum(len(step["tables"]) + 1 for step in plan["hops"])
    real_exit = steps // 2
    original = rollbacks._crash_point
    for step in range(steps):
        if step == real_exit:
            crashed = subprocess.run(
                [str(VENV_BIN / "lakehouse"), *argv],
                capture_output=True,
                text=True,
                env={**os.environ, "LAKEHOUSE_ROLLBACK_CRASH_AFTER": str(step)},
            )
            assert crashed.returncode == 97, crashed.stderr[-2000:]
        else:

            def crash(done: int, step=step) -> None:
                if done == step:
                    raise _Crash(step)

            monkeypatch.setattr(rollbacks, "_crash_point", crash)
            with pytest.raises(_Crash):
                main(argv)
            monkeypatch.setattr(rollbacks, "_crash_point", original)
        journal = json.loads(
            next((lake_home / "_ops/rollbacks/ad_events").glob("*.json")).read_text()
        )
        # step k done, not recorded
        assert journal["status"] == "running" and len(journal["done"]) == step
        capsys.readouterr()
        assert main(["run", "ad_events"]) == 2 and "unfinished" in capsys.readouterr().err
    assert main(argv) == 0
    journals = list((lake_home / "_ops/rollbacks/ad_events").glob("*.json"))
    assert len(journals) == 1 and json.loads(journals[0].read_text())["status"] == "succeeded"
    assert main(["run", "ad_events"]) == 0
    assert_tables_match_landing(lake_home)


def test_refusals_change_nothing(spark, lake_home, pipelines, capsys):
    from spark_jobs.control.coordination.lock import pipeline_lock
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.spec import get_spec

    pipelines(min_batches_to_retain=2)
    for seed in range(4):
        increment(seed, hop="bronze", run_id=f"r{seed}")
    capsys.readouterr()
    assert main(["status", "ad_events", "--hop", "bronze", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)["hops"][0]
    bronze = _checkpoint(lake_home, "bronze")
    offsets, commits = (
        set(checkpoint_log.offset_batch_ids(bronze)),
        checkpoint_log.commit_batch_ids(bronze),
    )
    assert 0 not in offsets  # the checkpoint kept only the last batches
    assert status["rollback_horizon"] == min(
        n for n in commits if n in offsets and n - 1 in offsets
    )
    log = {info["batch_id"]: info for info in status["batch_log"]}
    assert sorted(log) == sorted(offsets) and all(log[n]["committed"] for n in commits)
    # bronze writes one version per batch
    assert [log[n]["table_version"] for n in sorted(log)] == sorted(log)
    assert all(log[n]["rows"] == 240 and len(log[n]["files"]) == 2 for n in log)
    # Silver reads bronze's snapshot one file per batch: its batch 0 is beyond retention too.
    assert main(["run", "ad_events", "--hop", "silver", "--max-files-per-trigger", "1"]) == 0
    before, refused = unrefused_tree(lake_home), refusals(lake_home)

    assert main(["rollback", "ad_events", "--hop", "bronze", "--to-batch", "0"]) == 2
    assert "offsets/0 is gone (minBatchesToRetain" in capsys.readouterr().err
    # A Delta-fed hop's target beyond retention (soak seed 1008: `--to-run` of a run whose first
    # batch was gone) is refused the same way, not a FileNotFoundError while planning.
    assert main(["rollback", "ad_events", "--hop", "silver", "--to-batch", "0"]) == 2
    assert "offsets/0 is gone (minBatchesToRetain" in capsys.readouterr().err
    assert main(["rollback", "ad_events", "--hop", "bronze", "--to-run", "nope"]) == 2
    assert "unknown run id 'nope'" in capsys.readouterr().err
    with pipeline_lock(Lake.open(get_spec("ad_events")), "run", "r-test"):
        assert main(["rollback", "ad_events", "--hop", "bronze", "--to-batch", "2"]) == 2
        assert "is busy: run r-test" in capsys.readouterr().err
        assert main(["run", "ad_events"]) == 2
    assert unrefused_tree(lake_home) == before
    assert refusals(lake_home) == refused + 5


def test_gold_alone_back_into_a_snapshot_it_read_part_by_part_after_a_cascade(
    spark, lake_home, capsys
):
    """A sequence the model test found. Gold's first run started on silver's snapshot and read it
    one file per batch, so its batch 1 ended part-way through a silver version. A cascade from
    bronze then RESTOREd silver to that version; rolling gold alone back to batch 1 must not jump
    past the RESTORE (the rest of the snapshot would never be read) but start gold over."""
    for seed in range(2):
        assert (
            main(
                [
                    "generate",
                    "ad_events",
                    "--events",
                    "300",
                    "--files",
                    "3",
                    "--seed",
                    str(seed),
                    "--start",
                    f"2026-04-01T0{seed}:00:00",
                    "--bad-fraction",
                    "0.02",
                ]
            )
            == 0
        )
        assert main(["run", "ad_events", "--max-files-per-trigger", "1"]) == 0
    gold = _checkpoint(lake_home, "gold")
    first = checkpoint_log.read_offsets(gold, 1).sources[0]
    # part of a snapshot
    assert first["isStartingVersion"] and checkpoint_log.delta_position(first)[1] is False

    _rollback(capsys, "--hop", "bronze", "--to-batch", "2")
    assert main(["run", "ad_events"]) == 0
    assert_tables_match_landing(lake_home)

    document = _rollback(capsys, "--hop", "gold", "--to-batch", "1", "--no-cascade")
    assert document["plan"]["hops"][0]["target_batch"] == -1, document["plan"]["notes"]
    assert main(["run", "ad_events", "--hop", "gold"]) == 0
    assert_tables_match_landing(lake_home)


def test_to_run_of_a_run_whose_batch_ids_a_replay_used_again(spark, three_increments, capsys):
    """Found by the model test (seed 2): run r2's gold batch was undone by a rollback, and the
    replay (run r3) used the same batch id again under a new query id. ``--to-run r2`` means r2
    and everything after it, r3's batch included: decided by commit time, not by r2's batch ids."""
    lake_home = three_increments  # runs r0, r1, r2
    _rollback(capsys, "--hop", "gold", "--to-batch", "0", "--no-cascade")
    increment(3, run_id="r3")  # replays gold's batches 1.. under the new query id
    gold = _checkpoint(lake_home, "gold")
    replayed = checkpoint_log.commit_batch_ids(gold)
    document = _rollback(capsys, "--hop", "gold", "--to-run", "r2", "--no-cascade")
    assert document["plan"]["hops"][0]["target_batch"] == 0 and replayed[-1] > 0
    assert main(["run", "ad_events"]) == 0
    assert_tables_match_landing(lake_home)


def test_a_rollback_that_undoes_backfills_says_which_to_run_again(spark, lake_home, capsys):
    """Found by the soak (seed 1003): gold rolled back to a batch before a backfill it received.
    The RESTORE goes back to before the first undone batch, so it undoes the backfill's commit,
    and gold's replay cannot bring those windows back: silver's rows there came from silver's own
    backfill, which also rewrote rows the stream had written, so it is a change commit gold's
    stream skips. The plan lists the range to backfill again; after the run gold is short, after
    that backfill equal."""
    increment(1)  # gold batch 0
    increment(3)  # gold batch 1
    assert (
        main(
            [
                "generate",
                "ad_events",
                "--events",
                "240",
                "--files",
                "2",
                "--seed",
                "5",
                "--start",
                "2026-04-01T00:05:00",
            ]
        )
        == 0
    )
    # Over streamed rows (00:01, 00:03) and the new files (00:05), which no stream has read.
    assert (
        main(
            [
                "backfill",
                "ad_events",
                "--start",
                "2026-04-01T00:00:00",
                "--end",
                "2026-04-01T00:07:00",
            ]
        )
        == 0
    )
    # the stream goes on past the backfill
    increment(8)
    assert_tables_match_landing(lake_home)
    gold = _checkpoint(lake_home, "gold")
    assert checkpoint_log.commit_batch_ids(gold)[-1] >= 2

    document = _rollback(capsys, "--hop", "gold", "--to-batch", "0")
    step = document["plan"]["hops"][0]
    assert step["rebackfill"] == [["2026-04-01T00:00:00.000", "2026-04-01T00:07:00.000"]]
    assert document["plan"]["backfills"] == [
        {"hop": "gold", "start": "2026-04-01T00:00:00.000", "end": "2026-04-01T00:07:00.000"}
    ]
    assert any(
        "backfill again" in note and "--hop gold --start 2026-04-01T00:00:00.000" in note
        for note in document["plan"]["notes"]
    )
    assert main(["run", "ad_events"]) == 0
    assert gold_counter(spark, lake_home) != expected_gold(lake_home)  # what the plan warns about
    for each in document["plan"]["backfills"]:
        assert (
            main(
                [
                    "backfill",
                    "ad_events",
                    "--hop",
                    each["hop"],
                    "--start",
                    each["start"],
                    "--end",
                    each["end"],
                ]
            )
            == 0
        )
    assert_tables_match_landing(lake_home)


def test_gold_kept_by_a_cascade_counts_only_what_silver_keeps(spark, lake_home, capsys):
    """Found by the soak (seed 1005): gold's batches recount each window they touch from silver.
    Gold ran behind silver (silver three versions ahead), and its first batch recounted from
    silver as it was then, not as of the version the batch had read. A cascade that kept that
    batch and restored silver to that version left gold counting rows silver no longer held."""
    for seed in range(3):  # three increments over the same minute, so their windows overlap
        assert (
            main(
                [
                    "generate",
                    "ad_events",
                    "--events",
                    "240",
                    "--files",
                    "2",
                    "--seed",
                    str(seed),
                    "--start",
                    "2026-04-01T00:00:00",
                    "--bad-fraction",
                    "0.02",
                ]
            )
            == 0
        )
        for hop in ("bronze", "silver") + (("gold",) if seed == 0 else ()):
            assert main(["run", "ad_events", "--hop", hop]) == 0
    assert main(["run", "ad_events", "--hop", "gold", "--max-files-per-trigger", "2"]) == 0
    document = _rollback(capsys, "--hop", "silver", "--to-batch", "1")
    targets = {step["hop"]: step["target_batch"] for step in document["plan"]["hops"]}
    # Gold keeps a batch it ran after batch 0, which read silver up to version 1 while
    # silver was at 2.
    assert targets["silver"] == 1 and targets["gold"] >= 1, targets
    silver_views: Counter = Counter()
    rows = spark.read.format("delta").load(str(lake_home / "tables/silver/ad_views"))
    for campaign, time in (
        rows.where("campaign_id IS NOT NULL").select("campaign_id", "event_time").collect()
    ):
        millis = (
            int(time.replace(tzinfo=dt.UTC).timestamp() * 1000)
            if isinstance(time, dt.datetime)
            else int(time)
        )
        silver_views[(campaign, millis - millis % 10_000)] += 1
    # gold is silver's aggregate, nothing more
    assert gold_counter(spark, lake_home) == silver_views

    assert main(["run", "ad_events"]) == 0
    assert_tables_match_landing(lake_home)


def test_a_hop_that_started_over_rolls_back_within_its_new_query(spark, three_increments, capsys):
    """Soak seed 1004: a hop emptied by a rollback (its target -1: a `DELETE` of every row) and run
    again reuses batch ids under a new query id. A later rollback to one of them restores the
    table to that batch's own commit, not to a version before the emptying."""
    from spark_jobs.logs import delta_log

    lake_home = three_increments
    emptied = _rollback(capsys, "--hop", "silver", "--to-batch", "-1")["plan"]["hops"]
    assert [table["action"] for table in emptied[0]["tables"]] == ["empty", "empty"]
    assert main(["run", "ad_events"]) == 0  # silver batch 0 again, under a new query id
    increment(3)  # silver batch 1
    silver, table = _checkpoint(lake_home, "silver"), str(lake_home / "tables/silver/ad_views")
    query = checkpoint_log.query_id(silver)
    batch_0 = [
        version
        for version in range(delta_log.table_version(table) + 1)
        if (delta_log.transaction(table, version) or {}).get("appId") == query
        and delta_log.transaction(table, version)["version"] == 0
    ]
    document = _rollback(capsys, "--hop", "silver", "--to-batch", "0")
    assert document["plan"]["hops"][0]["tables"][0]["restore_to"] == batch_0[0]
    assert main(["run", "ad_events"]) == 0
    assert_tables_match_landing(lake_home)
