"""Benchmark: the ``shop`` pipeline (two sources, de-duplication, a stream-stream join, an hourly
aggregate) as a run-once stream and as a backfill, on the same landing files.

(a) ``lakehouse run shop`` (all five hops, one batch each), (c) ``lakehouse backfill shop`` over
the range the files hold. Both run in one process with one warm JVM, interleaved, each on a
fresh lake whose landing files are hard links to one generated set; quality gates off (their
share is :mod:`bench.quality`'s figure). Each attempt checks that both wrote the same rows to
every table (with no row later than the watermark allows, the stream equals the backfill: the
files land before the run, so each hop reads them in one batch). Records are the lines of both
sources' files.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from bench.common import CORES, spread, stats, timed_lakehouse

WAYS = ("run", "backfill")
RANGE = ("2026-03-01T00:00:00", "2026-03-03T00:00:00")  # holds every generated order and payment
HOPS = ("bronze_orders", "bronze_payments", "silver_orders", "silver_paid", "gold_merchant_revenue")
TABLES = ("bronze/shop_orders", "bronze/shop_payments", "quarantine/shop_orders", "quarantine/shop_payments",
          "silver/shop_orders", "silver/shop_paid", "gold/shop_merchant_revenue")


def _rows(spark, home: Path) -> dict[str, object]:
    """Rows of each table, and gold's paid orders and revenue (equal outputs prove equal work)."""
    found: dict[str, object] = {table: spark.read.format("delta").load(str(home / "tables" / table)).count()
                                for table in TABLES}
    paid, revenue = spark.read.format("delta").load(str(home / "tables/gold/shop_merchant_revenue")).groupBy().agg(
        {"paid_orders": "sum", "revenue": "sum"}).first()
    found["gold_paid_orders"], found["gold_revenue"] = paid, str(revenue)
    return found


def _one(way: str, spark, source: Path, home: Path) -> tuple[float, dict]:
    argv = ["run", "shop"] if way == "run" else ["backfill", "shop", "--start", RANGE[0], "--end", RANGE[1]]
    return timed_lakehouse(source, home, [*argv, "--quality=off", "--run-id", "bench"]), _rows(spark, home)


def _hop_times(home: Path) -> dict[str, float]:
    return {hop: json.loads((home / f"_ops/runs/shop/bench.{hop}.json").read_text())["duration_s"] for hop in HOPS}


def _lines(home: Path) -> int:
    return sum(len(path.read_bytes().splitlines()) for path in (home / "landing/shop").rglob("*") if path.is_file())


def run(orders: int, repeats: int, files: int = 10) -> dict:
    from spark_jobs.cli import main
    from spark_jobs.engine.session import build_session

    spark = build_session("lakehouse-bench")
    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-shop-"))
    try:
        source, warm_up = root / "source", root / "warm-up-source"
        for home, count in ((source, orders), (warm_up, min(orders, 20_000))):
            os.environ["LAKEHOUSE_HOME"] = str(home)
            main(["generate", "shop", "--events", str(count), "--files", str(files), "--seed", "5",
                  "--start", RANGE[0], "--bad-fraction", "0.01", "--late-fraction", "0"])
        records = _lines(source)
        for way in WAYS:  # JVM, code paths, Delta: warm (on a smaller set) before measuring
            _one(way, spark, warm_up, root / f"warm-up-{way}")
        seconds: dict[str, list[float]] = {way: [] for way in WAYS}
        hops: dict[str, list[dict]] = {way: [] for way in WAYS}
        for attempt in range(repeats):
            rows = {}
            for way in WAYS:
                home = root / f"{way}-{attempt}"
                elapsed, rows[way] = _one(way, spark, source, home)
                seconds[way].append(elapsed)
                hops[way].append(_hop_times(home))
                shutil.rmtree(home)
                print(f"  shop {attempt + 1}/{repeats} {way}: {elapsed:.1f} s", flush=True)
            if rows["run"] != rows["backfill"]:
                raise RuntimeError(f"shop's run and backfill wrote different rows: {rows}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = {"orders": orders, "files": files, "records": records, "cores": CORES, "rows": rows["run"], "ways": {}}
    for way in WAYS:
        rates = [records / value for value in seconds[way]]
        result["ways"][way] = {"seconds": stats(seconds[way]), "records_per_s": stats(rates, 0),
                               "records_per_s_per_core": stats([rate / CORES for rate in rates], 0),
                               "hop_seconds": {hop: stats([sample[hop] for sample in hops[way]]) for hop in HOPS}}
    median = {way: result["ways"][way]["seconds"]["median"] for way in WAYS}
    result["backfill_over_run"] = round(median["run"] / median["backfill"], 2)
    return result


def markdown(result: dict) -> str:
    lines = [f"shop, {result['orders']:,} orders ({result['records']:,} lines of orders and payments) in "
             f"{result['files']} files of each source, {result['cores']} cores, median of "
             f"{result['ways']['run']['seconds']['n']} (min-max)", "",
             "| way | seconds | records/s | records/s per core | per hop s |", "|---|---:|---:|---:|---|"]
    labels = {"run": "(a) lakehouse run shop", "backfill": "(c) lakehouse backfill shop"}
    for way, row in result["ways"].items():
        per_hop = ", ".join(f"{hop} {value['median']:.1f}" for hop, value in row["hop_seconds"].items())
        lines.append(f"| {labels[way]} | {spread(row['seconds'])} | {spread(row['records_per_s'], '{:,.0f}')} "
                     f"| {row['records_per_s_per_core']['median']:,.0f} | {per_hop} |")
    lines.append(f"\nc/a = {result['backfill_over_run']} (the backfill's records/s over the stream's; both wrote "
                 f"the same rows: {result['rows']['silver/shop_paid']:,} paid orders joined, "
                 f"{result['rows']['gold/shop_merchant_revenue']:,} gold rows)")
    return "\n".join(lines)
