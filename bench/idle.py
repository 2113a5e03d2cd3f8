"""Benchmark: what the platform costs per hour while nothing arrives, beside an always-on query.

Three measures, one after the other on the same machine, each over the same idle window:

- ``arrival``: ``make run TRIGGER=arrival``'s processes (PostgreSQL, the scheduler with its
  executor, the DAG processor, the triggerer, the API server), the ad_events pipeline alone on
  arrival, after the run its first sample started: each process's CPU-seconds over the window,
  and the DAG runs made in it (none: nothing arrived);
- ``schedule``: the same launch with the stream DAG on a cron schedule every 5 minutes instead
  (no triggerer): each tick's run checks for new data without a JVM and skips the Spark tasks;
- ``always_on``: ``lakehouse run ad_events --continuous --trigger-interval '10 seconds'`` on a
  lake where nothing arrives, once its query has started: its Python process, its JVM and every
  other process it started. It holds a driver and its cores (``local[2]``) the whole time,
  which the CPU-seconds do not show.

Figures are per hour (the window's CPU-seconds x 3600 / its seconds).

    python -m bench --only idle [--idle-minutes 10]
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, lakehouse_command
from bench.scheduled import DAG, LAUNCHER, _login, _settled

# Each process of a launch by a word of its command line (the first that matches).
GROUPS = (
    ("triggerer", " triggerer"),
    ("scheduler", " scheduler"),
    ("dag_processor", " dag-processor"),
    ("api_server", " api-server"),
    ("postgres", "postgres"),
)
EVERY_5_MINUTES = "*/5 * * * *"


def cpu_over(root: int, seconds: float, groups=GROUPS) -> dict[str, float]:
    """CPU-seconds each group of ``root``'s processes (and ``root`` itself, as ``other`` when no
    group's word is in its command line) spent over the next ``seconds``; a process that
    started meanwhile counts from its start."""
    import psutil

    def tree() -> dict[int, tuple[str, psutil.Process]]:
        found = {}
        top = psutil.Process(root)
        for process in [top, *top.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                command = " ".join(process.cmdline())
                name = next((name for name, word in groups if word in command), "other")
                found[process.pid] = (name, process)
        return found

    def spent(processes) -> dict[int, float]:
        times = {}
        for pid, (_name, process) in processes.items():
            with contextlib.suppress(psutil.Error):
                times[pid] = process.cpu_times()
        return {
            pid: t.user + t.system + t.children_user + t.children_system for pid, t in times.items()
        }

    first = tree()
    before = spent(first)
    time.sleep(seconds)
    now = tree()
    after = spent(now)
    totals = dict.fromkeys([name for name, _word in groups] + ["other"], 0.0)
    for pid, value in after.items():
        # a child's time counts once: in its own line while it lives, in its parent's after
        name = now[pid][0]
        totals[name] += value - before.get(pid, 0.0)
    return {name: round(value, 2) for name, value in totals.items() if value or name != "other"}


def _spec(folder: Path, schedule: str) -> None:
    """The example spec alone in ``folder``, its stream DAG on ``schedule``."""
    spec = (
        shutil.copytree(ROOT / "examples" / "ad_events", folder / "ad_events", dirs_exist_ok=True)
        / "ad_events.yaml"
    )
    text = spec.read_text()
    changed = text.replace('schedule: "*/30 * * * *"', f'schedule: "{schedule}"')
    if changed == text:
        raise RuntimeError("the example spec's schedule line changed: update bench/idle.py")
    spec.write_text(changed)


def _runs(api) -> int:
    return api.call("GET", f"/dags/{DAG}/dagRuns?limit=1")["total_entries"]


def launched(trigger: str, idle_s: float, log: Path) -> dict:
    """One launch of the platform with its stream DAG on ``trigger`` (``arrival`` or
    ``schedule``, every 5 minutes): the CPU-seconds of each of its processes over ``idle_s``
    after the first sample's run, and the runs made meanwhile."""
    from testkit.airflow import Api
    from testkit.paths import free_port

    work = Path(tempfile.mkdtemp(prefix="lakehouse-idle-"))
    base = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AIRFLOW__", "LAKEHOUSE_"))
    }
    (work / "pipelines").mkdir()
    _spec(work / "pipelines", EVERY_5_MINUTES)
    env = {
        **base,
        "AIRFLOW_HOME": str(work / "airflow"),
        "LAKEHOUSE_HOME": str(work / "lake"),
        "LAKEHOUSE_PIPELINES": str(work / "pipelines"),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
    }
    port = free_port()
    command = [sys.executable, str(LAUNCHER), "run", "--port", str(port)]
    command += ["--duration", str(int(idle_s + 1800)), "--trickle-every", "86400"]
    command += ["--trigger", trigger]
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            command,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            start_new_session=True,
        )
    try:
        user, password = _login(log, process).split("login:")[1].strip().split(" / ")
        api = Api(f"http://127.0.0.1:{port}", user, password)
        if trigger == "schedule":  # the sample file, as a user's first run takes it
            api.call("POST", f"/dags/{DAG}/dagRuns", {"logical_date": None})
        else:  # the watcher starts its run
            deadline = time.time() + 300
            while not _runs(api):
                if time.time() > deadline:
                    raise RuntimeError(f"no run of {DAG} on arrival in 300 s (log: {log})")
                time.sleep(2)
        _settled(api)
        time.sleep(5)
        _settled(api)
        runs = _runs(api)
        spent = cpu_over(process.pid, idle_s)
        made = _runs(api) - runs
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # the launcher stops what it started
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        sys.path.insert(0, str(ROOT / "include" / "scripts"))
        import metadata_db

        if (work / "airflow" / "postgres").exists():
            metadata_db.Postgres(work / "airflow" / "postgres").remove()
        shutil.rmtree(work, ignore_errors=True)
    return {"cpu_s": spent, "runs_made": made}


def always_on(idle_s: float, log: Path, start_s: float = 90.0) -> dict:
    """The always-on query on a lake where nothing arrives: its processes' CPU-seconds over
    ``idle_s``, from ``start_s`` after it started (its JVM up and its query running)."""
    from bench.cost import _lake

    root = Path(tempfile.mkdtemp(prefix="lakehouse-idle-always-on-"))
    (root / "no-suites").mkdir()
    _home, env = _lake(root, "always-on")
    command = lakehouse_command(
        "run", "ad_events", "--continuous", "--trigger-interval", "10 seconds", "--quality=off"
    )
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            command,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            start_new_session=True,
        )
    try:
        time.sleep(start_s)
        if process.poll() is not None:
            raise RuntimeError(f"the always-on query exited {process.returncode} (log: {log})")
        spent = cpu_over(process.pid, idle_s, groups=(("jvm", "java"),))
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        shutil.rmtree(root, ignore_errors=True)
    return {"cpu_s": spent, "runs_made": 0}


def run(idle_s: float, log_dir: Path) -> dict:
    """The three measures over windows of ``idle_s``, with the figures per hour."""
    found = {
        "arrival": launched("arrival", idle_s, log_dir / "idle-arrival.log"),
        "schedule": launched("schedule", idle_s, log_dir / "idle-schedule.log"),
        "always_on": always_on(idle_s, log_dir / "idle-always-on.log"),
    }
    for measure in found.values():
        measure["cpu_s_per_hour"] = {
            name: round(value * 3600 / idle_s, 1) for name, value in measure["cpu_s"].items()
        }
        measure["total_cpu_s_per_hour"] = round(sum(measure["cpu_s_per_hour"].values()), 1)
    return {"idle_window_s": idle_s, "schedule": EVERY_5_MINUTES, **found}


def markdown(result: dict) -> str:
    names = ("triggerer", "scheduler", "dag_processor", "api_server", "postgres", "jvm", "other")
    lines = [
        f"CPU-seconds per hour while nothing arrives, over {result['idle_window_s']:g}-s windows "
        "measured one after the other: the platform as `make run` starts it with its stream DAG "
        f"on arrival, then on a cron schedule (`{result['schedule']}`: each tick's light check), "
        "then an always-on query (`--continuous`, a 10-s trigger) on a lake where nothing "
        "arrives. The always-on query also holds its driver and cores the whole time.",
        "",
        "| measure | " + " | ".join(names) + " | total CPU-s per hour | DAG runs made |",
        "|---|" + "---:|" * (len(names) + 2),
    ]
    for key in ("arrival", "schedule", "always_on"):
        measure = result[key]
        cells = [f"{measure['cpu_s_per_hour'].get(name, 0):.1f}" for name in names]
        lines.append(
            f"| {key.replace('_', '-')} | "
            + " | ".join(cells)
            + f" | **{measure['total_cpu_s_per_hour']:.1f}** | {measure['runs_made']} |"
        )
    arrival, on = result["arrival"], result["always_on"]
    if arrival["total_cpu_s_per_hour"]:
        lines += [
            "",
            f"Always-on over idle Airflow on arrival: "
            f"{on['total_cpu_s_per_hour'] / arrival['total_cpu_s_per_hour']:.1f}x the CPU.",
        ]
    return "\n".join(lines) + "\n"
