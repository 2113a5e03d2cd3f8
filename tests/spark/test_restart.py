"""Restartability: SIGKILL the Spark driver of a run at a random moment, run again, and the
tables equal those of an uninterrupted run over the same files."""

from __future__ import annotations

import os
import random
import shutil
import signal
import time

import pytest

from spark_jobs.cli import main
from testkit.expected import expected_gold, gold_counter, table_rows
from testkit.paths import killed_mid_run

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]


def test_killed_run_then_rerun_equals_uninterrupted_run(spark, lake_home, tmp_path, monkeypatch):
    assert (
        main(
            [
                "generate",
                "ad_events",
                "--events",
                "2400",
                "--files",
                "6",
                "--seed",
                "21",
                "--start",
                "2026-03-05T12:00:00",
                "--bad-fraction",
                "0.02",
            ]
        )
        == 0
    )
    reference = tmp_path / "reference"
    shutil.copytree(lake_home / "landing", reference / "landing")

    # The interrupted lake: a separate process (the driver and its JVM in one process group),
    # killed at a seeded random moment after its first committed batch and before it ends.
    seed = int(os.environ.get("KILL_SEED", random.randrange(10**6)))
    extra = random.Random(seed).uniform(0, 4)
    killed, code, _out = killed_mid_run(
        ["run", "ad_events", "--max-files-per-trigger", "2"],
        extra,
        after=lake_home / "checkpoints/ad_events/bronze/commits/0",
    )
    print(f"KILL_SEED={seed}: killed {extra:.1f} s after bronze's first commit (exit {code})")
    assert killed and code == -signal.SIGKILL, "the run ended before the kill: not a mid-run kill"
    time.sleep(1)
    assert main(["run", "ad_events", "--max-files-per-trigger", "2"]) == 0

    # The reference lake's first run was killed too, as each hop wrote its offsets/0: Spark's
    # temp files left behind (a query with no batch yet refuses to start beside them).
    for hop in ("bronze", "silver", "gold"):
        offsets = reference / f"checkpoints/ad_events/{hop}/offsets"
        offsets.mkdir(parents=True)
        (offsets / ".0.6f1c2d9e-killed.tmp").write_text("v1\n")
        (offsets / "..0.6f1c2d9e-killed.tmp.crc").write_bytes(b"crc")
    monkeypatch.setenv("LAKEHOUSE_HOME", str(reference))
    assert main(["run", "ad_events", "--max-files-per-trigger", "2"]) == 0
    assert not list(reference.glob("checkpoints/ad_events/*/offsets/*killed*"))

    for hop in ("bronze", "silver", "gold"):
        assert table_rows(lake_home, hop) == table_rows(reference, hop), hop
    assert gold_counter(spark, lake_home) == expected_gold(lake_home)
    quarantine = lambda home: sorted(
        r.raw_line
        for r in spark.read.format("delta")
        .load(str(home / "tables/quarantine/ad_events"))
        .collect()
    )
    assert quarantine(lake_home) == quarantine(reference)
