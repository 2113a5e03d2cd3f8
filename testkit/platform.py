"""``make run``'s launcher in a test or a benchmark: started on a spare port, and the processes
it started, checked and cleaned up by PID (never by name)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from testkit.lakes import example_copy
from testkit.paths import ROOT, free_port

LAUNCHER = ROOT / "include/scripts/lakehouse_platform.py"


def launch(
    tmp_path,
    port: int,
    user_dags: dict[str, str] | None = None,
    freshness: str | None = None,
    trickle_every: int = 10,
    lake: str = "local",
    spark: str = "local",
    quality: Path | None = None,
    source: str = "landing",
    trigger: str = "schedule",
) -> tuple[subprocess.Popen, dict, str]:
    """``make run``'s launcher on a spare port, with a team's own DAG files (by name), the
    example spec alone (with another ``freshness`` if given), a sample file every ``trickle_every``
    seconds, its ``--lake``, ``--spark``, ``--source`` and ``--trigger`` (the watcher looking every
    2 seconds), and the quality suites of ``quality`` if given; returns it, its environment and
    its login line."""
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "LAKEHOUSE_HOME": str(tmp_path / "lake"),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
    }
    if quality is not None:
        env["LAKEHOUSE_QUALITY"] = str(quality)
    if trigger == "arrival":
        env["LAKEHOUSE_ARRIVAL_POLL_S"] = "2"
    # The example pipeline alone (shop's DAGs, unpaused, would run beside the walk's on 2 cores;
    # tests/spark/test_shop.py runs its stream DAG).
    specs = tmp_path / f"pipelines-{port}"
    specs.mkdir()
    spec = example_copy(specs, "ad_events") / "ad_events.yaml"
    text = spec.read_text()
    assert "freshness: 45 minutes" in text
    spec.write_text(
        text.replace("freshness: 45 minutes", f"freshness: {freshness or '45 minutes'}")
    )
    env["LAKEHOUSE_PIPELINES"] = str(specs)
    if user_dags:
        folder = tmp_path / "team-dags"
        folder.mkdir()
        for name, text in user_dags.items():
            (folder / name).write_text(text)
        env["LAKEHOUSE_USER_DAGS"] = str(folder)
    for key in [
        key
        for key in env
        if key.startswith("AIRFLOW__") and key != "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"
    ]:
        env.pop(key)
    process = subprocess.Popen(
        [
            sys.executable,
            str(LAUNCHER),
            "run",
            "--port",
            str(port),
            "--duration",
            "1800",
            "--trickle-every",
            str(trickle_every),
            "--lake",
            lake,
            "--spark",
            spark,
            "--source",
            source,
            "--trigger",
            trigger,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    deadline = time.time() + 240
    seen = []
    for line in process.stdout:
        if "login:" in line:
            return process, env, line
        seen.append(line)
        assert time.time() < deadline, "".join(seen)
    raise AssertionError(
        f"the launcher ended before printing the login (exit {process.wait()}): {''.join(seen)}"
    )


def command_of(process: psutil.Process) -> str:
    """A process's command line; empty for one that ended or is a zombie (an executor a finished
    application left, a task process not reaped yet)."""
    try:
        return " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):  # ZombieProcess is a NoSuchProcess
        return ""


def descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def left_running(processes: list[psutil.Process], within_s: float) -> list[str]:
    """The processes of ``processes`` still running (zombies do not count) after ``within_s``."""
    deadline = time.time() + within_s
    while True:
        alive = []
        for process in processes:
            try:
                if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{process.pid} {' '.join(process.cmdline())[:120]}")
            except psutil.NoSuchProcess:
                pass
        if not alive or time.time() > deadline:
            return alive
        time.sleep(0.5)


def drivers_left(tmp_path: Path, within_s: float) -> list[str]:
    """Shared Spark drivers of this test's DAG runs (``submit.py serve`` with an address file
    under ``tmp_path``) still running after ``within_s``: their own process groups, so not
    descendants of the launcher; the platform stops them by their address files."""
    deadline = time.time() + within_s
    while True:
        left = [
            command
            for command in map(command_of, psutil.process_iter())
            if "submit.py serve" in command and str(tmp_path) in command
        ]
        if not left or time.time() > deadline:
            return left
        time.sleep(0.5)


def kill_tree(process: subprocess.Popen, started: list[psutil.Process], airflow_home: Path) -> None:
    """A test's own clean-up when an assertion failed half-way: the launcher and all it started,
    and the shared drivers of its DAG runs (their own process groups, by their address files in
    ``airflow_home``'s ``drivers/``: else each waits out its idle time)."""
    from lakehouse_platform import stop_drivers  # include/scripts

    if process.poll() is None:
        started = started + descendants(process.pid)
        process.kill()
        process.wait()
    for child in started:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    stop_drivers(airflow_home / "drivers")
