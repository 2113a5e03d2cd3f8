"""A stream DAG run that finds nothing new, through ``make run``'s own scheduler (issue 18,
part 2: under 5 s from scheduled to done).

The launcher as a user starts it (PostgreSQL, the scheduler with the LocalExecutor, the API
server, the DAG processor; Airflow's idle settings), with its sample file and no trickle after
it. A first stream DAG run streams that file; then each run is triggered through the REST API
as the UI triggers one, with nothing new. Per run, from its ``run_after`` (when the scheduler
may start it: what "scheduled" means for a triggered run) to its end, and from its start to its
end; the Spark tasks must have been skipped (else the sample is refused).

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

from bench.common import ROOT, stats

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
            raise RuntimeError(f"the launcher exited {process.returncode} before its login (log: {log})")
        time.sleep(1)
    raise RuntimeError(f"the launcher printed no login in {timeout_s:.0f} s (log: {log})")


def _settled(api, timeout_s: float = 900) -> None:
    """Until the stream DAG has a successful run and none still to finish."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        states = [run["state"] for run in api.call("GET", f"/dags/{DAG}/dagRuns?limit=20")["dag_runs"]]
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
                    total[name] += times.user + times.system + times.children_user + times.children_system
        return total

    before = spent()
    time.sleep(seconds)
    return {name: round(value - before[name], 2) for name, value in spent().items()}


def measure(repeats: int, idle_s: float, log: Path, settings: dict[str, str] | None = None) -> dict:
    """One launch: ``repeats`` nothing-new runs, then ``idle_s`` of idle CPU; ``settings``:
    Airflow settings over the launcher's idle ones."""
    from tests.conftest import free_port
    from tests.test_platform import Api

    work = Path(tempfile.mkdtemp(prefix="lakehouse-scheduled-"))
    base = {key: value for key, value in os.environ.items() if not key.startswith(("AIRFLOW__", "LAKEHOUSE_"))}
    (work / "pipelines").mkdir()
    shutil.copy(ROOT / "include" / "pipelines" / "ad_events.yaml", work / "pipelines")  # the example alone
    env = {**base, "AIRFLOW_HOME": str(work / "airflow"), "LAKEHOUSE_HOME": str(work / "lake"),
           "LAKEHOUSE_PIPELINES": str(work / "pipelines"), "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
           **(settings or {})}
    port = free_port()
    with open(log, "wb") as sink:  # anew: the login line read is this launch's
        process = subprocess.Popen([sys.executable, str(LAUNCHER), "run", "--port", str(port), "--duration", "1800",
                                    "--trickle-every", "86400"], env=env, stdout=sink, stderr=subprocess.STDOUT,
                                   cwd=ROOT, start_new_session=True)
    try:
        user, password = _login(log, process).split("login:")[1].strip().split(" / ")
        api = Api(f"http://127.0.0.1:{port}", user, password)
        api.call("POST", f"/dags/{DAG}/dagRuns", {"logical_date": None})  # the sample file (or the schedule's run)
        _settled(api)
        to_end, start_to_end = [], []
        for _ in range(repeats):
            run_id = api.call("POST", f"/dags/{DAG}/dagRuns", {"logical_date": None})["dag_run_id"]
            if api.wait_for_run(DAG, run_id, timeout_s=300) != "success":
                raise RuntimeError(api.failures(DAG, run_id))
            if api.task_state(DAG, run_id, "bronze") != "skipped":
                raise RuntimeError(f"{DAG} {run_id} found new data: not a nothing-new run")
            found = api.call("GET", f"/dags/{DAG}/dagRuns/{run_id}")
            to_end.append(_seconds(found["end_date"], found["run_after"]))
            start_to_end.append(_seconds(found["end_date"], found["start_date"]))
        idle = _idle_cpu(process.pid, idle_s)
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # the launcher stops what it started
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        import metadata_db

        if (work / "airflow" / "postgres").exists():
            metadata_db.Postgres(work / "airflow" / "postgres").remove()  # as root its data is outside work
        shutil.rmtree(work, ignore_errors=True)
    sleep_s = float({**IDLE_SETTINGS, **(settings or {})}["AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME"])
    return {"scheduler_idle_sleep_s": sleep_s, "runs": repeats, "scheduled_to_done_s": stats(to_end, 2),
            "start_to_done_s": stats(start_to_end, 2), "met": max(to_end) < TARGET_S,
            "idle_window_s": idle_s, "idle_cpu_s": idle,
            "idle_cpu_per_half_hour_s": round(sum(idle.values()) * 1800 / idle_s, 1)}


def run(repeats: int, log_dir: Path, idle_s: float = 240.0, others: tuple[str, ...] = ("2",)) -> dict:
    """The launcher's scheduler idle sleep, then each of ``others`` (seconds), one launch each,
    side by side."""
    sleeps = (IDLE_SETTINGS["AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME"], *others)
    return {"target_s": TARGET_S, "settings": [
        measure(repeats, idle_s, log_dir / f"scheduled-platform-{sleep}.log",
                {"AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": sleep}) for sleep in sleeps]}


def markdown(result: dict) -> str:
    lines = ["Stream DAG runs with nothing new, triggered through `make run`'s own scheduler (the launcher's "
             "default scheduler idle sleep first), then the scheduler's and PostgreSQL's CPU with no run:", "",
             "| scheduler idle sleep | runs | `run_after` to end s | start to end s | target under "
             f"{result['target_s']:g} s | idle CPU-s (scheduler + PostgreSQL) per half hour |",
             "|---:|---:|---:|---:|---|---:|"]
    for found in result["settings"]:
        done, started = found["scheduled_to_done_s"], found["start_to_done_s"]
        lines.append(f"| {found['scheduler_idle_sleep_s']:g} s | {found['runs']} | **{done['median']:.1f}** "
                     f"({done['min']:.1f}–{done['max']:.1f}) | {started['median']:.1f} | "
                     f"{'met' if found['met'] else 'not met'} | {found['idle_cpu_per_half_hour_s']:.1f} |")
    return "\n".join(lines) + "\n"
