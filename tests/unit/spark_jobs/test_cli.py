"""``spark_jobs/cli.py``: the CLI's contract without a JVM: bad usage is one line and exit 2, a
missing Java, jars or lake folder is a clear error, a closed pipe ends quietly, importing the
package starts no JVM, progress lines."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from spark_jobs.cli import main
from testkit.paths import VENV_BIN

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "nope"], "unknown pipeline 'nope'"),
        (["run", "ad_events", "--hop", "platinum"], "unknown hop 'platinum'"),
        (
            ["backfill", "ad_events", "--start", "2026-03-02", "--end", "2026-03-01"],
            "is not before --end",
        ),
        (
            ["backfill", "ad_events", "--start", "2026-03-01", "--end", "2026-03-01"],
            "is not before --end",
        ),
        (
            ["backfill", "ad_events", "--start", "03/01/2026", "--end", "2026-03-02"],
            "not an ISO-8601",
        ),
        (["run", "ad_events", "--run-id", "../../etc"], "--run-id"),
        (["generate", "ad_events", "--events", "5", "--bad-fraction", "2"], "outside 0..1"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(argv, message, lake_home, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]


def test_missing_lakehouse_home_is_created(tmp_path, monkeypatch, capsys):
    home = tmp_path / "not" / "yet"
    monkeypatch.setenv("LAKEHOUSE_HOME", str(home))
    assert main(["status", "ad_events"]) == 0
    assert home.is_dir()


def _cli(args, env):
    return subprocess.run(
        [str(VENV_BIN / "lakehouse"), *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_missing_java_is_a_clear_error(tmp_path):
    env = {**os.environ, "LAKEHOUSE_HOME": str(tmp_path), "PATH": str(VENV_BIN), "JAVA_HOME": ""}
    done = _cli(["run", "ad_events"], env)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: Java is not installed or not on PATH: install Java 17+ (e.g. apt-get install "
        "openjdk-17-jre-headless)"
    ]


def test_missing_delta_jars_is_a_clear_error(tmp_path):
    env = {
        **os.environ,
        "LAKEHOUSE_HOME": str(tmp_path),
        "LAKEHOUSE_JARS_DIR": str(tmp_path / "nojars"),
    }
    done = _cli(["run", "ad_events"], env)
    assert done.returncode == 2
    assert "Delta jars are missing" in done.stderr and "lakehouse setup" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_closed_pipe_ends_the_command_quietly(tmp_path):
    """``lakehouse status X | head -1``: the reader is gone before the command writes; it ends
    with the status of a process a closed pipe stopped, and says nothing."""
    env = {**os.environ, "LAKEHOUSE_HOME": str(tmp_path)}
    command = subprocess.Popen(
        [str(VENV_BIN / "lakehouse"), "status", "ad_events"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    command.stdout.close()
    _out, err = command.communicate(timeout=120)
    assert (command.returncode, err.decode()) == (141, "")
    shown = subprocess.run(
        [str(VENV_BIN / "lakehouse"), "status", "ad_events"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert shown.returncode == 0 and shown.stdout.startswith("pipeline ad_events")


def test_importing_the_package_starts_no_jvm():
    code = (
        "import spark_jobs.cli, spark_jobs.control.status, spark_jobs.control.writers.samples, "
        "sys; print('pyspark' in sys.modules)"
    )
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip()
        == "False"
    )
