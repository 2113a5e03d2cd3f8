"""Backfills and streams over the same days, in every order the lock allows: no row
twice, none lost.

Expected tables come from the landing files in plain Python (``assert_tables_match_landing``).
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter

import pytest

from spark_jobs.cli import main
from testkit.expected import assert_tables_match_landing, gold_counter
from testkit.paths import VENV_BIN, lakehouse

pytestmark = [pytest.mark.spark, pytest.mark.integration]

# 3,000 events at 100/s in three files from 23:59:45: the middle file straddles midnight.
MIDNIGHT_DATA = [
    "generate",
    "ad_events",
    "--events",
    "3000",
    "--files",
    "3",
    "--seed",
    "21",
    "--start",
    "2026-03-02T23:59:45",
    "--bad-fraction",
    "0.02",
]
DAY = ["--start", "2026-03-03", "--end", "2026-03-04"]


def _bronze_batch_ids(spark, home) -> list[int]:
    bronze = spark.read.format("delta").load(str(home / "tables/bronze/ad_events"))
    return sorted(row[0] for row in bronze.select("_batch_id").distinct().collect())


@pytest.mark.slow
def test_backfill_before_the_stream_reaches_its_files(spark, lake_home):
    """Backfilling a day whose files the stream has not read yet, then streaming: the stream
    adds the other day's lines of those files and nothing the backfill already wrote."""
    assert main(MIDNIGHT_DATA) == 0
    assert main(["backfill", "ad_events", *DAY]) == 0
    assert main(["run", "ad_events"]) == 0
    assert_tables_match_landing(lake_home)
    # both wrote rows: the backfill and batch 0
    assert _bronze_batch_ids(spark, lake_home) == [-1, 0]

    # New files for the backfilled day reach bronze through the stream, and the hops below.
    assert (
        main(
            [
                "generate",
                "ad_events",
                "--events",
                "400",
                "--files",
                "2",
                "--seed",
                "22",
                "--start",
                "2026-03-03T06:00:00",
            ]
        )
        == 0
    )
    assert main(["run", "ad_events"]) == 0
    assert_tables_match_landing(lake_home)

    # The same backfill again, then the stream: still every line once.
    assert main(["backfill", "ad_events", *DAY]) == 0
    assert main(["run", "ad_events"]) == 0
    assert_tables_match_landing(lake_home)


@pytest.mark.slow
def test_backfill_waits_for_a_stream_that_has_not_read_its_upstream(spark, lake_home):
    """Bronze streamed, silver and gold not yet: a backfill of silver now would write the
    day's views, and silver's stream would add them again. So the backfill waits (or, with
    no wait left, refuses and names the run that unblocks it)."""
    assert main(MIDNIGHT_DATA) == 0
    assert main(["run", "ad_events", "--hop", "bronze"]) == 0
    assert main(["run", "ad_events", "--hop", "silver"]) == 0
    assert (
        main(
            [
                "generate",
                "ad_events",
                "--events",
                "300",
                "--seed",
                "23",
                "--start",
                "2026-03-03T00:01:00",
            ]
        )
        == 0
    )
    assert main(["run", "ad_events", "--hop", "bronze"]) == 0

    refused = lakehouse("backfill", "ad_events", *DAY, check=False)
    assert refused.returncode == 2
    assert "silver's stream has not read bronze version" in refused.stderr
    assert "lakehouse run ad_events --hop silver" in refused.stderr

    waiting = subprocess.Popen(
        [str(VENV_BIN / "lakehouse"), "backfill", "ad_events", *DAY, "--wait", "600"],
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # until it says it waits (a fixed sleep was too short for its start on a loaded machine)
        said = []
        for line in waiting.stderr:
            said.append(line)
            if "backfill waits: silver's stream has not read bronze" in line:
                break
        assert waiting.poll() is None, "".join(said)[-3000:]  # waiting, not failed
        assert main(["run", "ad_events", "--wait", "60"]) == 0  # the stream's next run catches up
        _out, err = waiting.communicate(timeout=600)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert waiting.returncode == 0, err[-3000:]
    assert_tables_match_landing(lake_home)
    assert main(["run", "ad_events"]) == 0
    assert_tables_match_landing(lake_home)


def _silver_aggregate(spark, home) -> Counter:
    """Views per (campaign, 10-s window) counted in plain Python from silver's rows."""
    counts: Counter = Counter()
    for campaign, event_time in (
        spark.read.format("delta")
        .load(str(home / "tables/silver/ad_views"))
        .select("campaign_id", "event_time")
        .collect()
    ):
        if campaign is not None:
            counts[(campaign, event_time - event_time % 10_000)] += 1
    return counts


def test_late_events_into_windows_only_a_backfill_wrote_count_in_full(spark, lake_home):
    """Gold's stream state never saw what a backfill wrote. Late events (within the allowed
    lateness) into such windows must add to the backfilled counts, not replace them."""

    def generate(seed: int, start: str, events: int, files: int = 1) -> None:
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
                ]
            )
            == 0
        )

    def gold_is_silver_aggregated() -> None:
        assert gold_counter(spark, lake_home) == _silver_aggregate(spark, lake_home)

    generate(31, "2026-05-01T00:00:00", 400)  # streamed: in gold's state, 0-4 s
    assert main(["run", "ad_events"]) == 0
    generate(32, "2026-05-01T00:00:05", 300, files=2)  # the same windows, backfilled first
    window = ["--start", "2026-05-01T00:00:00", "--end", "2026-05-01T00:01:00"]
    # rewrites what the stream wrote there
    assert main(["backfill", "ad_events", *window]) == 0
    gold_is_silver_aggregated()
    # late (within a minute), same windows
    generate(33, "2026-05-01T00:00:09", 50)
    assert main(["run", "ad_events"]) == 0
    gold_is_silver_aggregated()
    assert_tables_match_landing(lake_home)
    assert main(["backfill", "ad_events", *window]) == 0
    gold_is_silver_aggregated()
    assert_tables_match_landing(lake_home)
