"""Benchmarks through real Airflow: DAG parse time, the nothing-new task, and the task
overhead around a Spark job.

- **Parse**: the DAG file loaded by ``DagBag`` ``repeats`` times in one process (the first
  load pays the imports; the median is what the DAG processor pays per re-parse).
- **Nothing new**: ``airflow tasks test ad_events__stream check_new_data`` on a lake with
  nothing new, against a forced ``lakehouse run ad_events`` on the same lake, both under
  :mod:`bench.meter` (wall, CPU-seconds of every process, and whether a JVM ran).
- **Task overhead**: ``airflow dags test ad_events__stream`` with new data each time; for each
  hop task, the task instance's duration in the metadata DB minus the Spark job's time in
  the hop's run record (the hop plus its quality check): spark-submit, JVM start and
  Airflow's own task start and end. Each DAG run has three hop tasks, so ``repeats`` samples
  take ``ceil(repeats / 3)`` DAG runs; the summary is over every hop task.
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
    done = subprocess.run([str(Path(sys.executable).parent / "airflow"), *args], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"airflow {' '.join(args)} exited {done.returncode}: {(done.stdout + done.stderr)[-1500:]}")
    return done


def parse_times(env: dict, repeats: int) -> dict:
    dag_file = ROOT / "dags" / "lakehouse_pipelines.py"
    done = subprocess.run([sys.executable, "-c", PARSE_PROBE, str(repeats + 1), str(dag_file)], env=env,
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"the DAG parse probe failed: {done.stderr[-1500:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {"file": dag_file.name, "dags": found["dags"], "first_parse_ms": round(found["parse_s"][0] * 1000, 1),
            "parse_ms": stats([value * 1000 for value in found["parse_s"][1:]], 1),
            "spark_imported": found["jvm"]}


def nothing_new(env: dict, repeats: int, log: Path) -> dict:
    check, forced = [], []
    for _ in range(repeats):
        check.append(metered([str(Path(sys.executable).parent / "airflow"), "tasks", "test", "ad_events__stream",
                              "check_new_data", "2026-03-04"], env, log=log))
        forced.append(metered(lakehouse_command("run", "ad_events", "--run-id", "forced"), env, log=log))
    summary = {name: {"wall_s": stats([r["wall_s"] for r in runs]), "cpu_s": stats([r["cpu_s"] for r in runs]),
                      "jvm_started": any("java" in r["processes"] for r in runs)}
               for name, runs in (("check_new_data_task", check), ("forced_run_once", forced))}
    probe = ("import json, time; began = time.perf_counter(); from lakehouse_airflow.checks import has_new_data; "
             "imported = time.perf_counter(); found = has_new_data('ad_events'); "
             "print(json.dumps({'import_s': imported - began, 'check_s': time.perf_counter() - imported, 'new': found}))")
    calls = [json.loads(subprocess.run([sys.executable, "-c", probe], env={**env, "PYTHONPATH": str(ROOT / "plugins")},
                                       cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
             for _ in range(repeats)]
    if any(call["new"] for call in calls):
        raise RuntimeError("the nothing-new benchmark found new data: its lake is not caught up")
    summary["callable_ms"] = stats([call["check_s"] * 1000 for call in calls], 1)
    summary["ratio_wall"] = round(summary["forced_run_once"]["wall_s"]["median"]
                                  / summary["check_new_data_task"]["wall_s"]["median"], 1)
    summary["ratio_cpu"] = round(summary["forced_run_once"]["cpu_s"]["median"]
                                 / summary["check_new_data_task"]["cpu_s"]["median"], 1)
    return summary


def task_overhead(env: dict, lake: Path, airflow_home: Path, repeats: int, events: int) -> dict:
    overheads: dict[str, list[float]] = {hop: [] for hop in HOPS}
    spark_s: dict[str, list[float]] = {hop: [] for hop in HOPS}
    dag_runs = -(-repeats // len(HOPS))
    for index in range(dag_runs):
        subprocess.run(lakehouse_command("generate", "ad_events", "--events", str(events), "--seed", str(20 + index),
                                         "--start", f"2026-03-0{index + 1}T08:00:00"),
                       env=env, cwd=ROOT, check=True, capture_output=True)
        day = f"2026-04-{index + 1:02d}"
        _airflow(env, "dags", "test", "ad_events__stream", day)
        with sqlite3.connect(airflow_home / "airflow.db") as db:
            run_id = db.execute("SELECT run_id FROM dag_run WHERE dag_id = 'ad_events__stream' "
                                "ORDER BY id DESC LIMIT 1").fetchone()[0]
            durations = dict(db.execute("SELECT task_id, duration FROM task_instance WHERE dag_id = 'ad_events__stream' "
                                        "AND run_id = ?", (run_id,)).fetchall())
        for hop in HOPS:
            record = json.loads((lake / "_ops/runs/ad_events" / f"{run_id}.{hop}.json").read_text())
            job = record["duration_s"] + ((record.get("quality") or {}).get("seconds") or 0.0)
            spark_s[hop].append(job)
            overheads[hop].append(durations[hop] - job)
    return {"events_per_run": events, "dag_runs": dag_runs,
            "all_hop_tasks": {"task_minus_spark_s": stats(sum(overheads.values(), [])),
                              "spark_job_s": stats(sum(spark_s.values(), []))},
            "hops": {hop: {"task_minus_spark_s": stats(overheads[hop]), "spark_job_s": stats(spark_s[hop])}
                     for hop in HOPS}}


def run(repeats: int, events: int, log_dir: Path | None = None) -> dict:
    from lakehouse_platform import migrate, platform_env

    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-airflow-"))
    log = (log_dir or root) / "airflow-bench.log"
    try:
        airflow_home, lake = root / "airflow", root / "lake"
        env = platform_env({**os.environ, "AIRFLOW_HOME": str(airflow_home), "LAKEHOUSE_HOME": str(lake)}, port=18180)
        env.pop("LAKEHOUSE_QUALITY", None)  # the shipped suites, as users run them
        migrate(env)
        result = {"parse": parse_times(env, max(repeats * 3, 5))}
        result["task_overhead"] = task_overhead(env, lake, airflow_home, repeats, events)
        result["nothing_new"] = nothing_new(env, repeats, log)  # the lake now has nothing new
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return result


def markdown(result: dict) -> str:
    parse, new, over = result["parse"], result["nothing_new"], result["task_overhead"]
    check, forced = new["check_new_data_task"], new["forced_run_once"]
    lines = [f"DAG file parse: {parse['file']} ({parse['dags']} DAGs) {parse['parse_ms']['median']:.0f} ms per parse "
             f"(min {parse['parse_ms']['min']:.0f}, max {parse['parse_ms']['max']:.0f}; first, with imports: "
             f"{parse['first_parse_ms']:.0f} ms); Spark imported while parsing: {parse['spark_imported']}", "",
             "Nothing new (median of the runs):", "", "| | wall s | CPU-s | JVM started |", "|---|---:|---:|---|",
             f"| `check_new_data` task (airflow tasks test) | {check['wall_s']['median']:.1f} | {check['cpu_s']['median']:.1f} "
             f"| {'yes' if check['jvm_started'] else 'no'} |",
             f"| forced `lakehouse run` | {forced['wall_s']['median']:.1f} | {forced['cpu_s']['median']:.1f} "
             f"| {'yes' if forced['jvm_started'] else 'no'} |",
             f"| **ratio** | **{new['ratio_wall']}x** | **{new['ratio_cpu']}x** | |", "",
             f"Inside the task, the check itself (`has_new_data`, plain file reads) takes {new['callable_ms']['median']:.0f} ms; "
             "the rest of the task's time is Airflow's CLI and task start.", "",
             f"Airflow task overhead around the Spark job ({over['dag_runs']} DAG run(s), {over['events_per_run']:,} "
             "new events each):", "", "| hop task | Spark job s | task minus Spark job s |", "|---|---:|---:|"]
    for hop, row in (*over["hops"].items(), ("**all hop tasks**", over["all_hop_tasks"])):
        lines.append(f"| {hop} | {spread(row['spark_job_s'])} | {spread(row['task_minus_spark_s'])} |")
    return "\n".join(lines)
