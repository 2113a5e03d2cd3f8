"""Benchmark: what writing the event log costs a warm three-hop run.

Runs ``--repeats`` increments of ``--events`` events through all hops with ``lakehouse run`` in one
process (one warm JVM; the first, cold run is left out). Each run ends with the event log's sync
(:func:`spark_jobs.service.history.sync_events`, called by the command itself); the benchmark
times that call inside the same run, so the share is measured side by side with the run it
belongs to. Then it reads the whole log the way ``lakehouse events`` does. Prints a Markdown table
and writes ``bench/results/event_log.json``.

    python -m bench.event_log [--events 480] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, write_json
from spark_jobs.cli import main


def _quiet(argv: list[str]) -> None:
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv)
    assert code == 0, argv


def run(events: int, repeats: int) -> dict:
    from spark_jobs.logs.event_log import read
    from spark_jobs.service import history

    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-events-"))
    os.environ["LAKEHOUSE_HOME"] = str(root / "lake")
    os.environ["LAKEHOUSE_PIPELINES"] = str(ROOT / "examples")
    synced: list[tuple[float, int]] = []
    original = history.sync_events

    def timed(lake) -> int:  # the command's own sync, timed where it runs
        began = time.perf_counter()
        appended = original(lake)
        synced.append((time.perf_counter() - began, appended))
        return appended

    history.sync_events = timed
    samples = []
    try:
        for index in range(repeats + 1):
            _quiet(
                [
                    "generate",
                    "ad_events",
                    "--events",
                    str(events),
                    "--seed",
                    str(index),
                    "--start",
                    f"2026-06-01T{index:02d}:00:00",
                ]
            )
            began = time.perf_counter()
            _quiet(["run", "ad_events", "--run-id", f"bench-{index}"])
            run_s = time.perf_counter() - began
            sync_s, appended = synced[-1]
            if index:  # the first run starts the JVM and creates the tables
                samples.append({"run_s": run_s, "sync_s": sync_s, "appended": appended})
        began = time.perf_counter()
        logged = len(read(str(root / "lake" / "_ops" / "events")))
        read_s = time.perf_counter() - began
        files = len(list((root / "lake" / "_ops" / "events").rglob("*.parquet")))
    finally:
        history.sync_events = original
        shutil.rmtree(root, ignore_errors=True)
    shares = [sample["sync_s"] / sample["run_s"] for sample in samples]
    return {
        "events_per_increment": events,
        "repeats": repeats,
        "runs": samples,
        "run_s_median": statistics.median(sample["run_s"] for sample in samples),
        "sync_s_median": statistics.median(sample["sync_s"] for sample in samples),
        "share_median": statistics.median(shares),
        "share_min": min(shares),
        "share_max": max(shares),
        "appended_median": statistics.median(sample["appended"] for sample in samples),
        "events_logged": logged,
        "table_files": files,
        "read_s": read_s,
    }


def markdown(result: dict) -> str:
    return "\n".join(
        [
            f"The event log's share of a warm three-hop run: {result['events_per_increment']:,} "
            f"events per increment, median of {result['repeats']} runs (min-max); the sync timed "
            "inside the run it belongs to",
            "",
            "| run s | event log sync s | share | events appended per run |",
            "|---:|---:|---:|---:|",
            f"| {result['run_s_median']:.2f} | {result['sync_s_median']:.3f} | "
            f"{result['share_median']:.1%} ({result['share_min']:.1%}-{result['share_max']:.1%}) "
            f"| {result['appended_median']:.0f} |",
            "",
            f"Reading the whole log ({result['events_logged']} events in "
            f"{result['table_files']} files, as `lakehouse events` does): "
            f"{result['read_s'] * 1000:.0f} ms.",
        ]
    )


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=480)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    result = run(args.events, args.repeats)
    write_json("event_log.json", result)
    print(markdown(result))


if __name__ == "__main__":
    cli()
