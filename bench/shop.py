"""Benchmark: the ``shop`` pipeline (two sources, de-duplication, a stream-stream join, an hourly
aggregate) as a run-once stream, as a plain PySpark script and as a backfill, on the same files.

(a) ``lakehouse run shop`` (all five hops, one batch each), (b) a plain PySpark batch script
written here without the package (:func:`plain_batch`: the same quarantine rules, de-duplication,
join and hourly sums, its own expressions, Delta writes), (c) ``lakehouse backfill shop`` over
the range the files hold. All run in one process with one warm JVM, interleaved, each on a
fresh lake whose landing files are hard links to one generated set; quality gates off (their
share is :mod:`bench.quality`'s figure). Each attempt checks that all three wrote the same rows
to every table (with no row later than the watermark allows, the stream equals the backfill:
the files land before the run, so each hop reads them in one batch). Records are the lines of
both sources' files.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from bench.common import CORES, link_landing, spread, stats, timed_lakehouse

WAYS = ("run", "plain", "backfill")
RANGE = ("2026-03-01T00:00:00", "2026-03-03T00:00:00")  # holds every generated order and payment
HOPS = ("bronze_orders", "bronze_payments", "silver_orders", "silver_paid", "gold_merchant_revenue")
TABLES = (
    "bronze/shop_orders",
    "bronze/shop_payments",
    "quarantine/shop_orders",
    "quarantine/shop_payments",
    "silver/shop_orders",
    "silver/shop_paid",
    "gold/shop_merchant_revenue",
)


ORDER_TYPES = {
    "order_id": "string",
    "customer_id": "string",
    "merchant_id": "string",
    "amount": "decimal(12,2)",
    "currency": "string",
    "order_time": "timestamp",
}
PAYMENT_SCHEMA = (
    "payment_id string, order_id string, paid_amount decimal(12,2), status string, paid_time "
    "timestamp, _corrupt string"
)


def plain_batch(spark, home: Path) -> Path:
    """``shop`` as a data engineer would write it as one PySpark batch script: orders parsed from
    JSON lines (a line that is not an object, a field missing or of the wrong type, an unknown
    currency, an amount outside 0.01..1,000,000: quarantined; unknown fields kept as JSON text),
    payments by Spark's CSV reader (a malformed row, an empty field, a status other than paid or
    failed: quarantined), orders de-duplicated, joined with their paid payments up to an hour
    after them, and summed per merchant, currency and hour. Returns the folder of its seven tables
    (:data:`TABLES`' names)."""
    from pyspark.sql import functions as F

    out = home / "plain"

    def save(frame, table: str, *partitions: str) -> None:
        frame.write.format("delta").mode("overwrite").partitionBy(*partitions).save(
            str(out / table)
        )

    lines = spark.read.text(str(home / "landing/shop/orders")).select(
        "value", F.col("_metadata.file_path").alias("_source_file")
    )
    doc = F.try_parse_json("value")
    known = F.array(*[F.lit(name) for name in ORDER_TYPES])
    extra = F.map_filter(
        F.try_variant_get(doc, "$", "map<string,variant>"),
        lambda key, _v: ~F.array_contains(known, key),
    )
    orders = lines.select(
        "value",
        "_source_file",
        F.when(F.size(extra) > 0, F.to_json(extra)).alias("_rescued"),
        *[
            F.try_variant_get(doc, f"$.{name}", kind).alias(name)
            for name, kind in ORDER_TYPES.items()
        ],
    )
    valid = F.lit(True)
    for name in ORDER_TYPES:
        valid = valid & F.col(name).isNotNull()
    # The last rule is the drop policy of bronze_orders' suite, which the package
    # applies in the write.
    valid = (
        valid
        & F.col("currency").isin("EUR", "USD", "GBP")
        & F.col("amount").between(0.01, 1_000_000)
    )
    orders = orders.withColumn("_valid", F.coalesce(valid, F.lit(False)))
    orders = orders.persist()
    good_orders = orders.where("_valid").select(
        *ORDER_TYPES, F.to_date("order_time").alias("order_date"), "_rescued", "_source_file"
    )
    save(good_orders, "bronze/shop_orders", "order_date")
    save(
        orders.where("NOT _valid").select(F.col("value").alias("raw_line"), "_source_file"),
        "quarantine/shop_orders",
    )

    payments = (
        spark.read.schema(PAYMENT_SCHEMA)
        .option("header", True)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", "_corrupt")
        .csv(str(home / "landing/shop/payments"))
        .withColumn("_source_file", F.col("_metadata.file_path"))
    )
    fields = ("payment_id", "order_id", "paid_amount", "status", "paid_time")
    complete = F.col("_corrupt").isNull() & F.col("status").isin("paid", "failed")
    for name in fields:
        complete = complete & F.col(name).isNotNull()
    payments = payments.withColumn("_valid", F.coalesce(complete, F.lit(False))).persist()
    good_payments = payments.where("_valid").select(
        *fields, F.to_date("paid_time").alias("paid_date"), "_source_file"
    )
    save(good_payments, "bronze/shop_payments", "paid_date")
    save(
        payments.where("NOT _valid").select(
            F.coalesce(
                "_corrupt", F.concat_ws(",", *[F.col(name).cast("string") for name in fields])
            ).alias("raw_line"),
            "_source_file",
        ),
        "quarantine/shop_payments",
    )

    unique = good_orders.dropDuplicates(["order_id", "order_time"]).drop("_rescued", "_source_file")
    save(unique, "silver/shop_orders")
    o, p = unique.alias("o"), good_payments.where(F.col("status") == "paid").alias("p")
    paid = o.join(
        p,
        F.expr(
            "o.order_id = p.order_id AND p.paid_time BETWEEN o.order_time "
            "AND o.order_time + INTERVAL 1 HOUR"
        ),
    ).select(
        "o.order_id",
        "o.customer_id",
        "o.merchant_id",
        "o.currency",
        "o.amount",
        "o.order_time",
        "p.payment_id",
        "p.paid_amount",
        "p.paid_time",
    )
    save(paid, "silver/shop_paid")
    hourly = (
        paid.groupBy(F.window("order_time", "1 hour").alias("w"), "merchant_id", "currency")
        .agg(F.count(F.lit(1)).alias("paid_orders"), F.sum("paid_amount").alias("revenue"))
        .select(
            "merchant_id",
            "currency",
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            "paid_orders",
            "revenue",
        )
    )
    save(hourly, "gold/shop_merchant_revenue")
    orders.unpersist()
    payments.unpersist()
    return out


def _rows(spark, tables: Path) -> dict[str, object]:
    """Rows of each table, and gold's paid orders and revenue (equal outputs prove equal work)."""
    found: dict[str, object] = {
        table: spark.read.format("delta").load(str(tables / table)).count() for table in TABLES
    }
    paid, revenue = (
        spark.read.format("delta")
        .load(str(tables / "gold/shop_merchant_revenue"))
        .groupBy()
        .agg({"paid_orders": "sum", "revenue": "sum"})
        .first()
    )
    found["gold_paid_orders"], found["gold_revenue"] = paid, str(revenue)
    return found


def _one(way: str, spark, source: Path, home: Path) -> tuple[float, dict]:
    if way == "plain":
        link_landing(source, home)
        began = time.perf_counter()
        tables = plain_batch(spark, home)
        return time.perf_counter() - began, _rows(spark, tables)
    argv = (
        ["run", "shop"]
        if way == "run"
        else ["backfill", "shop", "--start", RANGE[0], "--end", RANGE[1]]
    )
    return timed_lakehouse(source, home, [*argv, "--quality=off", "--run-id", "bench"]), _rows(
        spark, home / "tables"
    )


def _hop_times(home: Path) -> dict[str, float]:
    return {
        hop: json.loads((home / f"_ops/runs/shop/bench.{hop}.json").read_text())["duration_s"]
        for hop in HOPS
    }


def _lines(home: Path) -> int:
    return sum(
        len(path.read_bytes().splitlines())
        for path in (home / "landing/shop").rglob("*")
        if path.is_file()
    )


def run(orders: int, repeats: int, files: int = 10, warm_up: bool = True) -> dict:
    from spark_jobs.cli import main
    from spark_jobs.engine.session import build_session

    spark = build_session("lakehouse-bench")
    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-shop-"))
    try:
        source, warm_source = root / "source", root / "warm-up-source"
        for home, count in ((source, orders), (warm_source, min(orders, 20_000)))[
            : 2 if warm_up else 1
        ]:
            os.environ["LAKEHOUSE_HOME"] = str(home)
            main(
                [
                    "generate",
                    "shop",
                    "--events",
                    str(count),
                    "--files",
                    str(files),
                    "--seed",
                    "5",
                    "--start",
                    RANGE[0],
                    "--bad-fraction",
                    "0.01",
                    "--late-fraction",
                    "0",
                ]
            )
        records = _lines(source)
        # JVM, code paths, Delta: warm (on a smaller set) before measuring
        for way in WAYS if warm_up else ():
            _one(way, spark, warm_source, root / f"warm-up-{way}")
        seconds: dict[str, list[float]] = {way: [] for way in WAYS}
        hops: dict[str, list[dict]] = {way: [] for way in WAYS}
        for attempt in range(repeats):
            rows = {}
            for way in WAYS:
                home = root / f"{way}-{attempt}"
                elapsed, rows[way] = _one(way, spark, source, home)
                seconds[way].append(elapsed)
                if way != "plain":
                    hops[way].append(_hop_times(home))
                shutil.rmtree(home)
                print(f"  shop {attempt + 1}/{repeats} {way}: {elapsed:.1f} s", flush=True)
            if not rows["run"] == rows["plain"] == rows["backfill"]:
                raise RuntimeError(
                    f"shop's run, plain script and backfill wrote different rows: {rows}"
                )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = {
        "orders": orders,
        "files": files,
        "records": records,
        "cores": CORES,
        "rows": rows["run"],
        "ways": {},
    }
    for way in WAYS:
        rates = [records / value for value in seconds[way]]
        result["ways"][way] = {
            "seconds": stats(seconds[way]),
            "records_per_s": stats(rates, 0),
            "records_per_s_per_core": stats([rate / CORES for rate in rates], 0),
            "hop_seconds": {hop: stats([sample[hop] for sample in hops[way]]) for hop in HOPS}
            if hops[way]
            else {},
        }
    median = {way: result["ways"][way]["seconds"]["median"] for way in WAYS}
    result["backfill_over_run"] = round(median["run"] / median["backfill"], 2)
    result["run_over_plain"] = round(median["plain"] / median["run"], 2)
    result["backfill_over_plain"] = round(median["plain"] / median["backfill"], 2)
    return result


def markdown(result: dict) -> str:
    lines = [
        f"shop, {result['orders']:,} orders ({result['records']:,} lines of orders and payments) "
        f"in {result['files']} files of each source, {result['cores']} cores, median of "
        f"{result['ways']['run']['seconds']['n']} (min-max)",
        "",
        "| way | seconds | records/s | records/s per core | per hop s |",
        "|---|---:|---:|---:|---|",
    ]
    labels = {
        "run": "(a) lakehouse run shop",
        "plain": "(b) plain PySpark batch, same rules",
        "backfill": "(c) lakehouse backfill shop",
    }
    for way, row in result["ways"].items():
        per_hop = (
            ", ".join(f"{hop} {value['median']:.1f}" for hop, value in row["hop_seconds"].items())
            or "-"
        )
        lines.append(
            f"| {labels[way]} | {spread(row['seconds'])} | "
            f"{spread(row['records_per_s'], '{:,.0f}')} | "
            f"{row['records_per_s_per_core']['median']:,.0f} | {per_hop} |"
        )
    lines.append(
        f"\nc/a = {result['backfill_over_run']} (the backfill's records/s over the stream's; both "
        f"wrote the same rows: {result['rows']['silver/shop_paid']:,} paid orders joined, "
        f"{result['rows']['gold/shop_merchant_revenue']:,} gold rows)"
    )
    lines.append(
        f"\na/b = {result['run_over_plain']}, c/b = {result['backfill_over_plain']} (records/s "
        "over the plain script's, which wrote the same rows to its seven tables)"
    )
    return "\n".join(lines)
