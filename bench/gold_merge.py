"""Benchmark: what gold's recount of the windows a batch changed costs.

Gold's MERGE writes, for each window the stream's batch changed, the count of all of silver's
rows in that window as of the version the batch read (so windows a backfill wrote count in full).
Before, it wrote the stream state's count. Both ways run on the same silver table in one process,
interleaved: gold's checkpoint and table are removed before each run, which then reads silver's
files ``--max-files`` per micro-batch. The "state count" way replaces the recount with the batch
itself, as the code did before; it exists only here, to measure.

    python -m bench.gold_merge [--events 200000] [--max-files 2] [--repeats 3]
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from bench.common import spread, stats


def _gold_once(home: Path, max_files: int, recount: bool) -> float:
    from spark_jobs import service
    from spark_jobs.engine.sinks.merge import MergeSink

    shutil.rmtree(home / "tables/gold", ignore_errors=True)
    shutil.rmtree(home / "checkpoints/ad_events/gold", ignore_errors=True)
    original = MergeSink.recomputed
    if not recount:
        MergeSink.recomputed = lambda self, batch, batch_id, inputs: batch
    try:
        began = time.perf_counter()
        service.run(
            "ad_events",
            "gold",
            quality="off",
            max_files_per_trigger=max_files,
            progress=lambda line: None,
        )
        return time.perf_counter() - began
    finally:
        MergeSink.recomputed = original


def run(events: int, max_files: int, repeats: int) -> dict:
    from spark_jobs.cli import main
    from spark_jobs.engine.session import build_session

    home = Path(tempfile.mkdtemp(prefix="bench-gold-")) / "lake"
    os.environ["LAKEHOUSE_HOME"] = str(home)
    build_session("lakehouse-bench")
    assert (
        main(
            [
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
            ]
        )
        == 0
    )
    assert main(["run", "ad_events", "--hop", "bronze", "--quality=off"]) == 0
    assert (
        main(
            ["run", "ad_events", "--hop", "silver", "--quality=off", "--max-files-per-trigger", "1"]
        )
        == 0
    )
    times: dict[str, list[float]] = {"recount": [], "state": []}
    for _ in range(repeats):
        times["state"].append(_gold_once(home, max_files, recount=False))
        times["recount"].append(_gold_once(home, max_files, recount=True))
    shutil.rmtree(home.parent, ignore_errors=True)
    summary = {way: stats(values) for way, values in times.items()}
    return {
        "events": events,
        "max_files_per_trigger": max_files,
        "seconds": summary,
        "ratio": round(summary["recount"]["median"] / summary["state"]["median"], 2),
    }


def markdown(result: dict) -> str:
    seconds = result["seconds"]
    return (
        f"Gold hop over {result['events']:,} events (silver read {result['max_files_per_trigger']} "
        "files per batch), seconds, median (min-max):\n\n| way | s |\n|---|---:|\n"
        f"| recount from silver (now) | {spread(seconds['recount'])} |\n"
        f"| state count (before) | {spread(seconds['state'])} |\n"
        f"\n**Ratio {result['ratio']}** (recount / state count)."
    )


if __name__ == "__main__":
    import argparse
    import json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--max-files", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    print(json.dumps(run(options.events, options.max_files, options.repeats), indent=2))
