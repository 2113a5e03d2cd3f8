"""Benchmark: the quality gates' share of each hop's run time, on increments of realistic size.

Runs ``--repeats`` increments of ``--events`` events each through all hops with the shipped
suites, in one process with one warm JVM (the first, cold run is left out), and reads from
each run record the hop's run time and the gate's validation time (the one pass). Beside it,
on the same increment, the gate as it was before the one pass: every rule through Great
Expectations, then its Data Docs page; the two results must be equal (ids and load times
aside). And the cost of importing GX in a fresh interpreter, which every hop task paid before.
Prints a Markdown table with median/min/max per hop and writes ``bench/results/quality.json``.

    python -m bench.quality [--events 200000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import write_json
from spark_jobs.cli import main

HOPS = ("bronze", "silver", "gold")


def _increment(
    home: Path, index: int, events: int, before: bool = True
) -> dict[str, tuple[float, float, int, float]]:
    run_id = f"bench-{index}"
    assert (
        main(
            [
                "generate",
                "ad_events",
                "--events",
                str(events),
                "--files",
                "4",
                "--seed",
                str(index),
                "--start",
                f"2026-06-01T{index:02d}:00:00",
                "--bad-fraction",
                "0.01",
            ]
        )
        == 0
    )
    assert main(["run", "ad_events", "--run-id", run_id, "--quality=report"]) == 0
    found = {}
    for hop in HOPS:
        record = json.loads((home / "_ops/runs/ad_events" / f"{run_id}.{hop}.json").read_text())
        found[hop] = (
            record["duration_s"],
            record["quality"]["seconds"],
            record["quality"]["rows"],
            _gate_before(home, record) if before else 0.0,
        )
    return found


def _gate_before(home: Path, record: dict) -> float:
    """Seconds of the gate as it was before the one pass, on the same increment: the increment
    cached and counted, every rule through GX, the Data Docs page rendered. Asserts that GX's
    result equals the one the one-pass gate wrote."""
    from great_expectations.render.renderer import ValidationResultsPageRenderer
    from great_expectations.render.view import DefaultJinjaPageView

    from spark_jobs.control.suites import load_suite
    from spark_jobs.engine import quality
    from spark_jobs.engine.expectations import without_run_identity
    from spark_jobs.engine.session import build_session
    from spark_jobs.pipelines import pipeline_code
    from spark_jobs.service import open_lake

    lake = open_lake("ad_events")
    hop = lake.spec.hop(record["hop"])
    change = record["tables"][lake.table(hop)]
    spark = build_session("lakehouse-ad_events-run", lake.spec.shuffle_partitions)
    began = time.time()
    frame = quality.increment(
        spark, lake.table(hop), change["version_before"], change["version_after"], tuple(hop.keys)
    )
    frame = pipeline_code(lake.spec).quality_frame(hop, frame).persist()
    frame.count()
    result = quality.gx_validation(frame, load_suite(lake.spec, hop))
    DefaultJinjaPageView().render(ValidationResultsPageRenderer().render(result))
    frame.unpersist()
    seconds = time.time() - began
    ours = json.loads(
        (home / "_ops/quality/ad_events" / f"{record['run_id']}.{hop.name}.result.json").read_text()
    )
    assert without_run_identity(result.to_json_dict()) == without_run_identity(ours), (
        f"{hop.name}: results differ"
    )
    return seconds


def _gx_import_seconds() -> float:
    """Seconds to import Great Expectations in a fresh interpreter (each hop task
    paid it before).
    """
    code = "import time; t = time.time(); import great_expectations; print(time.time() - t)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, GX_ANALYTICS_ENABLED="false"),
    )
    return float(done.stdout.strip().splitlines()[-1])


def run(events: int, repeats: int) -> dict:
    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-quality-"))
    home = root / "lake"
    os.environ["LAKEHOUSE_HOME"] = str(home)
    os.environ.pop("LAKEHOUSE_QUALITY", None)  # the shipped suites
    try:
        warm_up = max(events // 20, 1000)
        _increment(home, 0, warm_up, before=False)  # warm-up: JVM start, table creation
        # did a gate (or anything before) import GX?
        gx_in_gates = "great_expectations" in sys.modules
        _increment(home, 1, warm_up)  # warm-up of the gate before: GX's import and first validation
        samples = [_increment(home, index, events) for index in range(2, repeats + 2)]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    table = {}
    for hop in HOPS:
        rows = [sample[hop] for sample in samples]
        shares = [check / (run_s + check) for run_s, check, _rows, _before in rows]
        before = [old / (run_s + old) for run_s, _check, _rows, old in rows]
        table[hop] = {
            "rows_checked_median": statistics.median(row[2] for row in rows),
            "run_s_median": statistics.median(row[0] for row in rows),
            "check_s_median": statistics.median(row[1] for row in rows),
            "share_median": statistics.median(shares),
            "share_min": min(shares),
            "share_max": max(shares),
            "before_s_median": statistics.median(row[3] for row in rows),
            "before_share_median": statistics.median(before),
            "before_share_min": min(before),
            "before_share_max": max(before),
        }
    return {
        "events_per_increment": events,
        "repeats": repeats,
        "machine": f"{os.cpu_count()} cores, {platform.machine()}",
        "hops": table,
        "gx_import_s": round(_gx_import_seconds(), 2),
        "gx_imported_by_gates": gx_in_gates,
    }


def markdown(result: dict) -> str:
    lines = [
        f"Quality gate share of hop time, {result['events_per_increment']:,} events per increment, "
        f"median of {result['repeats']} (min-max), {result['machine']}; the gate in one pass "
        "beside the gate before it (every rule through GX, then its Data Docs page), "
        "on the same increments",
        "",
        "| hop | rows checked | hop run s | gate s | gate share | before: gate s | before: share |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for hop, row in result["hops"].items():
        lines.append(
            f"| {hop} | {row['rows_checked_median']:,.0f} | {row['run_s_median']:.1f} | "
            f"{row['check_s_median']:.2f} | {row['share_median']:.0%} "
            f"({row['share_min']:.0%}-{row['share_max']:.0%}) | {row['before_s_median']:.2f} | "
            f"{row['before_share_median']:.0%} "
            f"({row['before_share_min']:.0%}-{row['before_share_max']:.0%}) |"
        )
    lines.append(
        f"\nImporting Great Expectations: {result['gx_import_s']} s in a fresh interpreter, paid "
        "by every hop task before; now only by a suite with a rule the one pass does not evaluate, "
        "and by the first view of a Data Docs page."
    )
    return "\n".join(lines)


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    result = run(args.events, args.repeats)
    write_json("quality.json", result)
    print(markdown(result))


if __name__ == "__main__":
    cli()
