"""The benchmark suite: ``python -m bench`` (``make bench``; ``make bench-smoke`` in CI).

Runs, in order: throughput (run vs plain PySpark vs backfill), the shop pipeline's run against its
backfill, one file of half a million lines, the quality gates' share, the event log's share,
rollback at two table sizes,
gold's recount, the S3 lake against the local lake, ingest from a Kafka topic against a plain
Structured Streaming script, a change feed applied by the changes hop against a plain MERGE script,
the soak (in this process, one warm JVM), then a 2-worker standalone cluster against local[2],
Airflow's parse time, task overhead and nothing-new task, a nothing-new stream DAG run through
``make run``'s scheduler, and last the cost of always-on against run-once and the busy fraction
(subprocesses under :mod:`bench.meter`). Writes ``bench/results/latest.json``, ``latest.md`` and PNG
charts, and prints the Markdown. Every size is a flag; ``--smoke`` makes all of them tiny and skips
the warm-up runs (its figures mean nothing).

    python -m bench [--only throughput,cost,...] [--smoke] [--events 2000000] ...
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time

from bench import (
    airflow_overhead,
    big_file,
    busy,
    changes,
    charts,
    cluster,
    cost,
    csv_files,
    event_log,
    gold_merge,
    idle,
    kafka,
    maintenance,
    month,
    quality,
    rollback,
    s3,
    scheduled,
    shop,
    soak,
    throughput,
)
from bench.common import RESULTS, machine, write_json

RUNS = RESULTS.parent / "runs"  # one JSON file per full run, kept in the repository

PARTS = (
    "throughput",
    "shop",
    "big_file",
    "quality",
    "event_log",
    "rollback",
    "gold_merge",
    "s3",
    "kafka",
    "changes",
    "csv",
    "maintenance",
    "month",
    "soak",
    "cluster",
    "airflow",
    "scheduled",
    "idle",
    "cost",
    "cost_kafka",
    "busy",
)
SMOKE = {
    "events": 5_000,
    "repeats": 1,
    "quality_events": 2_000,
    "event_log_events": 200,
    "rollback_events": 500,
    "rollback_batches": 4,
    "airflow_events": 500,
    "rate": 5,
    "duration": 30.0,
    "interval": 30.0,
    "soak_steps": 8,
    "soak_shop_steps": 3,
    "soak_kafka_steps": 3,
    "soak_changes_steps": 3,
    "soak_late_steps": 3,
    "soak_shop_late_steps": 3,
    "gold_events": 2_000,
    "big_file_lines": 10_000,
    "busy_minutes": 0.25,
    "idle_minutes": 0.5,
    "s3_events": 2_000,
    "cluster_events": 2_000,
    "shop_orders": 2_000,
    "kafka_events": 2_000,
    "changes": 2_000,
    "change_keys": 200,
    "csv_rows": 5_000,
    "maintenance_days": 1,
    "maintenance_rows": 50,
    "month_days": 3,
    "month_runs": 2,
    "month_events": 40,
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", default=",".join(PARTS), help=f"comma-separated parts of {', '.join(PARTS)}"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes: checks the suite runs end to end (CI)"
    )
    parser.add_argument(
        "--events", type=int, default=2_000_000, help="throughput: events in the landing files"
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure (median, min, max)")
    parser.add_argument(
        "--quality-events", type=int, default=200_000, help="quality: events per increment"
    )
    parser.add_argument(
        "--event-log-events", type=int, default=480, help="event_log: events per increment"
    )
    parser.add_argument(
        "--rollback-events", type=int, default=20_000, help="rollback: events in the small lake"
    )
    parser.add_argument(
        "--rollback-batches",
        type=int,
        default=rollback.BATCHES,
        help="rollback: bronze batches in each lake, all but the first undone",
    )
    parser.add_argument(
        "--airflow-events", type=int, default=20_000, help="airflow: new events per DAG run"
    )
    parser.add_argument(
        "--gold-events", type=int, default=200_000, help="gold_merge: events in the lake"
    )
    parser.add_argument("--s3-events", type=int, default=200_000, help="s3: events in each lake")
    parser.add_argument(
        "--cluster-events", type=int, default=200_000, help="cluster: events in the lake"
    )
    parser.add_argument(
        "--kafka-events", type=int, default=1_000_000, help="kafka: events produced to the topic"
    )
    parser.add_argument(
        "--changes", type=int, default=1_000_000, help="changes: change events in the feed"
    )
    parser.add_argument(
        "--change-keys", type=int, default=100_000, help="changes: keys the feed changes"
    )
    parser.add_argument(
        "--change-longer",
        type=int,
        default=10,
        help="changes: the second feed, for the incremental batch, is this many times longer",
    )
    parser.add_argument(
        "--csv-rows", type=int, default=1_000_000, help="csv: rows in the CSV files"
    )
    parser.add_argument(
        "--maintenance-days",
        type=int,
        default=10,
        help="maintenance: days of 30-minute appends (48 a day) before maintenance",
    )
    parser.add_argument(
        "--maintenance-rows", type=int, default=500, help="maintenance: rows per append"
    )
    parser.add_argument(
        "--month-days", type=int, default=12, help="month: simulated days of runs and maintenance"
    )
    parser.add_argument(
        "--month-runs", type=int, default=4, help="month: run-once runs a simulated day"
    )
    parser.add_argument(
        "--month-events", type=int, default=200, help="month: events landed before each run"
    )
    parser.add_argument(
        "--shop-orders", type=int, default=200_000, help="shop: orders in the landing files"
    )
    parser.add_argument(
        "--big-file-lines", type=int, default=500_000, help="big_file: lines in the one file"
    )
    parser.add_argument(
        "--soak-steps", type=int, default=500, help="soak: random model steps in all"
    )
    parser.add_argument(
        "--soak-sequence", type=int, default=50, help="soak: steps per sequence (a fresh lake each)"
    )
    parser.add_argument(
        "--soak-seed", type=int, default=1000, help="soak: the first sequence's seed"
    )
    parser.add_argument(
        "--soak-shop-steps",
        type=int,
        default=100,
        help="soak: random steps of the shop pipeline's model after ad_events'",
    )
    parser.add_argument(
        "--soak-kafka-steps",
        type=int,
        default=200,
        help="soak: random steps of the model's Kafka variant after shop's",
    )
    parser.add_argument(
        "--soak-changes-steps",
        type=int,
        default=200,
        help="soak: random steps of the crm example's change feed after the Kafka variant's",
    )
    parser.add_argument(
        "--soak-late-steps",
        type=int,
        default=300,
        help="soak: random steps with events beyond the allowed lateness after crm's",
    )
    parser.add_argument(
        "--soak-shop-late-steps",
        type=int,
        default=100,
        help="soak: random steps of shop's model with late events against its twin, last",
    )
    parser.add_argument("--rate", type=int, default=200, help="cost: arrival rate, events/s")
    parser.add_argument("--duration", type=float, default=1200.0, help="cost: seconds of arrivals")
    parser.add_argument(
        "--interval", type=float, default=300.0, help="cost: seconds between run-once jobs"
    )
    parser.add_argument(
        "--busy-minutes",
        type=float,
        default=30.0,
        help="busy: minutes of make run's platform, then as many of always-on streaming",
    )
    parser.add_argument(
        "--idle-minutes",
        type=float,
        default=10.0,
        help="idle: minutes of each window (on arrival, on a schedule, always-on)",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        for key, value in SMOKE.items():
            setattr(args, key, value)
    args.only = [part.strip() for part in args.only.split(",") if part.strip()]
    unknown = sorted(set(args.only) - set(PARTS))
    if unknown:
        parser.error(f"unknown part {', '.join(unknown)}: choose from {', '.join(PARTS)}")
    if (
        min(
            args.events,
            args.repeats,
            args.rate,
            args.quality_events,
            args.rollback_events,
            args.airflow_events,
        )
        < 1
        or args.duration <= 0
        or args.interval <= 0
    ):
        parser.error("sizes, repeats, rate, duration and interval must be positive")
    return args


def _step(name: str) -> None:
    print(f"== {name} ({dt.datetime.now().strftime('%H:%M:%S')})", file=sys.stderr, flush=True)


def _alone(args: argparse.Namespace, result: dict) -> None:
    """The benchmarks of subprocesses and servers, with this process's Spark stopped first."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()  # the subprocess benchmarks below get the machine to themselves
    if "cluster" in args.only:
        _step(
            f"cluster: local[2] against a 2-worker standalone cluster, {args.cluster_events:,} "
            f"events x {args.repeats}"
        )
        result["cluster"] = cluster.run(args.cluster_events, args.repeats, warm_up=not args.smoke)
    if "airflow" in args.only:
        _step(f"airflow: parse, task overhead and nothing new x {args.repeats}")
        result["airflow"] = airflow_overhead.run(args.repeats, args.airflow_events, RESULTS)
    if "scheduled" in args.only:
        minutes = 1 if args.smoke else max(args.repeats, 3)
        _step(
            "scheduled: nothing-new stream DAG runs through make run's "
            f"scheduler, {minutes} minutes"
        )
        result["scheduled"] = scheduled.run(
            minutes, RESULTS, *((10.0, False) if args.smoke else ())
        )  # smoke: the launcher's settings only, 10 s idle
    if "idle" in args.only:
        _step(f"idle: CPU per hour while nothing arrives, {args.idle_minutes:g}-minute windows")
        result["idle"] = idle.run(args.idle_minutes * 60, RESULTS)
    if "cost" in args.only:
        _step(
            f"cost: {args.rate} events/s for {args.duration:g} s, run-once "
            f"every {args.interval:g} s"
        )
        result["cost"] = cost.run(args.rate, args.duration, args.interval, log_dir=RESULTS)
    if "cost_kafka" in args.only:
        _step(
            f"cost on a topic: {args.rate} events/s for {args.duration:g} s, run-once "
            f"every {args.interval:g} s"
        )
        result["cost_kafka"] = cost.run(
            args.rate, args.duration, args.interval, log_dir=RESULTS, source="kafka"
        )
    if "busy" in args.only:
        _step(f"busy: make run's platform, then always-on, {args.busy_minutes:g} min each")
        result["busy"] = busy.run(args.busy_minutes, RESULTS)


def run(args: argparse.Namespace) -> dict:
    began = time.time()
    RESULTS.mkdir(parents=True, exist_ok=True)
    result: dict = {
        "machine": machine(),
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "smoke": args.smoke,
        "parameters": {key: value for key, value in vars(args).items() if key != "only"},
    }
    if "throughput" in args.only:
        _step(f"throughput: {args.events:,} events x 3 ways x {args.repeats}")
        result["throughput"] = throughput.run(args.events, args.repeats, warm_up=not args.smoke)
    if "shop" in args.only:
        _step(
            f"shop: {args.shop_orders:,} orders, run, a plain PySpark script and "
            f"backfill x {args.repeats}"
        )
        result["shop"] = shop.run(args.shop_orders, args.repeats, warm_up=not args.smoke)
    if "big_file" in args.only:
        _step(f"big file: {args.big_file_lines:,} lines in one file")
        result["big_file"] = big_file.run(args.big_file_lines)
    if "quality" in args.only:
        _step(f"quality share: {args.quality_events:,} events x {args.repeats}")
        result["quality"] = quality.run(args.quality_events, args.repeats)
    if "event_log" in args.only:
        _step(f"event log share: {args.event_log_events:,} events x {args.repeats + 2}")
        result["event_log"] = event_log.run(args.event_log_events, args.repeats + 2)
    if "rollback" in args.only:
        _step(
            f"rollback: {args.rollback_events:,} and 10x events in {args.rollback_batches} "
            f"batches x {args.repeats}"
        )
        result["rollback"] = rollback.run(
            args.rollback_events, 10, args.repeats, RESULTS / "rollback.json", args.rollback_batches
        )
    _comparisons(args, result)
    _alone(args, result)
    result["duration_s"] = round(time.time() - began, 1)
    return result


def _comparisons(args: argparse.Namespace, result: dict) -> None:
    """The in-process parts after rollback: gold's recount, S3, Kafka, a change feed, the soak."""
    if "gold_merge" in args.only:
        _step(
            f"gold merge: recount against state count, {args.gold_events:,} events x {args.repeats}"
        )
        result["gold_merge"] = gold_merge.run(args.gold_events, 2, args.repeats)
    if "s3" in args.only:
        _step(f"s3: the S3 lake against the local lake, {args.s3_events:,} events x {args.repeats}")
        result["s3"] = s3.run(args.s3_events, args.repeats)
    if "kafka" in args.only:
        _step(
            f"kafka: ingest of {args.kafka_events:,} events from a topic, run-once hop and a plain "
            f"script x {args.repeats}"
        )
        result["kafka"] = kafka.run(args.kafka_events, args.repeats, warm_up=not args.smoke)
    if "changes" in args.only:
        _step(
            f"changes: {args.changes:,} changes over {args.change_keys:,} keys, the changes hop "
            f"and a plain MERGE script x {args.repeats}"
        )
        result["changes"] = changes.run(
            args.changes,
            args.change_keys,
            args.repeats,
            warm_up=not args.smoke,
            longer=args.change_longer,
        )
    if "csv" in args.only:
        _step(
            f"csv: {args.csv_rows:,} CSV rows, the format: csv hop and Spark's csv "
            f"source x {args.repeats}"
        )
        result["csv"] = csv_files.run(args.csv_rows, args.repeats, warm_up=not args.smoke)
    if "maintenance" in args.only:
        _step(
            f"maintenance: {args.maintenance_days} days of 30-minute appends, read before and "
            f"after maintain and against a compacted copy x {args.repeats}"
        )
        result["maintenance"] = maintenance.run(
            args.maintenance_days, args.maintenance_rows, args.repeats
        )
    if "month" in args.only:
        _step(
            f"month: {args.month_days} simulated days of {args.month_runs} runs and a "
            "maintenance, checked every day"
        )
        result["month"] = month.run(args.month_days, args.month_runs, args.month_events)
    if "soak" in args.only:
        _step(
            f"soak: {args.soak_steps} random model steps, then {args.soak_shop_steps} of shop's, "
            f"{args.soak_kafka_steps} of the Kafka variant's, {args.soak_changes_steps} of crm's "
            f"and as many of a snapshot feed's, {args.soak_late_steps} with late events, "
            f"{args.soak_shop_late_steps} of shop's with late events"
        )
        result["soak"] = soak.run(
            args.soak_steps,
            args.soak_sequence,
            args.soak_seed,
            args.soak_shop_steps,
            args.soak_kafka_steps,
            args.soak_changes_steps,
            args.soak_late_steps,
            args.soak_shop_late_steps,
        )


def _failed(result: dict) -> list[str]:
    """What makes the suite exit 1 after writing its results: a soak sequence that
    broke the model.
    """
    soaked = result.get("soak", {})
    return [
        f"soak seed {failure['seed']}: {failure['error'].splitlines()[0]}"
        for failure in soaked.get("failures", [])
    ] + [
        f"soak {part} seed {failure['seed']}: {failure['error'].splitlines()[0]}"
        for part in ("shop", "kafka", "changes", "snapshots", "late", "shop_late")
        for failure in soaked.get(part, {}).get("failures", [])
    ]


# Each part's key in the results, its title and its Markdown (the manual's benchmarks page
# uses them too).
SECTIONS = (
    ("throughput", "Throughput: the same work three ways", throughput.markdown),
    (
        "shop",
        "The shop pipeline (a join, de-duplication): run, a plain script, backfill",
        shop.markdown,
    ),
    ("cost", "Cost: always-on against run-once", cost.markdown),
    ("cost_kafka", "Cost on a Kafka topic: always-on against run-once", cost.markdown),
    ("busy", "Busy fraction at the default cadence: make run against always-on", busy.markdown),
    ("airflow", "Airflow: parse, nothing new, task overhead", airflow_overhead.markdown),
    ("scheduled", "A nothing-new stream DAG run through make run's scheduler", scheduled.markdown),
    ("idle", "Idle: the platform per hour while nothing arrives, beside always-on", idle.markdown),
    ("rollback", "Rollback of all but the first bronze batch at two sizes", rollback.markdown),
    ("quality", "Quality gates' share of hop time", quality.markdown),
    ("event_log", "The event log's share of a warm run", event_log.markdown),
    ("big_file", "One file of many lines", big_file.markdown),
    (
        "gold_merge",
        "Gold's recount of changed windows against the state's count",
        gold_merge.markdown,
    ),
    ("s3", "The lake on S3 against the local lake", s3.markdown),
    ("kafka", "Ingest from a Kafka topic: the run-once hop against a plain script", kafka.markdown),
    ("changes", "A change feed: the changes hop against a plain MERGE script", changes.markdown),
    (
        "csv",
        "CSV files with a header: the platform's parse against Spark's csv source",
        csv_files.markdown,
    ),
    (
        "maintenance",
        "Reads after days of small appends, before and after maintenance",
        maintenance.markdown,
    ),
    ("month", "A simulated month of runs and daily maintenance", month.markdown),
    ("cluster", "A 2-worker standalone cluster against local[2]", cluster.markdown),
    ("soak", "Soak: random sequences against the plain-Python model", soak.markdown),
)


def markdown(result: dict) -> str:
    m = result["machine"]
    parts = [
        f"# Benchmarks{' (smoke sizes)' if result['smoke'] else ''}",
        "",
        f"{result['started']}, {m['cpus']} cores ({m['cpu']}), Spark master {m['spark_master']}, "
        f"Python {m['python']}; the suite took {result['duration_s'] / 60:.1f} min.",
    ]
    for key, title, render in SECTIONS:
        if key in result:
            parts += ["", f"## {title}", "", render(result[key])]
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args)
    write_json("latest.json", result)
    # every full run is kept: the manual's benchmarks page shows each part's newest
    if not args.smoke:
        RUNS.mkdir(exist_ok=True)
        stamp = result["started"].replace("-", "").replace(":", "").replace("+0000", "Z")
        (RUNS / f"{stamp}.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    text = markdown(result)
    (RESULTS / "latest.md").write_text(text)
    written = charts.draw(result, RESULTS)
    print(text)
    print(
        f"wrote {RESULTS / 'latest.json'}, {RESULTS / 'latest.md'} and "
        f"{', '.join(path.name for path in written)}",
        file=sys.stderr,
    )
    for problem in _failed(result):
        print(f"error: {problem}", file=sys.stderr)
    return 1 if _failed(result) else 0


if __name__ == "__main__":
    os.environ.setdefault("LAKEHOUSE_SPARK_LOG_LEVEL", "ERROR")
    raise SystemExit(main())
