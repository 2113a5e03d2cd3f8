"""A lake written by an earlier commit keeps running and rolling back: the layers moved
every module, and the spec's ``campaigns`` moved under ``inputs:``, but the files a lake holds
(tables, checkpoints, run records) and the old spec must still work.

The old lake is made by the code of :data:`OLD_COMMIT` itself (``git archive`` of its package and
spec, run as ``python -m spark_jobs.cli``), not written by hand; then this commit's code runs,
rolls back and runs again on it, and every table must equal the landing files.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from spark_jobs.cli import main
from spark_jobs.model.settings import jars_dir
from testkit.expected import assert_tables_match_landing
from testkit.paths import EXAMPLES, ROOT

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

OLD_COMMIT = "d1b0285"  # the last commit before the layers (flat spark_jobs/, top-level campaigns:)


def _old_code(tmp_path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git history of this repository (a clone)")
    known = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{OLD_COMMIT}^{{commit}}"], capture_output=True
    )
    if known.returncode != 0:
        pytest.skip(f"commit {OLD_COMMIT} is not in this clone (a shallow clone?)")
    old = tmp_path / "old"
    old.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", OLD_COMMIT, "spark_jobs", "include/pipelines"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
    assert (old / "spark_jobs" / "runner.py").exists() and "campaigns: landing/campaigns" in (
        old / "include/pipelines/ad_events.yaml"
    ).read_text()
    return old


def test_a_lake_written_by_the_previous_layout_keeps_running_and_rolling_back(
    spark, lake_home, tmp_path, monkeypatch
):
    old = _old_code(tmp_path)
    env = {
        **os.environ,
        "PYTHONPATH": str(old),
        "LAKEHOUSE_PIPELINES": str(old / "include/pipelines"),
        "LAKEHOUSE_JARS_DIR": str(jars_dir()),
    }

    def old_cli(*args: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "spark_jobs.cli", *args],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, f"old lakehouse {' '.join(args)}:\n{done.stderr[-3000:]}"

    check = subprocess.run(
        [sys.executable, "-c", "import spark_jobs.runner, sys; print(spark_jobs.runner.__file__)"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert check.stdout.strip() == str(old / "spark_jobs" / "runner.py"), check.stderr[-2000:]
    # Two increments (three files), one old run of one file per batch: bronze batches 0..2, and
    # silver and gold batches of a few upstream files each, all written by the old code.
    for seed, files in ((1, 2), (2, 1)):
        old_cli(
            "generate",
            "ad_events",
            "--events",
            "400",
            "--files",
            str(files),
            "--seed",
            str(seed),
            "--start",
            f"2026-04-01T00:0{seed}:00",
            "--bad-fraction",
            "0.05",
        )
    old_cli("run", "ad_events", "--max-files-per-trigger", "1", "--quality", "off")

    # This commit's code on the old lake, reading the old spec (top-level campaigns:) with the
    # example's code beside it, as a team's flat folder of specs holds its pipelines' code.
    for module in (EXAMPLES / "ad_events").glob("*.py"):
        shutil.copy(module, old / "include/pipelines")
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(old / "include/pipelines"))
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
                "3",
                "--start",
                "2026-04-01T00:03:00",
                "--bad-fraction",
                "0.05",
            ]
        )
        == 0
    )
    assert main(["run", "ad_events"]) == 0
    assert_tables_match_landing(lake_home)
    assert main(["checkpoint", "validate", "ad_events"]) == 0
    # Back to a batch the old code wrote, cascading, and replay with the new code.
    assert main(["rollback", "ad_events", "--hop", "bronze", "--to-batch", "1"]) == 0
    assert main(["run", "ad_events"]) == 0
    assert_tables_match_landing(lake_home)
    assert main(["status", "ad_events"]) == 0
