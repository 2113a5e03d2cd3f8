"""A stream DAG run that finds nothing new, through ``make run``'s own scheduler (issue 18,
part 2: under 5 s from scheduled to done).

The launcher as a user starts it (PostgreSQL, the scheduler with the LocalExecutor, the API
server, the DAG processor; Airflow's idle settings), with its sample file and no trickle after
it. A first stream DAG run streams that file; then each run is triggered through the REST API
as the UI triggers one, with nothing new. Per run, from its ``run_after`` (when the scheduler
may start it: what "scheduled" means for a triggered run) to its end, and from its start to its
end; the Spark tasks must have been skipped (else the sample is refused).

    python -m bench --only scheduled
"""

from __future__ import annotations

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


def run(repeats: int, log_dir: Path, settings: dict[str, str] | None = None) -> dict:
    """``repeats`` nothing-new runs; ``settings``: Airflow settings over the launcher's idle ones."""
    from tests.conftest import free_port
    from tests.test_platform import Api

    work = Path(tempfile.mkdtemp(prefix="lakehouse-scheduled-"))
    log = log_dir / "scheduled-platform.log"
    base = {key: value for key, value in os.environ.items() if not key.startswith(("AIRFLOW__", "LAKEHOUSE_"))}
    (work / "pipelines").mkdir()
    shutil.copy(ROOT / "include" / "pipelines" / "ad_events.yaml", work / "pipelines")  # the example alone
    env = {**base, "AIRFLOW_HOME": str(work / "airflow"), "LAKEHOUSE_HOME": str(work / "lake"),
           "LAKEHOUSE_PIPELINES": str(work / "pipelines"), "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
           **(settings or {})}
    idle_sleep = {**IDLE_SETTINGS, **(settings or {})}["AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME"]
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
    return {"runs": repeats, "scheduled_to_done_s": stats(to_end, 2), "start_to_done_s": stats(start_to_end, 2),
            "target_s": 5.0, "met": max(to_end) < 5.0,
            "scheduler_idle_sleep_s": float(idle_sleep)}


def markdown(result: dict) -> str:
    done, started = result["scheduled_to_done_s"], result["start_to_done_s"]
    return (f"A stream DAG run with nothing new through `make run`'s scheduler, {result['runs']} triggered runs "
            f"(scheduler idle sleep {result['scheduler_idle_sleep_s']:g} s): from its `run_after` to its end "
            f"**{done['median']:.1f} s** (min {done['min']:.1f}, max {done['max']:.1f}); from its start to its end "
            f"{started['median']:.1f} s (min {started['min']:.1f}, max {started['max']:.1f}). Target under "
            f"{result['target_s']:g} s: {'met' if result['met'] else 'not met'}.\n")
