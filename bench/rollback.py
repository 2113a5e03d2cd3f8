"""Benchmark: the time to roll back 10 batches does not grow with the table (it rewrites no data).

Builds two lakes, one with ``--scale`` times the events of the other, each with ``--batches``
bronze batches (11 by default; the smoke run makes 4) and the silver and gold batches that read
them, then rolls bronze back to batch 0
with cascade on copies of each lake, ``--repeats`` times, in one process with one warm JVM.
Prints a Markdown table with median/min/max and the big/small ratio, and writes
``bench/results/rollback.json``.

    python -m bench.rollback [--events 20000] [--scale 10] [--repeats 3] [--batches 11]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from spark_jobs.cli import main

BATCHES = 11


def _lake(root: Path, events: int, batches: int) -> Path:
    home = root / f"lake-{events}"
    os.environ["LAKEHOUSE_HOME"] = str(home)
    per_file = events // batches
    for index in range(batches):
        start = f"2026-05-01T00:{index:02d}:00"
        assert main(["generate", "ad_events", "--events", str(per_file), "--files", "1", "--seed", str(index),
                     "--start", start, "--bad-fraction", "0.01"]) == 0
    began = time.perf_counter()
    assert main(["run", "ad_events", "--max-files-per-trigger", "1", "--quality=off"]) == 0
    print(f"built {home.name}: {per_file * batches:,} events in {time.perf_counter() - began:.0f} s", flush=True)
    return home


def _rollback_once(home: Path, copy: Path) -> dict:
    shutil.copytree(home, copy)
    os.environ["LAKEHOUSE_HOME"] = str(copy)
    from spark_jobs.control import planner, rollback
    from spark_jobs.engine.restore import restore_table
    from spark_jobs.engine.session import build_session
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.plans import Request
    from spark_jobs.model.spec import get_spec

    lake = Lake.open(get_spec("ad_events"))
    began = time.perf_counter()
    plan = planner.plan(lake, Request("bronze", to_batch=0))
    planned = time.perf_counter()
    rollback.execute(lambda step: restore_table(build_session("lakehouse-bench"), step), lake, plan, progress=lambda _m: None)
    done = time.perf_counter()
    undone = {step.hop: len(step.undone) for step in plan.hops}
    shutil.rmtree(copy)
    return {"plan_s": planned - began, "execute_s": done - planned, "total_s": done - began, "undone": undone}


def _stats(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3), "max": round(max(values), 3)}


def run(events: int, scale: int, repeats: int, out: Path, batches: int = BATCHES) -> dict:
    from spark_jobs.engine.session import build_session

    build_session("lakehouse-bench")  # one warm JVM for every measurement
    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-rollback-"))
    try:
        sizes = {"small": events, "big": events * scale}
        lakes = {name: _lake(root, count, batches) for name, count in sizes.items()}
        results: dict[str, list[dict]] = {name: [] for name in sizes}
        for attempt in range(repeats):  # interleaved, so drift hits both sizes alike
            for name, home in lakes.items():
                results[name].append(_rollback_once(home, root / f"copy-{name}-{attempt}"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    summary = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "system": platform.platform()},
        "batches": batches,
        "batches_undone": results["small"][0]["undone"],
        "sizes": {name: {"events": sizes[name], **{key: _stats([r[key] for r in results[name]])
                                                    for key in ("plan_s", "execute_s", "total_s")}}
                  for name in sizes},
    }
    summary["ratio_big_over_small"] = round(summary["sizes"]["big"]["total_s"]["median"]
                                            / summary["sizes"]["small"]["total_s"]["median"], 2)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2))
    return summary


def markdown(summary: dict) -> str:
    lines = ["| lake | events | plan (no JVM) s | execute s | total s (median, min–max) |", "|---|---:|---:|---:|---:|"]
    for name, size in summary["sizes"].items():
        total = size["total_s"]
        lines.append(f"| {name} | {size['events']:,} | {size['plan_s']['median']} | {size['execute_s']['median']} | "
                     f"{total['median']} ({total['min']}–{total['max']}) |")
    lines.append(f"\nratio big/small: {summary['ratio_big_over_small']} (batches undone: {summary['batches_undone']}; "
                 f"{summary['machine']['cpus']} cores)")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="events in the small lake")
    parser.add_argument("--scale", type=int, default=10, help="the big lake has this many times more")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batches", type=int, default=BATCHES, help="bronze batches in each lake (all but one undone)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "rollback.json")
    arguments = parser.parse_args()
    print(markdown(run(arguments.events, arguments.scale, arguments.repeats, arguments.out, arguments.batches)))
