"""Benchmark: ``local[2]`` against ``make run-cluster``'s standalone cluster (a master and two
workers of one core each, include/scripts/spark_cluster.py) on this machine.

Each way runs all three hops once over the same landing files into an empty local lake, as one
``lakehouse run`` driver process (its JVM start included, as every Airflow task pays it), the two
ways interleaved after one warm-up run of each. On one 2-core machine the cluster has the same
cores as ``local[2]`` plus a JVM per executor: the figure is the standalone scheduler's and the
executors' overhead, not a cluster's gain (the S3 lake against the local one is ``bench/s3.py``'s).
Wall seconds only: the executors are the workers' children, so a meter of the driver's process tree
would miss their CPU.

    python -m bench.cluster [--events 200000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, lakehouse_command, link_landing, spread, stats

sys.path.insert(0, str(ROOT / "include" / "scripts"))


def _run_all(home: Path, landing: Path, env: dict[str, str]) -> tuple[float, int]:
    """Seconds of one ``lakehouse run`` of every hop into an empty lake with ``landing``'s
    files; bronze's rows.
    """
    shutil.rmtree(home, ignore_errors=True)
    link_landing(landing, home)
    began = time.perf_counter()
    done = subprocess.run(
        lakehouse_command("run", "ad_events", "--quality=off", "--json"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**env, "LAKEHOUSE_HOME": str(home)},
        check=False,
    )
    took = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(
            f"lakehouse run on {env.get('LAKEHOUSE_SPARK_MASTER', 'local[2]')} exited "
            f"{done.returncode}: {done.stderr[-2000:]}"
        )
    return took, json.loads(done.stdout)["hops"][0]["rows_out"]


def run(events: int, repeats: int, warm_up: bool = True) -> dict:
    from spark_cluster import SparkCluster

    work = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    base = {
        key: value for key, value in os.environ.items() if not key.startswith("LAKEHOUSE_SPARK_")
    }
    cluster = SparkCluster(work / "spark")
    cluster.start()
    try:
        landing = work / "source"
        subprocess.run(
            lakehouse_command(
                "generate",
                "ad_events",
                "--events",
                str(events),
                "--files",
                "8",
                "--seed",
                "5",
                "--start",
                "2026-05-01T00:00:00",
            ),
            cwd=ROOT,
            check=True,
            env={**base, "LAKEHOUSE_HOME": str(landing)},
            stdout=subprocess.DEVNULL,
        )
        ways = {
            "local[2]": base,
            "cluster": {
                **base,
                **{
                    key: value
                    for key, value in cluster.env().items()
                    if key.startswith("LAKEHOUSE_SPARK_")
                },
            },
        }
        seconds: dict[str, list[float]] = {way: [] for way in ways}
        rows: dict[str, int] = {}
        # a first run of each way warms the page cache and the workers
        for attempt in range(repeats + warm_up):
            for way, env in ways.items():
                took, rows[way] = _run_all(work / "lake", landing, env)
                if attempt or not warm_up:
                    seconds[way].append(took)
        assert rows["local[2]"] == rows["cluster"], f"the two ways wrote different rows: {rows}"
        applications = len(cluster.applications())
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    summary = {way: stats(values) for way, values in seconds.items()}
    return {
        "events": events,
        "bronze_rows": rows["local[2]"],
        "seconds": summary,
        "cluster_applications": applications,
        "records_per_s": {way: round(events / summary[way]["median"]) for way in summary},
        "cluster_over_local": round(
            summary["local[2]"]["median"] / summary["cluster"]["median"], 2
        ),
    }


def markdown(result: dict) -> str:
    lines = [
        f"All three hops run once over {result['events']:,} events into an empty local lake, one "
        "`lakehouse run` driver each (JVM start included), `local[2]` and the 2-worker cluster "
        f"interleaved, median of {result['seconds']['local[2]']['n']} (min-max)",
        "",
        "| Spark | seconds | records/s |",
        "|---|---:|---:|",
    ]
    for way in ("local[2]", "cluster"):
        lines.append(
            f"| {way} | {spread(result['seconds'][way])} | {result['records_per_s'][way]:,} |"
        )
    lines.append(
        f"\ncluster / local[2] throughput: **{result['cluster_over_local']}** (the same 2 cores; "
        f"{result['cluster_applications']} applications ran on the workers)"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    arguments = parser.parse_args()
    print(markdown(run(arguments.events, arguments.repeats)))
