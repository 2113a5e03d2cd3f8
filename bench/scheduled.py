"""A stream DAG run that finds nothing new, through ``make run``'s own scheduler (the aim:
under 5 s from scheduled to done).

The launcher as a user starts it (PostgreSQL, the scheduler with its executor, the API server, the
DAG processor; Airflow's idle settings), with its sample file and no trickle after it, the stream
DAG scheduled every minute. A first run streams that file (and the runs of ticks that passed during
it are made after it); then, per measured minute, the scheduled run (from its ``run_after``, the
cron tick, to its end: a tick that found the DAG idle) and one run triggered through the REST
API right after it, as the UI triggers one (from its ``run_after``, when it was made). The Spark
tasks must have been skipped (else the sample is refused). Last, the DAG paused, the scheduler's
and PostgreSQL's CPU over an idle window. One launch per setting, side by side: the launcher's
(``PromptLocalExecutor``: a 1-s sleep, a wait of up to 9 s that a task's end, a due scheduled run or
a triggered one ends) and Airflow's LocalExecutor with a 5-s sleep (the platform's before).

    python -m bench --only scheduled [--repeats N]
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from bench.common import ROOT, spread, stats

sys.path.insert(0, str(ROOT / "include" / "scripts"))
from lakehouse_platform import IDLE_SETTINGS  # noqa: E402

LAUNCHER = ROOT / "include" / "scripts" / "lakehouse_platform.py"
DAG = "ad_events__stream"
TARGET_S = 5.0


def _seconds(later: str, earlier: str) -> float:
    return (dt.datetime.fromisoformat(later) - dt.datetime.fromisoformat(earlier)).total_seconds()


def _login(log: Path, process: subprocess.Popen, timeout_s: float = 300) -> str:
    """The launcher's login line (``... login: user / password``), once it printed it."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if "login:" in line:
                return line
        if process.poll() is not None:
            raise RuntimeError(
                f"the launcher exited {process.returncode} before its login (log: {log})"
            )
        time.sleep(1)
    raise RuntimeError(f"the launcher printed no login in {timeout_s:.0f} s (log: {log})")


def _settled(api, timeout_s: float = 900) -> None:
    """Until the stream DAG has a successful run and none still to finish."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        states = [
            run["state"] for run in api.call("GET", f"/dags/{DAG}/dagRuns?limit=20")["dag_runs"]
        ]
        if "failed" in states:
            raise RuntimeError(f"a {DAG} run failed before the measured ones")
        if "success" in states and set(states) <= {"success"}:
            return
        time.sleep(2)
    raise RuntimeError(f"the first {DAG} runs did not finish in {timeout_s:.0f} s")


def _idle_cpu(launcher: int, seconds: float) -> dict[str, float]:
    """CPU-seconds the scheduler (its executor's workers with it) and PostgreSQL (its backends
    with it) spent over ``seconds`` with no DAG run."""
    import psutil

    groups: dict[str, list] = {"scheduler": [], "postgres": []}
    for child in psutil.Process(launcher).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            command = " ".join(child.cmdline())
            for name, found in groups.items():
                if name in command:
                    found.append(child)

    def spent() -> dict[str, float]:
        total = dict.fromkeys(groups, 0.0)
        for name, found in groups.items():
            for process in found:
                with contextlib.suppress(psutil.Error):
                    times = process.cpu_times()
                    total[name] += (
                        times.user + times.system + times.children_user + times.children_system
                    )
        return total

    before = spent()
    time.sleep(seconds)
    return {name: round(value - before[name], 2) for name, value in spent().items()}


def _spec(folder: Path, schedule: str) -> None:
    """The example spec alone in ``folder``, its stream DAG on ``schedule``."""
    spec = (
        shutil.copytree(ROOT / "examples" / "ad_events", folder / "ad_events", dirs_exist_ok=True)
        / "ad_events.yaml"
    )
    text = spec.read_text()
    changed = text.replace('schedule: "*/30 * * * *"', f'schedule: "{schedule}"')
    if changed == text:
        raise RuntimeError("the example spec's schedule line changed: update bench/scheduled.py")
    spec.write_text(changed)


def _nothing_new(api, run_id: str) -> dict:
    """A finished run of the stream DAG, refused unless it succeeded with its
    Spark tasks skipped.
    """
    if api.wait_for_run(DAG, run_id, timeout_s=300) != "success":
        raise RuntimeError(api.failures(DAG, run_id))
    if api.task_state(DAG, run_id, "bronze") != "skipped":
        raise RuntimeError(f"{DAG} {run_id} found new data: not a nothing-new run")
    return api.call("GET", f"/dags/{DAG}/dagRuns/{quote(run_id, safe='')}")


def _next_scheduled(api, after: str, timeout_s: float = 150) -> str:
    """The id of the stream DAG's first scheduled run whose tick is later than ``after``."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        for found in api.call("GET", f"/dags/{DAG}/dagRuns?limit=20&order_by=-run_after")[
            "dag_runs"
        ]:
            if found["run_type"] == "scheduled" and _seconds(found["run_after"], after) > 0:
                return found["dag_run_id"]
        time.sleep(1)
    raise RuntimeError(f"no scheduled {DAG} run after {after} in {timeout_s:.0f} s")


def started(command: list[str], env: dict, log: Path) -> subprocess.Popen:
    """``command`` in a session of its own from the checkout, its output in ``log`` (anew: a
    line read from it is this process's)."""
    with open(log, "wb") as sink:
        return subprocess.Popen(
            command,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            start_new_session=True,
        )


def stop_group(process: subprocess.Popen, sig: int = signal.SIGTERM, wait_s: float = 120) -> None:
    """Signal ``process``'s group (it started a session of its own), then SIGKILL it after
    ``wait_s``."""
    with contextlib.suppress(ProcessLookupError):  # it ended already
        os.killpg(process.pid, sig)
    try:
        process.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextlib.contextmanager
def platform(
    prefix: str, schedule: str, log: Path, settings: dict, *flags: str, duration_s: int = 3600
):
    """``make run``'s launcher on a folder of its own with the example pipeline alone, its stream
    DAG on ``schedule``, no trickle after the sample file, stopping itself after ``duration_s``;
    ``settings`` over the launcher's environment, ``flags`` on its command line. Yields the
    launcher's process and the REST API logged in; stops the launcher (which stops what it
    started) and removes its folder."""
    from testkit.airflow import Api
    from testkit.paths import free_port

    work = Path(tempfile.mkdtemp(prefix=prefix))
    base = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AIRFLOW__", "LAKEHOUSE_"))
    }
    (work / "pipelines").mkdir()
    _spec(work / "pipelines", schedule)
    env = {
        **base,
        "AIRFLOW_HOME": str(work / "airflow"),
        "LAKEHOUSE_HOME": str(work / "lake"),
        "LAKEHOUSE_PIPELINES": str(work / "pipelines"),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        **settings,
    }
    port = free_port()
    command = [sys.executable, str(LAUNCHER), "run", "--port", str(port)]
    command += ["--duration", str(duration_s), "--trickle-every", "86400", *flags]
    process = started(command, env, log)
    try:
        user, password = _login(log, process).split("login:")[1].strip().split(" / ")
        yield process, Api(f"http://127.0.0.1:{port}", user, password)
    finally:
        stop_group(process)  # the launcher stops what it started
        import metadata_db

        if (work / "airflow" / "postgres").exists():
            # as root its data is outside work
            metadata_db.Postgres(work / "airflow" / "postgres").remove()
        shutil.rmtree(work, ignore_errors=True)


def measure(repeats: int, idle_s: float, log: Path, settings: dict[str, str] | None = None) -> dict:
    """One launch: ``repeats`` minutes, each a scheduled and a triggered nothing-new run, then
    ``idle_s`` of idle CPU; ``settings``: Airflow settings over the launcher's idle ones."""
    with platform("lakehouse-scheduled-", "* * * * *", log, settings or {}) as (process, api):
        api.call("POST", f"/dags/{DAG}/dagRuns", {"logical_date": None})  # the sample file
        _settled(api)
        # a tick passed during those runs: its run, made after them, is no nothing-new
        # one from its tick
        time.sleep(5)
        _settled(api)
        runs: dict[str, list[float]] = {"scheduled": [], "triggered": []}
        tick = dt.datetime.now(dt.timezone.utc).isoformat()
        for _ in range(repeats):
            found = _nothing_new(api, _next_scheduled(api, tick))
            tick = found["run_after"]
            runs["scheduled"].append(_seconds(found["end_date"], found["run_after"]))
            triggered = _nothing_new(
                api, api.call("POST", f"/dags/{DAG}/dagRuns", {"logical_date": None})["dag_run_id"]
            )
            runs["triggered"].append(_seconds(triggered["end_date"], triggered["run_after"]))
        api.call("PATCH", f"/dags/{DAG}", {"is_paused": True})
        idle = _idle_cpu(process.pid, idle_s)
    chosen = {**IDLE_SETTINGS, **(settings or {})}
    return {
        "executor": chosen["AIRFLOW__CORE__EXECUTOR"].rsplit(".", 1)[-1],
        "scheduler_idle_sleep_s": float(chosen["AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME"]),
        "runs": repeats,
        "scheduled_to_done_s": stats(runs["scheduled"], 2),
        "triggered_to_done_s": stats(runs["triggered"], 2),
        "values_s": runs,
        "met": max(runs["scheduled"]) < TARGET_S,
        "idle_window_s": idle_s,
        "idle_cpu_s": idle,
        "idle_cpu_per_half_hour_s": round(sum(idle.values()) * 1800 / idle_s, 1),
    }


# Airflow's LocalExecutor at a 5-s sleep, its task supervisors waking every 5 s (Airflow's default).
BEFORE = {
    "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
    "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "5",
    "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "5",
}


def run(repeats: int, log_dir: Path, idle_s: float = 240.0, before: bool = True) -> dict:
    """The launcher's settings, then (``before``) Airflow's LocalExecutor with a 5-s sleep, one
    launch each, side by side."""
    settings = [("launcher", {}), *([("before", BEFORE)] if before else [])]
    return {
        "target_s": TARGET_S,
        "settings": [
            {
                "name": name,
                **measure(repeats, idle_s, log_dir / f"scheduled-platform-{name}.log", chosen),
            }
            for name, chosen in settings
        ],
    }


def markdown(result: dict) -> str:
    lines = [
        "Stream DAG runs with nothing new through `make run`'s own scheduler, the DAG scheduled "
        "every minute: per minute its scheduled run (from the tick) and one triggered through the "
        "REST API (from when it was made); then, the DAG paused, the scheduler's and "
        "PostgreSQL's CPU with no run:",
        "",
        "| executor | scheduler idle sleep | minutes | scheduled: tick to end s | target under "
        f"{result['target_s']:g} s | triggered: made to end s | idle CPU-s (scheduler + "
        "PostgreSQL) per half hour |",
        "|---|---:|---:|---:|---|---:|---:|",
    ]
    for found in result["settings"]:
        lines.append(
            f"| {found['executor']} | {found['scheduler_idle_sleep_s']:g} s | {found['runs']} | "
            f"**{spread(found['scheduled_to_done_s'])}** | {'met' if found['met'] else 'not met'} "
            f"| {spread(found['triggered_to_done_s'])} | {found['idle_cpu_per_half_hour_s']:.1f} |"
        )
    return "\n".join(lines) + "\n"
