"""Benchmark: the quality gates' share of each hop's run time, on increments of realistic size.

Runs ``--repeats`` increments of ``--events`` events each through all hops with the shipped
suites, in one process with one warm JVM (the first, cold run is left out), and reads from
each run record the hop's run time and the gate's validation time. Prints a Markdown table
with median/min/max per hop and writes ``bench/results/quality.json``.

    python -m bench.quality [--events 200000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
from pathlib import Path

from spark_jobs.cli import main

HOPS = ("bronze", "silver", "gold")


def _increment(home: Path, index: int, events: int) -> dict[str, tuple[float, float, int]]:
    run_id = f"bench-{index}"
    assert main(["generate", "ad_events", "--events", str(events), "--files", "4", "--seed", str(index),
                 "--start", f"2026-06-01T{index:02d}:00:00", "--bad-fraction", "0.01"]) == 0
    assert main(["run", "ad_events", "--run-id", run_id, "--quality=report"]) == 0
    found = {}
    for hop in HOPS:
        record = json.loads((home / "_ops/runs/ad_events" / f"{run_id}.{hop}.json").read_text())
        found[hop] = (record["duration_s"], record["quality"]["seconds"], record["quality"]["rows"])
    return found


def run(events: int, repeats: int) -> dict:
    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-quality-"))
    home = root / "lake"
    os.environ["LAKEHOUSE_HOME"] = str(home)
    os.environ.pop("LAKEHOUSE_QUALITY", None)  # the shipped suites
    try:
        _increment(home, 0, max(events // 20, 1000))  # warm-up: JVM start, GX import, table creation
        samples = [_increment(home, index, events) for index in range(1, repeats + 1)]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    table = {}
    for hop in HOPS:
        shares = [check / (run_s + check) for run_s, check, _rows in (sample[hop] for sample in samples)]
        table[hop] = {
            "rows_checked_median": statistics.median(sample[hop][2] for sample in samples),
            "run_s_median": statistics.median(sample[hop][0] for sample in samples),
            "check_s_median": statistics.median(sample[hop][1] for sample in samples),
            "share_median": statistics.median(shares), "share_min": min(shares), "share_max": max(shares),
        }
    return {"events_per_increment": events, "repeats": repeats, "machine": f"{os.cpu_count()} cores, {platform.machine()}",
            "hops": table}


def markdown(result: dict) -> str:
    lines = [f"Quality gate share of hop time, {result['events_per_increment']:,} events per increment, "
             f"median of {result['repeats']} (min-max), {result['machine']}",
             "", "| hop | rows checked | hop run s | gate s | gate share |", "|---|---:|---:|---:|---:|"]
    for hop, row in result["hops"].items():
        lines.append(f"| {hop} | {row['rows_checked_median']:,.0f} | {row['run_s_median']:.1f} | {row['check_s_median']:.1f} "
                     f"| {row['share_median']:.0%} ({row['share_min']:.0%}-{row['share_max']:.0%}) |")
    return "\n".join(lines)


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    result = run(args.events, args.repeats)
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    (out / "quality.json").write_text(json.dumps(result, indent=2))
    print(markdown(result))


if __name__ == "__main__":
    cli()
