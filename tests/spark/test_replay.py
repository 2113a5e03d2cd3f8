"""A rollback's replay reproduces the original run: the undone batches run again as their offsets
logged them (spark_jobs/control/rollback/replays.py), late drops included, and only
then what is new.

ad_events' gold drops a view later than the watermark the batch before it left. Three landings:
A at 00:00, B at 00:10 (each run through every hop: gold's batch of rows, then a no-data batch
that moves its watermark on), then C at 00:12 with half its events five minutes late (about
00:07), which silver reads but gold not yet. Rolled back to batch 1 and run, gold replays B's
batches as logged, so C's late views are older than B's watermark and dropped, as in a lake that
never rolled back. With ``--replan`` one batch reads B and C under A's watermark and keeps them.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from spark_jobs.cli import main
from spark_jobs.control.hop_state import HopState
from spark_jobs.control.rollback import replays
from spark_jobs.logs import checkpoint_log
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import get_spec
from testkit.expected import delta_rows
from testkit.paths import file_tree

pytestmark = [pytest.mark.spark, pytest.mark.integration]

GOLD = "tables/gold/campaign_views_10s"


def _land(start: str, late: float = 0.0, events: int = 600) -> None:
    assert (
        main(
            [
                "generate",
                "ad_events",
                "--events",
                str(events),
                "--files",
                "1",
                "--seed",
                start[-5:-3],
                "--start",
                start,
                "--bad-fraction",
                "0",
                "--late-fraction",
                str(late),
            ]
        )
        == 0
    )


def _gold(home) -> Counter:
    return Counter(
        {
            (campaign, start): views
            for campaign, start, views in delta_rows(
                home, GOLD, "campaign_id", "window_start", "views"
            )
        }
    )


def _rollback(capsys, *extra: str) -> dict:
    capsys.readouterr()
    assert (
        main(["rollback", "ad_events", "--hop", "gold", "--to-batch", "1", "--json", *extra]) == 0
    )
    return json.loads(capsys.readouterr().out)


def test_a_rolled_back_hop_replays_its_batches_as_logged_late_drops_included(
    spark, lake_home, tmp_path, monkeypatch, capsys
):
    for start in ("2026-04-01T00:00:00", "2026-04-01T00:10:00"):
        _land(start)
        assert main(["run", "ad_events"]) == 0
    _land("2026-04-01T00:12:00", late=0.5)
    for hop in ("bronze", "silver"):
        assert main(["run", "ad_events", "--hop", hop]) == 0
    never = tmp_path / "never"  # the same lake, never rolled back
    replanned = tmp_path / "replanned"
    for copy in (never, replanned):
        shutil.copytree(lake_home, copy)

    undone = _rollback(capsys)
    [step] = undone["plan"]["hops"]
    assert step.get("replay") == "exact" and step["undone"] == [2, 3], step
    # Before that replay, a rollback of silver carries them (silver's replay writes again what they
    # read); with --replan it drops them, and says so.
    for replan, gold in (
        ([], {"carried_replay": [2, 3], "replay": "exact"}),
        (["--replan"], {"dropped_replay": [2, 3]}),
    ):
        capsys.readouterr()
        assert (
            main(
                [
                    "rollback",
                    "ad_events",
                    "--hop",
                    "silver",
                    "--to-batch",
                    "0",
                    "--dry-run",
                    "--json",
                    *replan,
                ]
            )
            == 0
        )
        steps = {step["hop"]: step for step in json.loads(capsys.readouterr().out)["plan"]["hops"]}
        assert {
            key: steps["gold"].get(key) for key in gold
        } == gold and "dropped_replay" not in steps["silver"], steps
    # A second rollback of gold further back, still before that run, carries them after its own.
    capsys.readouterr()
    assert main(["rollback", "ad_events", "--hop", "gold", "--to-batch", "0"]) == 0
    assert (
        "next run replays batches 1..3 (2..3 kept by an earlier rollback) as logged"
        in capsys.readouterr().out
    )
    assert main(["run", "ad_events", "--hop", "gold", "--json"]) == 0
    [record] = json.loads(capsys.readouterr().out)["hops"]
    assert record["batch_ids"][:3] == [1, 2, 3] and record["rows_dropped_late"] > 0

    monkeypatch.setenv("LAKEHOUSE_HOME", str(never))
    assert main(["run", "ad_events", "--hop", "gold"]) == 0
    assert _gold(lake_home) == _gold(never)

    monkeypatch.setenv("LAKEHOUSE_HOME", str(replanned))
    # afresh: the key a plan had before
    assert "replay" not in _rollback(capsys, "--replan")["plan"]["hops"][0]
    assert main(["run", "ad_events", "--hop", "gold"]) == 0
    kept, dropped = _gold(replanned), _gold(never)
    assert sum(kept.values()) > sum(dropped.values())  # C's late views, counted in windows of 00:07
    assert all(start.minute == 7 for _campaign, start in kept - dropped)


def _silver(home) -> list[tuple]:
    return sorted(delta_rows(home, "tables/silver/ad_views", "ad_id", "user_id", "event_time"))


def test_the_hops_below_a_rolled_back_hop_follow_its_exact_replay(
    spark, lake_home, tmp_path, monkeypatch, capsys
):
    """Silver back to its batch 1 (C's undone), then, before a run, to its batch 0 (A's, kept):
    the second rollback undoes B's batch and carries C's after it, and gold, below it, restored
    by both, replays its undone batches as logged too (B's, its no-data batch, C's, its no-data
    batch), their offsets moved onto silver's one replay's commits, so gold drops C's late views
    as it did, and both tables equal a lake that never rolled back. With ``--replan`` silver
    reads B and C in one batch and gold that under A's watermark, and keeps them."""
    for start, late in (
        ("2026-04-01T00:00:00", 0.0),
        ("2026-04-01T00:10:00", 0.0),
        ("2026-04-01T00:12:00", 0.5),
    ):
        _land(start, late)
        assert main(["run", "ad_events"]) == 0
    never, replanned = tmp_path / "never", tmp_path / "replanned"
    for copy in (never, replanned):
        shutil.copytree(lake_home, copy)

    assert main(["rollback", "ad_events", "--hop", "silver", "--to-batch", "1"]) == 0
    capsys.readouterr()
    assert main(["rollback", "ad_events", "--hop", "silver", "--to-batch", "0", "--json"]) == 0
    steps = {step["hop"]: step for step in json.loads(capsys.readouterr().out)["plan"]["hops"]}
    assert {
        hop: (step["undone"] + step.get("carried_replay", []), step.get("replay"))
        for hop, step in steps.items()
    } == {"silver": ([1, 2], "exact"), "gold": ([2, 3, 4, 5], "exact")} and steps["silver"][
        "carried_replay"
    ] == [2], steps
    assert _gold(lake_home) != _gold(never)
    gold_before = file_tree(lake_home / "checkpoints/ad_events/gold")
    assert main(["run", "ad_events", "--hop", "gold"]) == 2  # refused until silver has replayed
    assert file_tree(lake_home / "checkpoints/ad_events/gold") == gold_before
    assert main(["run", "ad_events"]) == 0
    assert (_silver(lake_home), _gold(lake_home)) == (_silver(never), _gold(never))

    monkeypatch.setenv("LAKEHOUSE_HOME", str(replanned))
    capsys.readouterr()
    assert (
        main(["rollback", "ad_events", "--hop", "silver", "--to-batch", "0", "--replan", "--json"])
        == 0
    )
    assert all("replay" not in step for step in json.loads(capsys.readouterr().out)["plan"]["hops"])
    for hop in ("silver", "gold"):  # (the copy's bronze reads the original's landing folder)
        assert main(["run", "ad_events", "--hop", hop]) == 0
    kept, dropped = _gold(replanned), _gold(never)
    assert _silver(replanned) == _silver(never) and sum(kept.values()) > sum(dropped.values())


def _late(capsys) -> dict[str, int]:
    capsys.readouterr()
    assert main(["status", "ad_events", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    return {hop["hop"]: hop["rows_dropped_late"] for hop in document["hops"]}


def _before(rows: list[tuple], minute: int) -> list[tuple]:
    """The rows (event time last: a timestamp, or milliseconds) of events before
    ``minute`` past 00:00.
    """
    return [
        row
        for row in rows
        if (row[-1].minute if hasattr(row[-1], "minute") else row[-1] // 60_000 % 60) < minute
    ]


def test_a_rolled_back_ingest_hop_reads_each_batchs_files_again_and_the_hops_below_follow(
    spark, lake_home, tmp_path, pipelines, capsys
):
    """Bronze back to its batch 0 (A's file kept; B's and C's batches undone), with D landed since:
    bronze replays B's file, then C's, as its batches read them (their file source log entries put
    back with their offsets; the log compacts every 2 batches, so batch 1's is a compact file),
    then reads D; silver and gold below follow its replay, so gold drops C's late views as it did,
    every table up to D equals a lake that never rolled back, and so do the late counts."""
    pipelines(source_log_compact_interval=2)
    for start, late in (
        ("2026-04-01T00:00:00", 0.0),
        ("2026-04-01T00:10:00", 0.0),
        ("2026-04-01T00:12:00", 0.5),
    ):
        _land(start, late)
        assert main(["run", "ad_events"]) == 0
    never = tmp_path / "never"
    shutil.copytree(lake_home, never)
    late_before = _late(capsys)
    assert late_before["gold"] > 0, late_before

    assert main(["rollback", "ad_events", "--hop", "bronze", "--to-batch", "0", "--json"]) == 0
    steps = {step["hop"]: step for step in json.loads(capsys.readouterr().out)["plan"]["hops"]}
    assert [steps[hop].get("replay") for hop in ("bronze", "silver", "gold")] == ["exact"] * 3, (
        steps
    )
    assert steps["bronze"]["undone"] == [1, 2], steps
    _land("2026-04-01T00:20:00")
    # As a run killed in bronze's replay leaves it: batch 1's offsets put back, not committed; the
    # next run goes on with the replay (shop's model with late events, soak seed 1001, found such a
    # run planning the rest afresh, so a join below kept rows the original run dropped).
    lake = Lake.open(get_spec("ad_events"))
    (batch_id, text), *_rest = replays.to_replay(HopState(lake, lake.spec.hop("bronze")))
    replays.put_back(HopState(lake, lake.spec.hop("bronze")), batch_id, text)
    assert main(["run", "ad_events"]) == 0

    capsys.readouterr()
    assert main(["status", "ad_events", "--hop", "bronze", "--json"]) == 0
    read = [
        (info["batch_id"], sorted(path.rsplit("/", 1)[-1] for path in info["files"]))
        for info in json.loads(capsys.readouterr().out)["hops"][0]["batch_log"]
    ]
    landed = sorted(
        path.name
        for path in (lake_home / "landing" / "ad_events").iterdir()
        if not path.name.startswith(".")
    )
    # a file a batch, in order
    assert [files for _batch, files in read] == [[name] for name in landed], (read, landed)
    columns = ("ad_id", "user_id", "event_time")
    for table in ("tables/bronze/ad_events", "tables/silver/ad_views"):
        assert _before(delta_rows(lake_home, table, *columns), 20) == delta_rows(
            never, table, *columns
        ), table
    assert Counter(
        {key: views for key, views in _gold(lake_home).items() if key[1].minute < 20}
    ) == _gold(never)
    assert _late(capsys) == late_before


def test_a_hop_below_that_read_part_of_each_version_follows_the_replay_file_by_file(
    spark, lake_home, tmp_path, monkeypatch, capsys
):
    """Gold reads silver one file a batch (``--max-files-per-trigger 1``), so its batches end
    part-way through silver's commits: silver is partitioned by event date, B's events (23:59:55 to
    00:00:15) span midnight and C's late half is of the day before (23:59:01 to 23:59:07), so their
    commits hold two files each. Silver back to its batch 0: its replay writes B's and C's batches
    again with the same files in the same order (Delta's offsets name a file by its place in the
    commit), so gold's kept offsets move onto the replay's commits at the same places, and gold
    drops C's late views (older than 23:59:15, B's watermark) as it did: both tables equal a lake
    that never rolled back, and gold's replay reads as many rows as B's and C's runs did."""
    read = []  # gold's rows read, per run
    for start, late, events in (
        ("2026-04-01T23:50:00", 0.0, 600),
        ("2026-04-01T23:59:55", 0.0, 2000),
        ("2026-04-02T00:04:01", 0.5, 600),
    ):
        _land(start, late, events)
        for hop in ("bronze", "silver"):
            assert main(["run", "ad_events", "--hop", hop]) == 0
        capsys.readouterr()
        assert (
            main(["run", "ad_events", "--hop", "gold", "--max-files-per-trigger", "1", "--json"])
            == 0
        )
        read.append(json.loads(capsys.readouterr().out)["hops"][0]["rows_in"])
    never = tmp_path / "never"
    shutil.copytree(lake_home, never)
    late_before = _late(capsys)
    assert late_before["gold"] > 0, late_before

    assert main(["rollback", "ad_events", "--hop", "silver", "--to-batch", "0", "--json"]) == 0
    steps = {step["hop"]: step for step in json.loads(capsys.readouterr().out)["plan"]["hops"]}
    assert {hop: step.get("replay") for hop, step in steps.items()} == {
        "silver": "exact",
        "gold": "exact",
    }, steps
    kept = json.loads(Path(Lake.open(get_spec("ad_events")).replays, "gold.json").read_text())[
        "batches"
    ]
    kept = [
        checkpoint_log.delta_position(checkpoint_log.text_sources(text)[0])
        for text in kept.values()
    ]
    # batches that end inside a commit of silver
    assert any(not whole for _version, whole in kept), kept
    resplit = tmp_path / "resplit"
    shutil.copytree(lake_home, resplit)
    assert main(["run", "ad_events", "--json"]) == 0
    replayed = {record["hop"]: record for record in json.loads(capsys.readouterr().out)["hops"]}[
        "gold"
    ]
    assert replayed["rows_in"] == sum(read[1:]), (replayed, read)
    assert (_silver(lake_home), _gold(lake_home)) == (_silver(never), _gold(never))
    assert _late(capsys) == late_before

    # Silver's replay split into other files (at most 100 rows a file, as another set-up may
    # write): gold's kept offsets would name other rows, so its run plans them afresh and says
    # so; silver's rows are still those of the lake that never rolled back.
    monkeypatch.setenv("LAKEHOUSE_HOME", str(resplit))
    spark.conf.set("spark.sql.files.maxRecordsPerFile", "100")
    try:
        assert main(["run", "ad_events", "--hop", "silver"]) == 0
    finally:
        spark.conf.unset("spark.sql.files.maxRecordsPerFile")
    capsys.readouterr()
    assert main(["run", "ad_events", "--hop", "gold"]) == 0
    assert (
        "run afresh, not as logged: silver's replay wrote a commit they read part of as other files"
        in capsys.readouterr().err
    )
    assert _silver(resplit) == _silver(never)
