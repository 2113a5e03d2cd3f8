"""Benchmark: the time to roll back 10 batches does not grow with the table (it rewrites no data),
and the replay of a rolled-back hop's batches costs about what the original batches cost.

Builds two lakes, one with ``--scale`` times the events of the other, each with ``--batches``
bronze batches (11 by default; the smoke run makes 4) and the silver and gold batches that read
them, then rolls bronze back to batch 0 with cascade on each lake as built (restored at its own
path before each), ``--repeats`` times, in one process with one warm JVM. Prints a Markdown table
with median/min/max and the big/small ratio, and writes ``bench/results/rollback.json``. Then,
on the big lake as built, silver goes back to batch 0 alone and the next run of silver replays
its undone batches exactly as logged (one query per batch): the replay's time against the sum
of the original batches' times, and the data files the replay's commits add against those the
original batches added.

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
        assert (
            main(
                [
                    "generate",
                    "ad_events",
                    "--events",
                    str(per_file),
                    "--files",
                    "1",
                    "--seed",
                    str(index),
                    "--start",
                    start,
                    "--bad-fraction",
                    "0.01",
                ]
            )
            == 0
        )
    began = time.perf_counter()
    assert main(["run", "ad_events", "--max-files-per-trigger", "1", "--quality=off"]) == 0
    print(
        f"built {home.name}: {per_file * batches:,} events in {time.perf_counter() - began:.0f} s",
        flush=True,
    )
    return home


def _fresh(home: Path, pristine: Path) -> None:
    """``home`` as it was built (kept in ``pristine``): at its own path, since its checkpoints name
    their landing files and tables by absolute path (a lake moved elsewhere reads as files gone)."""
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(pristine, home)
    os.environ["LAKEHOUSE_HOME"] = str(home)


def _rollback_once(home: Path, pristine: Path) -> dict:
    _fresh(home, pristine)
    from spark_jobs.control.rollback import execute, planner
    from spark_jobs.control.rollback.plans import Request
    from spark_jobs.control.rollback.restore import restore_table
    from spark_jobs.engine.session import build_session
    from spark_jobs.model.lake import Lake

    lake = Lake.named("ad_events")
    began = time.perf_counter()
    plan = planner.plan(lake, Request("bronze", to_batch=0))
    planned = time.perf_counter()
    execute.execute(
        lambda step: restore_table(build_session("lakehouse-bench"), step),
        lake,
        plan,
        progress=lambda _m: None,
    )
    done = time.perf_counter()
    undone = {step.hop: len(step.undone) for step in plan.hops}
    return {
        "plan_s": planned - began,
        "execute_s": done - planned,
        "total_s": done - began,
        "undone": undone,
    }


def _replay_once(home: Path, pristine: Path) -> dict:
    """Silver back to batch 0 on ``home`` as built, then its exact replay: the times and files."""
    _fresh(home, pristine)
    from spark_jobs import service
    from spark_jobs.logs import delta_log
    from spark_jobs.logs.ops import read_records
    from spark_jobs.model.lake import Lake

    lake = Lake.named("ad_events")
    table = lake.table(lake.spec.hop("silver"))
    plan = service.rollback("ad_events", "silver", to_batch=0, progress=lambda _m: None)
    step = plan.plan.step("silver")
    assert step.replay == "exact", f"silver's replay is {step.replay}, not exact"
    originally = {
        entry["batch_id"]: entry["duration_ms"].get("triggerExecution", 0)
        for record in read_records(lake, "silver")
        for entry in record.get("progress") or []
    }
    undone = step.undone
    restored = delta_log.table_version(table)
    silver = next(each for each in step.tables if each.table == table)
    original_files = sum(
        _added(delta_log.read_commit(table, version))
        for version in range(silver.restore_to + 1, silver.version_now + 1)
    )
    began = time.perf_counter()
    record = next(
        r
        for r in service.run("ad_events", "silver", progress=lambda _m: None).records
        if r.hop == "silver"
    )
    replay_s = time.perf_counter() - began
    replay_files = sum(
        _added(delta_log.read_commit(table, version))
        for version in range(restored + 1, delta_log.table_version(table) + 1)
    )
    original_s = sum(originally[batch_id] for batch_id in undone) / 1000
    replay_batches_s = (
        sum(entry["duration_ms"].get("triggerExecution", 0) for entry in record.progress) / 1000
    )
    # The batches' own times (their triggers), then the whole run's: a query started per batch,
    # and the run's last query, which finds nothing new.
    return {
        "batches": len(undone),
        "original_batches_s": round(original_s, 3),
        "replay_batches_s": round(replay_batches_s, 3),
        "ratio": round(replay_batches_s / original_s, 2),
        "replay_run_s": round(replay_s, 3),
        "run_ratio": round(replay_s / original_s, 2),
        "original_files": original_files,
        "replay_files": replay_files,
    }


def _added(actions: tuple[dict, ...]) -> int:
    return sum(1 for action in actions if "add" in action and action["add"].get("dataChange", True))


def _stats(values: list[float]) -> dict:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def run(events: int, scale: int, repeats: int, out: Path, batches: int = BATCHES) -> dict:
    from spark_jobs.engine.session import build_session

    build_session("lakehouse-bench")  # one warm JVM for every measurement
    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-rollback-"))
    try:
        sizes = {"small": events, "big": events * scale}
        lakes = {name: _lake(root, count, batches) for name, count in sizes.items()}
        pristine = {name: home.with_name(f"{home.name}-built") for name, home in lakes.items()}
        for name, home in lakes.items():
            shutil.copytree(home, pristine[name])
        results: dict[str, list[dict]] = {name: [] for name in sizes}
        for _attempt in range(repeats):  # interleaved, so drift hits both sizes alike
            for name, home in lakes.items():
                results[name].append(_rollback_once(home, pristine[name]))
        replay = _replay_once(lakes["big"], pristine["big"])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    summary = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "system": platform.platform(),
        },
        "batches": batches,
        "batches_undone": results["small"][0]["undone"],
        "sizes": {
            name: {
                "events": sizes[name],
                **{
                    key: _stats([r[key] for r in results[name]])
                    for key in ("plan_s", "execute_s", "total_s")
                },
            }
            for name in sizes
        },
    }
    summary["replay"] = replay
    summary["ratio_big_over_small"] = round(
        summary["sizes"]["big"]["total_s"]["median"]
        / summary["sizes"]["small"]["total_s"]["median"],
        2,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2))
    return summary


def markdown(summary: dict) -> str:
    lines = [
        "| lake | events | plan (no JVM) s | execute s | total s (median, min–max) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, size in summary["sizes"].items():
        total = size["total_s"]
        lines.append(
            f"| {name} | {size['events']:,} | {size['plan_s']['median']} | "
            f"{size['execute_s']['median']} | {total['median']} ({total['min']}–{total['max']}) |"
        )
    lines.append(
        f"\nratio big/small: {summary['ratio_big_over_small']} (batches undone: "
        f"{summary['batches_undone']}; {summary['machine']['cpus']} cores)"
    )
    replay = summary.get("replay")
    if replay:
        lines.append(
            f"\nexact replay of silver's {replay['batches']} undone batches (big lake): the "
            f"batches {replay['replay_batches_s']} s against the original ones' "
            f"{replay['original_batches_s']} s, ratio {replay['ratio']}; the whole run (a query "
            f"per batch) {replay['replay_run_s']} s, ratio {replay['run_ratio']}; data files added "
            f"{replay['replay_files']} (the original batches added {replay['original_files']})"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="events in the small lake")
    parser.add_argument(
        "--scale", type=int, default=10, help="the big lake has this many times more"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--batches",
        type=int,
        default=BATCHES,
        help="bronze batches in each lake (all but one undone)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "rollback.json"
    )
    arguments = parser.parse_args()
    print(
        markdown(
            run(
                arguments.events,
                arguments.scale,
                arguments.repeats,
                arguments.out,
                arguments.batches,
            )
        )
    )
