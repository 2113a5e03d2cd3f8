"""Benchmarks through real Airflow: DAG parse time, the nothing-new task, and the task
overhead around a Spark job.

- **Parse**: the DAG file loaded by ``DagBag`` ``repeats`` times in one process (the first
  load pays the imports; the median is what the DAG processor pays per re-parse).
- **Nothing new**: ``airflow tasks test ad_events__stream check_new_data`` on a lake with
  nothing new, against a forced ``lakehouse run ad_events`` on the same lake, both under
  :mod:`bench.meter` (wall, CPU-seconds of every process, and whether a JVM ran).
- **Task overhead**: ``airflow dags test ad_events__stream`` with new data each time, in both
  driver modes (``$LAKEHOUSE_DRIVER``: ``task``, a spark-submit per hop task, and ``shared``,
  one driver per DAG run), DAG runs alternating between them; for each hop task, the task
  instance's duration in the metadata DB and that minus the Spark job's time in the hop's run
  record (the hop plus its quality check): spark-submit, JVM start and Airflow's own task start
  and end; and each DAG run's wall time. Each DAG run has three hop tasks, so ``repeats``
  samples take ``ceil(repeats / 3)`` DAG runs of each mode.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import ROOT, lakehouse_command, metered, spread, stats

sys.path.insert(0, str(ROOT / "include" / "scripts"))
sys.path.insert(0, str(ROOT / "plugins"))

HOPS = ("bronze", "silver", "gold")
PARSE_PROBE = """
import json, sys, time
began = time.perf_counter()
from airflow.dag_processing.dagbag import DagBag
imported = time.perf_counter() - began
times = []
for _ in range(int(sys.argv[1])):
    began = time.perf_counter()
    bag = DagBag(dag_folder=sys.argv[2])
    times.append(time.perf_counter() - began)
    assert not bag.import_errors, bag.import_errors
print(json.dumps({"airflow_import_s": imported, "parse_s": times, "dags": len(bag.dags),
                  "jvm": any(name.startswith("pyspark") for name in sys.modules)}))
"""


def _airflow(env: dict, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"airflow {' '.join(args)} exited {done.returncode}: "
            f"{(done.stdout + done.stderr)[-1500:]}"
        )
    return done


def parse_times(env: dict, repeats: int) -> dict:
    dag_file = ROOT / "dags" / "lakehouse_pipelines.py"
    done = subprocess.run(
        [sys.executable, "-c", PARSE_PROBE, str(repeats + 1), str(dag_file)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the DAG parse probe failed: {done.stderr[-1500:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "file": dag_file.name,
        "dags": found["dags"],
        "first_parse_ms": round(found["parse_s"][0] * 1000, 1),
        "parse_ms": stats([value * 1000 for value in found["parse_s"][1:]], 1),
        "spark_imported": found["jvm"],
    }


def nothing_new(env: dict, repeats: int, log: Path) -> dict:
    check, forced = [], []
    for _ in range(repeats):
        check.append(
            metered(
                [
                    str(Path(sys.executable).parent / "airflow"),
                    "tasks",
                    "test",
                    "ad_events__stream",
                    "check_new_data",
                    "2026-03-04",
                ],
                env,
                log=log,
            )
        )
        forced.append(
            metered(lakehouse_command("run", "ad_events", "--run-id", "forced"), env, log=log)
        )
    summary = {
        name: {
            "wall_s": stats([r["wall_s"] for r in runs]),
            "cpu_s": stats([r["cpu_s"] for r in runs]),
            "jvm_started": any("java" in r["processes"] for r in runs),
        }
        for name, runs in (("check_new_data_task", check), ("forced_run_once", forced))
    }
    probe = (
        "import json, time; began = time.perf_counter(); from lakehouse_airflow.checks import "
        "has_new_data; imported = time.perf_counter(); found = has_new_data('ad_events'); "
        "print(json.dumps({'import_s': imported - began, 'check_s': time.perf_counter() - "
        "imported, 'new': found}))"
    )
    calls = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", probe],
                env={**env, "PYTHONPATH": str(ROOT / "plugins")},
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.splitlines()[-1]
        )
        for _ in range(repeats)
    ]
    if any(call["new"] for call in calls):
        raise RuntimeError("the nothing-new benchmark found new data: its lake is not caught up")
    summary["callable_ms"] = stats([call["check_s"] * 1000 for call in calls], 1)
    summary["ratio_wall"] = round(
        summary["forced_run_once"]["wall_s"]["median"]
        / summary["check_new_data_task"]["wall_s"]["median"],
        1,
    )
    summary["ratio_cpu"] = round(
        summary["forced_run_once"]["cpu_s"]["median"]
        / summary["check_new_data_task"]["cpu_s"]["median"],
        1,
    )
    return summary


# $LAKEHOUSE_DRIVER: a spark-submit per hop task, or one driver per DAG run
DRIVER_MODES = ("task", "shared")


def _one_dag_run(
    env: dict, lake: Path, airflow_home: Path, index: int, events: int
) -> tuple[dict, dict, float]:
    """New events, then one ``dags test`` of the stream DAG: per hop, (task s, Spark job s); the
    DAG run's seconds.
    """
    subprocess.run(
        lakehouse_command(
            "generate",
            "ad_events",
            "--events",
            str(events),
            "--seed",
            str(20 + index),
            "--start",
            f"2026-03-{index % 28 + 1:02d}T08:00:00",
        ),
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    _airflow(
        env,
        "dags",
        "test",
        "ad_events__stream",
        f"2026-04-{index % 28 + 1:02d}T{index // 28:02d}:00:00",
    )
    with sqlite3.connect(airflow_home / "airflow.db") as db:
        run_id = db.execute(
            "SELECT run_id FROM dag_run WHERE dag_id = 'ad_events__stream' ORDER BY id DESC LIMIT 1"
        ).fetchone()[0]
        durations = dict(
            db.execute(
                "SELECT task_id, duration FROM task_instance WHERE dag_id = 'ad_events__stream' "
                "AND run_id = ?",
                (run_id,),
            ).fetchall()
        )
        # `dags test` dates its DAG run at the logical date: the run's span is its tasks' first
        # start to last end.
        began, ended = db.execute(
            "SELECT julianday(MIN(start_date)), julianday(MAX(end_date)) FROM task_instance "
            "WHERE dag_id = 'ad_events__stream' AND run_id = ? AND start_date IS NOT NULL",
            (run_id,),
        ).fetchone()
    tasks, jobs = {}, {}
    for hop in HOPS:
        record = json.loads((lake / "_ops/runs/ad_events" / f"{run_id}.{hop}.json").read_text())
        jobs[hop] = record["duration_s"] + ((record.get("quality") or {}).get("seconds") or 0.0)
        tasks[hop] = durations[hop]
    return tasks, jobs, (ended - began) * 86_400


def task_overhead(env: dict, lake: Path, airflow_home: Path, repeats: int, events: int) -> dict:
    """Both driver modes, DAG runs alternating between them (the order flips each round), the
    same number of new events before each."""
    samples = {
        mode: {"task": {hop: [] for hop in HOPS}, "job": {hop: [] for hop in HOPS}, "dag_run": []}
        for mode in DRIVER_MODES
    }
    dag_runs = -(-repeats // len(HOPS))
    for round_ in range(dag_runs):
        for offset, mode in enumerate(DRIVER_MODES if round_ % 2 == 0 else DRIVER_MODES[::-1]):
            tasks, jobs, dag_run_s = _one_dag_run(
                {**env, "LAKEHOUSE_DRIVER": mode},
                lake,
                airflow_home,
                round_ * len(DRIVER_MODES) + offset,
                events,
            )
            for hop in HOPS:
                samples[mode]["task"][hop].append(tasks[hop])
                samples[mode]["job"][hop].append(jobs[hop])
            samples[mode]["dag_run"].append(dag_run_s)
    modes = {}
    for mode, found in samples.items():
        over = {
            hop: [
                task - job for task, job in zip(found["task"][hop], found["job"][hop], strict=True)
            ]
            for hop in HOPS
        }
        modes[mode] = {
            "dag_run_s": stats(found["dag_run"]),
            "all_hop_tasks": {
                "task_s": stats(sum(found["task"].values(), [])),
                "task_minus_spark_s": stats(sum(over.values(), [])),
                "spark_job_s": stats(sum(found["job"].values(), [])),
            },
            "hops": {
                hop: {
                    "task_s": stats(found["task"][hop]),
                    "task_minus_spark_s": stats(over[hop]),
                    "spark_job_s": stats(found["job"][hop]),
                }
                for hop in HOPS
            },
        }
    task, shared = modes["task"], modes["shared"]
    return {
        "events_per_run": events,
        "dag_runs": dag_runs,
        "modes": modes,
        "hops": shared["hops"],
        "ratio_dag_run_shared_over_task": round(
            shared["dag_run_s"]["median"] / task["dag_run_s"]["median"], 2
        ),
        "ratio_hop_tasks_shared_over_task": round(
            shared["all_hop_tasks"]["task_s"]["median"] / task["all_hop_tasks"]["task_s"]["median"],
            2,
        ),
    }


def run(repeats: int, events: int, log_dir: Path | None = None) -> dict:
    from lakehouse_platform import migrated_copy, platform_env

    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-airflow-"))
    log = (log_dir or root) / "airflow-bench.log"
    try:
        airflow_home, lake = root / "airflow", root / "lake"
        env = platform_env(
            {**os.environ, "AIRFLOW_HOME": str(airflow_home), "LAKEHOUSE_HOME": str(lake)},
            port=18180,
        )
        env.pop("LAKEHOUSE_QUALITY", None)  # the shipped suites, as users run them
        migrated_copy(env)
        result = {"parse": parse_times(env, max(repeats * 3, 5))}
        result["task_overhead"] = task_overhead(env, lake, airflow_home, repeats, events)
        result["nothing_new"] = nothing_new(env, repeats, log)  # the lake now has nothing new
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return result


def markdown(result: dict) -> str:
    parse, new, over = result["parse"], result["nothing_new"], result["task_overhead"]
    check, forced = new["check_new_data_task"], new["forced_run_once"]
    lines = [
        f"DAG file parse: {parse['file']} ({parse['dags']} DAGs) {parse['parse_ms']['median']:.0f} "
        f"ms per parse (min {parse['parse_ms']['min']:.0f}, max {parse['parse_ms']['max']:.0f}; "
        f"first, with imports: {parse['first_parse_ms']:.0f} ms); Spark imported while parsing: "
        f"{parse['spark_imported']}",
        "",
        "Nothing new (median of the runs):",
        "",
        "| | wall s | CPU-s | JVM started |",
        "|---|---:|---:|---|",
        f"| `check_new_data` task (airflow tasks test) | {check['wall_s']['median']:.1f} | "
        f"{check['cpu_s']['median']:.1f} | {'yes' if check['jvm_started'] else 'no'} |",
        f"| forced `lakehouse run` | {forced['wall_s']['median']:.1f} | "
        f"{forced['cpu_s']['median']:.1f} | {'yes' if forced['jvm_started'] else 'no'} |",
        f"| **ratio** | **{new['ratio_wall']}x** | **{new['ratio_cpu']}x** | |",
        "",
        "Inside the task, the check itself (`has_new_data`, plain file reads) takes "
        f"{new['callable_ms']['median']:.0f} ms; the rest of the task's time is "
        "Airflow's CLI and task start.",
        "",
        "Airflow hop tasks with a spark-submit each (`LAKEHOUSE_DRIVER=task`, what `auto` picks "
        "under Celery, Kubernetes or Edge) against one shared driver per DAG run (`shared`, what "
        f"`auto` picks under a local executor), {over['dag_runs']} DAG run(s) of each, "
        f"alternating, {over['events_per_run']:,} new events before each (medians, with min-max):",
        "",
        "| hop task | task s (task) | task s (shared) | Spark job s (task) | Spark job s (shared) "
        "| task minus job s (task) | task minus job s (shared) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    task, shared = over["modes"]["task"], over["modes"]["shared"]
    for hop in (*over["hops"], "all"):
        rows = (
            (task["all_hop_tasks"], shared["all_hop_tasks"])
            if hop == "all"
            else (task["hops"][hop], shared["hops"][hop])
        )
        lines.append(
            f"| {'**all hop tasks**' if hop == 'all' else hop} | "
            + " | ".join(
                spread(row[key])
                for key in ("task_s", "spark_job_s", "task_minus_spark_s")
                for row in rows
            )
            + " |"
        )
    lines += [
        "",
        "Whole stream DAG run (first task's start to last task's end, under `airflow dags test`): "
        f"{spread(task['dag_run_s'])} s with a spark-submit per task, "
        f"{spread(shared['dag_run_s'])} s with the shared driver: "
        f"**{over['ratio_dag_run_shared_over_task']}x**; the hop tasks alone "
        f"**{over['ratio_hop_tasks_shared_over_task']}x**.",
    ]
    return "\n".join(lines)
