"""End to end through the CLI on a temp LAKEHOUSE_HOME, with the shared SparkSession.

Expected values come from the generated landing files, parsed in plain Python (conftest).
"""

from __future__ import annotations

import json
import shutil

import pytest

from spark_jobs.cli import main
from spark_jobs.logs import delta_log
from testkit.expected import (
    assert_tables_match_landing,
    expected_gold,
    gold_counter,
    landing_lines,
    table_rows,
    valid_event,
)

pytestmark = [pytest.mark.spark, pytest.mark.integration]

STARTS = ("2026-03-01T00:00:00", "2026-03-01T00:01:00", "2026-03-02T10:00:00")


def _versions(home):
    return {
        table: delta_log.table_version(str(home / table))
        for table in (
            "tables/bronze/ad_events",
            "tables/quarantine/ad_events",
            "tables/silver/ad_views",
            "tables/gold/campaign_views_10s",
        )
    }


def _generate(seed: int, start: str, events: int = 1500, files: int = 3, bad: float = 0.02) -> None:
    assert (
        main(
            [
                "generate",
                "ad_events",
                "--events",
                str(events),
                "--files",
                str(files),
                "--seed",
                str(seed),
                "--start",
                start,
                "--bad-fraction",
                str(bad),
            ]
        )
        == 0
    )


def _bronze_and_quarantine_hold_the_landing_lines(spark, home) -> int:
    """Bronze holds a row per valid landing line, its quarantine every other line; returns how
    many lines are quarantined."""
    lines = landing_lines(home)
    bronze = spark.read.format("delta").load(str(home / "tables/bronze/ad_events"))
    quarantine = spark.read.format("delta").load(str(home / "tables/quarantine/ad_events"))
    valid = [line for _name, line in lines if valid_event(line)]
    assert bronze.count() == len(valid)
    assert quarantine.count() == len(lines) - len(valid)
    assert sorted(row.raw_line for row in quarantine.collect()) == sorted(
        line for _name, line in lines if not valid_event(line)
    )
    return len(lines) - len(valid)


def test_three_increments_then_nothing_new(spark, lake_home, capsys):
    for seed, start in enumerate(STARTS):
        _generate(seed, start)
        capsys.readouterr()
        assert main(["run", "ad_events", "--json"]) == 0
        document = json.loads(capsys.readouterr().out)
        assert [hop["status"] for hop in document["hops"]] == ["succeeded"] * 3
        assert gold_counter(spark, lake_home) == expected_gold(lake_home)

    assert _bronze_and_quarantine_hold_the_landing_lines(spark, lake_home) > 0
    # Silver has no drop rule here: its quarantine table exists (its first batch made it) and no
    # later batch committed to it, while silver itself committed once per increment.
    views = str(lake_home / "tables/quarantine/ad_views")
    assert delta_log.versions(views) == [0] and len(
        delta_log.versions(str(lake_home / "tables/silver/ad_views"))
    ) == len(STARTS)

    before = _versions(lake_home)
    assert main(["run", "ad_events", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [hop["batch_ids"] for hop in document["hops"]] == [[], [], []]
    assert _versions(lake_home) == before

    # Events older than the watermark (the newest event read, 34 hours on, less a minute) are
    # dropped by gold in the next run: the batch without data that ends each run keeps the
    # watermark the last batch moved in the checkpoint (a run without it starts from the one
    # before, and counted these when tried).
    counted = gold_counter(spark, lake_home)
    _generate(3, STARTS[0])
    capsys.readouterr()
    assert main(["run", "ad_events", "--json"]) == 0
    gold = json.loads(capsys.readouterr().out)["hops"][2]
    # Spark counts the late groups, after the partial count
    assert gold["rows_in"] > 0 and gold["rows_dropped_late"] > 0
    assert gold_counter(spark, lake_home) == counted

    # A batch of clean lines commits to bronze and not to its quarantine (the table exists), and
    # the next batch with an unusable line commits there again.
    bronze, quarantine = (
        str(lake_home / "tables" / table / "ad_events") for table in ("bronze", "quarantine")
    )
    committed = {table: delta_log.versions(table) for table in (bronze, quarantine)}
    _generate(4, STARTS[2], events=300, files=1, bad=0.0)
    assert main(["run", "ad_events", "--hop", "bronze"]) == 0
    assert delta_log.versions(quarantine) == committed[quarantine]
    assert len(delta_log.versions(bronze)) == len(committed[bronze]) + 1
    _generate(5, STARTS[2], events=300, files=1, bad=0.05)
    assert main(["run", "ad_events", "--hop", "bronze"]) == 0
    assert len(delta_log.versions(quarantine)) == len(committed[quarantine]) + 1
    _bronze_and_quarantine_hold_the_landing_lines(spark, lake_home)


def _drift(home) -> dict[str, str]:
    """Give every third valid event of one landing file fields the schema does not have; their
    ``_rescued`` text by ``user_id``, as JSON with sorted keys (how a variant writes it)."""
    path = sorted((home / "landing/ad_events").glob("*.json"))[0]
    lines, rescued = [], {}
    for index, line in enumerate(path.read_text().splitlines()):
        event = valid_event(line)
        if event is not None and index % 3 == 0:
            extra = {"coupon": f"c{index}", "geo": {"zone": index, "area": "north"}}
            line = json.dumps({**json.loads(line), **extra})
            rescued[event["user_id"]] = json.dumps(extra, sort_keys=True, separators=(",", ":"))
        lines.append(line)
    path.write_text("".join(line + "\n" for line in lines))
    return rescued


def test_run_records_and_status(spark, lake_home, capsys):
    _generate(7, STARTS[0], events=400, files=2, bad=0.05)
    drifted = _drift(lake_home)
    capsys.readouterr()
    assert main(["run", "ad_events", "--hop", "bronze", "--run-id", "r1", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)["hops"][0]
    lines = landing_lines(lake_home)
    invalid = sum(1 for _name, line in lines if not valid_event(line))
    assert (record["rows_in"], record["rows_out"], record["rows_quarantined"]) == (
        len(lines),
        len(lines) - invalid,
        invalid,
    )
    # Schema drift: the fields bronze does not know are kept per row, and counted per run.
    assert record["rows_rescued"] == len(drifted) > 0
    bronze_rows = spark.read.format("delta").load(str(lake_home / "tables/bronze/ad_events"))
    assert {
        row.user_id: row._rescued for row in bronze_rows.where("_rescued IS NOT NULL").collect()
    } == drifted
    assert record["tables"][str(lake_home / "tables/bronze/ad_events")] == {
        "version_before": None,
        "version_after": 0,
    }
    stored = json.loads((lake_home / "_ops/runs/ad_events/r1.bronze.json").read_text())
    assert (
        stored["batch_ids"] == [0]
        and stored["status"] == "succeeded"
        and stored["progress"][0]["rows"] == len(lines)
    )

    assert main(["status", "ad_events", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    bronze, silver = status["hops"][0], status["hops"][1]
    assert (bronze["batches"], bronze["last_committed_batch"], bronze["last_run"]["run_id"]) == (
        1,
        0,
        "r1",
    )
    assert (silver["batches"], silver["last_run"]) == (0, None)
    assert status["landing"] == {"files": 2, "new_files": 0}
    assert bronze["last_run"]["rows_rescued"] == bronze["rows_rescued"] == len(drifted)
    assert main(["status", "ad_events"]) == 0
    assert (
        f"{len(drifted)} rows of the last run have fields the schema does not"
        in capsys.readouterr().out
    )


def test_new_data_check_follows_each_hop(spark, lake_home, capsys):
    from spark_jobs.control.status import pending_work
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.spec import get_spec

    lake = lambda: Lake.open(get_spec("ad_events"))
    assert pending_work(lake()) == {"bronze": None, "silver": None, "gold": None}
    _generate(9, STARTS[0], events=300, files=2)
    assert pending_work(lake())["bronze"] == "2 new landing files"
    assert main(["run", "ad_events", "--hop", "bronze"]) == 0
    pending = pending_work(lake())
    assert (
        pending["bronze"] is None and "never read" in pending["silver"] and pending["gold"] is None
    )
    assert main(["run", "ad_events"]) == 0
    assert pending_work(lake()) == {"bronze": None, "silver": None, "gold": None}
    _generate(10, STARTS[1], events=100, files=1)
    assert main(["run", "ad_events", "--hop", "bronze"]) == 0
    pending = pending_work(lake())
    assert (
        pending["bronze"] is None
        and pending["silver"] == "upstream version 1 not read yet"
        and pending["gold"] is None
    )
    # A backfill rewrites ranges the streams below already have: the streams would read nothing
    # of it (skipChangeCommits, and bronze's backfilled rows are not for silver's stream), so the
    # check says nothing new, and a run indeed writes no row.
    assert main(["run", "ad_events"]) == 0
    assert main(["backfill", "ad_events", "--start", "2026-03-01", "--end", "2026-03-02"]) == 0
    assert pending_work(lake()) == {"bronze": None, "silver": None, "gold": None}
    capsys.readouterr()
    assert main(["run", "ad_events", "--json"]) == 0
    assert {
        (hop["hop"], hop["rows_out"], hop["rows_quarantined"])
        for hop in json.loads(capsys.readouterr().out)["hops"]
    } == {("bronze", 0, 0), ("silver", 0, 0), ("gold", 0, 0)}
    # But silver rows a backfill adds where silver's stream had none are new to gold's
    # stream: here bronze's backfill came first, so bronze's stream left those lines out and
    # silver's read nothing.
    _generate(12, "2026-03-03T10:00:00", events=300, files=1)
    day = ["--start", "2026-03-03", "--end", "2026-03-04"]
    assert main(["backfill", "ad_events", "--hop", "bronze", *day]) == 0
    assert main(["run", "ad_events"]) == 0
    assert main(["backfill", "ad_events", "--hop", "silver", *day]) == 0
    pending = pending_work(lake())
    assert (
        pending["bronze"] is None
        and pending["silver"] is None
        and pending["gold"].startswith("upstream version ")
    )
    capsys.readouterr()
    assert main(["run", "ad_events", "--hop", "gold", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hops"][0]["rows_out"] > 0


def _rows_in(capsys, argv: list[str]) -> dict[str, int]:
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    return {
        record["hop"]: record["rows_in"] for record in json.loads(capsys.readouterr().out)["hops"]
    }


def test_stream_and_backfill_give_equal_tables(spark, lake_home, tmp_path, monkeypatch, capsys):
    _generate(11, "2026-03-01T23:59:00", events=3000, files=4, bad=0.01)  # crosses midnight
    streamed_in = _rows_in(capsys, ["run", "ad_events", "--max-files-per-trigger", "1"])

    backfilled = tmp_path / "backfilled"
    shutil.copytree(lake_home / "landing", backfilled / "landing")
    monkeypatch.setenv("LAKEHOUSE_HOME", str(backfilled))
    assert main(["backfill", "ad_events", "--start", "2026-03-01", "--end", "2026-03-02"]) == 0
    assert main(["backfill", "ad_events", "--start", "2026-03-02", "--end", "2026-03-03"]) == 0
    assert not (backfilled / "checkpoints").exists()
    for hop in ("bronze", "silver", "gold"):
        streamed, batch = table_rows(lake_home, hop), table_rows(backfilled, hop)
        assert streamed and streamed == batch, hop

    # Re-running a day is idempotent: same rows, no duplicates.
    assert main(["backfill", "ad_events", "--start", "2026-03-01", "--end", "2026-03-02"]) == 0
    for hop in ("bronze", "silver", "gold"):
        assert table_rows(backfilled, hop) == table_rows(lake_home, hop), hop
    quarantine = spark.read.format("delta").load(str(backfilled / "tables/quarantine/ad_events"))
    lines = landing_lines(backfilled)
    assert quarantine.count() == sum(1 for _name, line in lines if not valid_event(line))

    # "rows in" is what each hop read from its source: the stream and a backfill of all its rows
    # say the same, every line for bronze, every bronze row for silver, every view for gold.
    valid = [event for _name, line in lines if (event := valid_event(line))]
    assert streamed_in == {
        "bronze": len(lines),
        "silver": len(valid),
        "gold": sum(1 for event in valid if event["event_type"] == "view"),
    }
    assert (
        _rows_in(capsys, ["backfill", "ad_events", "--start", "2026-03-01", "--end", "2026-03-03"])
        == streamed_in
    )


def test_backfill_of_one_day_writes_only_that_day(spark, lake_home):
    _generate(5, "2026-03-01T23:59:30", events=6000, files=2, bad=0.0)  # 60 s: half on each day
    assert main(["backfill", "ad_events", "--start", "2026-03-02", "--end", "2026-03-03"]) == 0
    bronze = spark.read.format("delta").load(str(lake_home / "tables/bronze/ad_events"))
    days = {str(row.event_date) for row in bronze.select("event_date").distinct().collect()}
    assert days == {"2026-03-02"}
    expected = sum(
        1
        for _name, line in landing_lines(lake_home)
        if (event := valid_event(line)) and event["event_time"] >= 1_772_409_600_000
    )
    assert bronze.count() == expected > 0


def _move_campaigns(home) -> None:
    """Give every ad the next campaign: a backfill after this joins views to other keys."""
    csv = home / "landing/campaigns/campaigns.csv"
    header, *rows = csv.read_text().splitlines()
    campaigns = sorted({row.split(",")[1] for row in rows})
    moved = {old: campaigns[(index + 1) % len(campaigns)] for index, old in enumerate(campaigns)}
    csv.write_text(
        "\n".join(
            [
                header,
                *(f"{ad},{moved[campaign]}" for ad, campaign in (row.split(",") for row in rows)),
            ]
        )
        + "\n"
    )


def test_gold_counts_rows_a_backfill_moved_to_other_keys_after_its_first_batch(spark, lake_home):
    """Gold's stream state counts only what the stream read: after a backfill re-joined silver's
    views to other campaigns, the next run's keys must be counted from silver, not from state
    (``MergeSink.recomputed``; only a query's first batch over the whole of silver may skip it)."""
    generate = [
        "generate",
        "ad_events",
        "--events",
        "3000",
        "--files",
        "1",
        "--start",
        "2026-05-01T00:00:00",
    ]
    assert main([*generate, "--seed", "1"]) == 0
    assert main(["run", "ad_events"]) == 0
    _move_campaigns(lake_home)
    assert (
        main(
            [
                "backfill",
                "ad_events",
                "--start",
                "2026-05-01T00:00:00",
                "--end",
                "2026-05-02T00:00:00",
            ]
        )
        == 0
    )
    assert main([*generate, "--seed", "2"]) == 0
    assert main(["run", "ad_events"]) == 0
    assert_tables_match_landing(lake_home)


def test_a_new_query_reads_an_appended_table_by_its_commits_and_a_rewritten_one_as_a_snapshot(
    spark, lake_home
):
    """A hop's first batch over a table only appended to reads its commits from version 0 (no
    snapshot jobs: ``UpstreamTable._first_batch_reads_all``) and ends at the offset a snapshot
    read ends at; over a table a backfill rewrote it reads the snapshot, or it would count the
    rows the backfill replaced as well as their replacements."""
    from spark_jobs.engine.runner import HopRun
    from spark_jobs.logs import checkpoint_log
    from spark_jobs.service import open_lake

    _generate(0, STARTS[0], files=2)
    silver = lake_home / "tables/silver/ad_views"
    assert main(["run", "ad_events", "--hop", "bronze"]) == 0
    assert main(["run", "ad_events", "--hop", "silver"]) == 0
    files = len(list(silver.rglob("*.parquet")))
    assert delta_log.appended_files(str(silver)) == files > 1
    lake = open_lake("ad_events")
    source = HopRun(spark, lake, lake.spec.hop("gold"), "check", "run-once").source
    assert source._first_batch_reads_all(None) and source._first_batch_reads_all(files)
    assert not source._first_batch_reads_all(files - 1)  # one batch could not take them all
    assert main(["run", "ad_events", "--hop", "gold"]) == 0
    # the query has begun: its offsets say where it is
    assert not source._first_batch_reads_all(None)
    end = checkpoint_log.read_offsets(str(lake_home / "checkpoints/ad_events/gold"), 0).sources[0]
    assert (end["reservoirVersion"], end["index"], end["isStartingVersion"]) == (
        delta_log.table_version(str(silver)) + 1,
        -1,
        False,
    )
    assert_tables_match_landing(lake_home)

    shutil.rmtree(lake_home / "tables/gold")
    shutil.rmtree(lake_home / "checkpoints/ad_events/gold")
    _move_campaigns(lake_home)  # the backfill's rows differ from those it replaces
    assert (
        main(
            [
                "backfill",
                "ad_events",
                "--hop",
                "silver",
                "--start",
                "2026-03-01T00:00:00",
                "--end",
                "2026-03-02T00:00:00",
            ]
        )
        == 0
    )
    # the backfill removed the files it replaced
    assert delta_log.appended_files(str(silver)) is None
    assert not source._first_batch_reads_all(None)
    assert main(["run", "ad_events", "--hop", "gold"]) == 0
    assert gold_counter(spark, lake_home) == expected_gold(lake_home)
