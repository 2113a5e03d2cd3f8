"""Benchmark: what the platform costs per hour while nothing arrives, beside an always-on query.

Three measures, one after the other on the same machine, each over the same idle window (the
always-on query first, the quickest to fail):

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
import shutil
import signal
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, lakehouse_command
from bench.scheduled import DAG, _settled, platform, started, stop_group

# Each process of a launch by the words of its command line or title (the first group that
# matches; Airflow titles its processes ``airflow api_server -- ...`` and the like).
GROUPS = (
    ("triggerer", (" triggerer",)),
    ("scheduler", (" scheduler",)),
    ("dag_processor", (" dag-processor", " dag_processor")),
    ("api_server", (" api-server", " api_server")),
    ("postgres", ("postgres",)),
)
EVERY_5_MINUTES = "*/5 * * * *"


def _tree(root: int, groups) -> dict:
    """Per pid of ``root`` and its descendants: its group (its own, else its nearest matched
    ancestor's, else ``other``), its parent's pid and the process."""
    import psutil

    top = psutil.Process(root)
    own, parents, processes = {}, {}, {}
    for process in [top, *top.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            command = " ".join(process.cmdline())
            own[process.pid] = next(
                (name for name, words in groups if any(word in command for word in words)), None
            )
            parents[process.pid], processes[process.pid] = process.ppid(), process

    def group(pid: int) -> str:
        while pid in own:
            if own[pid]:
                return own[pid]
            pid = parents[pid]
        return "other"

    return {pid: (group(pid), parents[pid], processes[pid]) for pid in processes}


def _spent(found: dict) -> dict[int, float]:
    """Per pid of ``found`` (:func:`_tree`), the CPU-seconds it and its reaped children spent."""
    import psutil

    times = {}
    for pid, (_name, _parent, process) in found.items():
        with contextlib.suppress(psutil.Error):
            times[pid] = process.cpu_times()
    return {
        pid: t.user + t.system + t.children_user + t.children_system for pid, t in times.items()
    }


def cpu_over(root: int, seconds: float, groups=GROUPS) -> dict[str, float]:
    """CPU-seconds each group of ``root``'s processes spent over the next ``seconds``. A process
    is in the first group whose words its command line holds, else in its nearest such
    ancestor's (an executor's workers and their tasks in the scheduler's), else in ``other``; one
    that started meanwhile counts from its start, one that ended counts in its parent (which
    reaped it) for the part of its time that fell in the window."""
    first = _tree(root, groups)
    before = _spent(first)
    time.sleep(seconds)
    now = _tree(root, groups)
    after = _spent(now)
    totals = dict.fromkeys([name for name, _words in groups] + ["other"], 0.0)
    for pid, value in after.items():
        # a live child's time is its own; a reaped one's is in its parent's children times
        totals[now[pid][0]] += value - before.get(pid, 0.0)
    for pid, value in before.items():
        parent = first[pid][1]
        if pid not in after and parent in now:
            # the parent's children times took the ended child's whole life: not the part before
            totals[now[parent][0]] -= value
    return {name: round(value, 2) for name, value in totals.items() if value or name != "other"}


def _runs(api) -> int:
    return api.call("GET", f"/dags/{DAG}/dagRuns?limit=1")["total_entries"]


def launched(trigger: str, idle_s: float, log: Path) -> dict:
    """One launch of the platform with its stream DAG on ``trigger`` (``arrival`` or
    ``schedule``, every 5 minutes): the CPU-seconds of each of its processes over ``idle_s``
    after the first sample's run, and the runs made meanwhile."""
    flags = ("--trigger", trigger)
    duration = int(idle_s) + 1800  # the launch, the first run and the window
    with platform("lakehouse-idle-", EVERY_5_MINUTES, log, {}, *flags, duration_s=duration) as (
        process,
        api,
    ):
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
    return {"cpu_s": spent, "runs_made": made}


def always_on(idle_s: float, log: Path, start_s: float = 90.0) -> dict:
    """The always-on query on a lake where nothing arrives: its processes' CPU-seconds over
    ``idle_s``, from ``start_s`` after it started (its JVM up and its query running)."""
    from bench.cost import _lake

    root = Path(tempfile.mkdtemp(prefix="lakehouse-idle-always-on-"))
    (root / "no-suites").mkdir()
    _home, env = _lake(root, "always-on")
    env["LAKEHOUSE_PIPELINES"] = str(ROOT / "examples")
    command = lakehouse_command(
        "run", "ad_events", "--continuous", "--trigger-interval", "10 seconds", "--quality=off"
    )
    process = started(command, env, log)
    try:
        time.sleep(start_s)
        if process.poll() is not None:
            raise RuntimeError(f"the always-on query exited {process.returncode} (log: {log})")
        spent = cpu_over(process.pid, idle_s, groups=(("jvm", ("java",)),))
    finally:
        stop_group(process, signal.SIGINT, wait_s=60)
        shutil.rmtree(root, ignore_errors=True)
    return {"cpu_s": spent, "runs_made": 0}


def run(idle_s: float, log_dir: Path) -> dict:
    """The three measures over windows of ``idle_s``, with the figures per hour."""
    if idle_s <= 0:
        raise ValueError(f"--idle-minutes must be more than 0 (got {idle_s / 60:g})")
    found = {"always_on": always_on(idle_s, log_dir / "idle-always-on.log")}
    found["arrival"] = launched("arrival", idle_s, log_dir / "idle-arrival.log")
    found["schedule"] = launched("schedule", idle_s, log_dir / "idle-schedule.log")
    for measure in found.values():
        measure["cpu_s_per_hour"] = {
            name: round(value * 3600 / idle_s, 1) for name, value in measure["cpu_s"].items()
        }
        measure["total_cpu_s_per_hour"] = round(sum(measure["cpu_s_per_hour"].values()), 1)
    return {"idle_window_s": idle_s, "cron": EVERY_5_MINUTES, **found}


def markdown(result: dict) -> str:
    measures = ("arrival", "schedule", "always_on")
    columns = ("triggerer", "scheduler", "dag_processor", "api_server", "postgres", "jvm", "other")
    # a column no process of any measure matched is left out (its CPU is under "other")
    names = [
        name for name in columns if any(result[key]["cpu_s_per_hour"].get(name) for key in measures)
    ]
    lines = [
        f"CPU-seconds per hour while nothing arrives, over {result['idle_window_s']:g}-s windows "
        "measured one after the other: the platform as `make run` starts it with its stream DAG "
        "on arrival, the same on a cron schedule "
        f"(`{result.get('cron', EVERY_5_MINUTES)}`: each tick's light check), and an always-on "
        "query (`--continuous`, a 10-s trigger) on a lake where nothing arrives, which also holds "
        "its driver and cores the whole time. *other*: the launcher, the query's Python process, "
        "and any process no column names.",
        "",
        "| measure | " + " | ".join(names) + " | total CPU-s per hour | DAG runs made |",
        "|---|" + "---:|" * (len(names) + 2),
    ]
    for key in measures:
        measure = result[key]
        cells = [f"{measure['cpu_s_per_hour'].get(name, 0):.1f}" for name in names]
        lines.append(
            f"| {key.replace('_', '-')} | "
            + " | ".join(cells)
            + f" | **{measure['total_cpu_s_per_hour']:.1f}** | {measure['runs_made']} |"
        )
    arrival, cron, on = result["arrival"], result["schedule"], result["always_on"]
    lines += [
        "",
        f"Idle on arrival against idle on the cron schedule: "
        f"{arrival['total_cpu_s_per_hour'] / cron['total_cpu_s_per_hour']:.2f}x the CPU; "
        f"always-on against idle on arrival: "
        f"{on['total_cpu_s_per_hour'] / arrival['total_cpu_s_per_hour']:.2f}x.",
    ]
    return "\n".join(lines) + "\n"
