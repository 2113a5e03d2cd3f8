"""``shop``'s transforms: DataFrames in, DataFrames out, the same for the run-once stream and a
backfill (they never ask whether their input is streaming).

Orders land as JSON lines, payments as CSV files with a header; both parsers turn a landing
line (``value``, ``_source_file``) into typed columns and a ``reason`` that is null for a valid
row, so one ``split`` serves both ingest hops.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.authoring import RESCUED, rescued

CURRENCIES = ("EUR", "USD", "GBP")
ORDER_FIELDS = {
    "order_id": "string",
    "customer_id": "string",
    "merchant_id": "string",
    "amount": "decimal(12,2)",
    "currency": "string",
    "order_time": "timestamp",
}
# An order's other fields are kept in RESCUED (JSON text): the schema drifted, nothing is lost.
ORDER_COLUMNS = (*ORDER_FIELDS, "order_date", RESCUED, "_source_file")
PAYMENT_HEADER = ("payment_id", "order_id", "paid_amount", "status", "paid_time")
PAYMENT_TYPES = {
    "payment_id": "string",
    "order_id": "string",
    "paid_amount": "decimal(12,2)",
    "status": "string",
    "paid_time": "timestamp",
}
PAYMENT_COLUMNS = (*PAYMENT_HEADER, "paid_date", "_source_file")
STATUSES = ("paid", "failed")
QUARANTINE_COLUMNS = ("raw_line", "reason", "_source_file")
PAID_COLUMNS = (
    "order_id",
    "customer_id",
    "merchant_id",
    "currency",
    "amount",
    "order_time",
    "payment_id",
    "paid_amount",
    "paid_time",
)


def _reason(checks: list[tuple[Column, str]]) -> Column:
    """The first failed check's message, null when every check holds."""
    reason = None
    for failed, message in checks:
        reason = (
            F.when(failed, F.lit(message))
            if reason is None
            else reason.when(failed, F.lit(message))
        )
    return reason


def _missing(name: str, kind: str) -> tuple[Column, str]:
    noun = {"decimal(12,2)": "a number", "timestamp": "an ISO-8601 time"}.get(kind, "text")
    return F.col(name).isNull(), f"{name} is missing or not {noun}"


def parse_orders(lines: DataFrame) -> DataFrame:
    """JSON lines to typed orders (``order_time`` an ISO-8601 timestamp)."""
    doc = F.try_parse_json(F.col("value"))
    typed = lines.select(
        "value",
        "_source_file",
        doc.isNull().alias("_not_json"),
        rescued(doc, tuple(ORDER_FIELDS)).alias(RESCUED),
        *[
            F.try_variant_get(doc, f"$.{name}", kind).alias(name)
            for name, kind in ORDER_FIELDS.items()
        ],
    )
    reason = _reason(
        [
            (F.col("_not_json"), "not a JSON object"),
            *[_missing(name, kind) for name, kind in ORDER_FIELDS.items()],
            (
                ~F.col("currency").isin(*CURRENCIES),
                "currency is not one of " + "|".join(CURRENCIES),
            ),
        ]
    )
    return typed.select(
        *ORDER_FIELDS,
        RESCUED,
        "_source_file",
        reason.alias("reason"),
        F.when(reason.isNotNull(), F.col("value")).alias("raw_line"),
    ).withColumn("order_date", F.to_date("order_time"))


def parse_payments(lines: DataFrame) -> DataFrame:
    """CSV lines to typed payments. A file's header line is dropped, not quarantined; a row with
    another number of fields than the header's is quarantined."""
    text = F.regexp_replace(F.col("value"), "\r$", "")
    rows = lines.where(text != ",".join(PAYMENT_HEADER)).select(
        "value", "_source_file", F.split(text, ",", -1).alias("_fields")
    )
    typed = rows.select(
        "value",
        "_source_file",
        F.size("_fields").alias("_count"),
        *[
            F.expr(
                f"try_cast(trim(try_element_at(_fields, {index + 1})) AS {PAYMENT_TYPES[name]})"
            ).alias(name)
            for index, name in enumerate(PAYMENT_HEADER)
        ],
    )
    reason = _reason(
        [
            (
                F.col("_count") != len(PAYMENT_HEADER),
                f"not {len(PAYMENT_HEADER)} comma-separated fields ({','.join(PAYMENT_HEADER)})",
            ),
            *[_missing(name, kind) for name, kind in PAYMENT_TYPES.items()],
            (~F.col("status").isin(*STATUSES), "status is not one of " + "|".join(STATUSES)),
        ]
    )
    return typed.select(
        *PAYMENT_HEADER,
        "_source_file",
        reason.alias("reason"),
        F.when(reason.isNotNull(), F.col("value")).alias("raw_line"),
    ).withColumn("paid_date", F.to_date("paid_time"))


def split(parsed: DataFrame) -> tuple[DataFrame, DataFrame]:
    """An ingest hop's rows for its table (whichever source) and for its quarantine."""
    valid = parsed.where(F.col("reason").isNull()).drop("reason", "raw_line")
    return valid, parsed.where(F.col("reason").isNotNull()).select(*QUARANTINE_COLUMNS)


def latest_orders(orders: DataFrame, allowed_lateness: str) -> DataFrame:
    """Silver: each order once. Producers resend an order (the same row); the stream keeps the
    keys it saw until the watermark passes their order time, so a copy landing later than the
    allowed lateness would be kept (a backfill drops it). The event time is part of the key, as
    Spark's streaming de-duplication needs to bound its state (``dropDuplicatesWithinWatermark``
    would not: it has no batch form, and a backfill runs this same code in batch)."""
    return (
        orders.withWatermark("order_time", allowed_lateness)
        .dropDuplicates(["order_id", "order_time"])
        .select(*ORDER_FIELDS, "order_date")
    )


def paid_orders(
    orders: DataFrame, payments: DataFrame, within: str, allowed_lateness: str
) -> DataFrame:
    """Silver: each order with its successful payment made up to ``within`` after it (an inner
    stream-stream join; watermarks on both sides bound the state)."""
    left = orders.withWatermark("order_time", allowed_lateness).alias("o")
    right = (
        payments.where(F.col("status") == "paid")
        .withWatermark("paid_time", allowed_lateness)
        .alias("p")
    )
    joined = left.join(
        right,
        F.expr(
            "o.order_id = p.order_id AND p.paid_time >= o.order_time AND p.paid_time <= "
            f"o.order_time + INTERVAL {within}"
        ),
    )
    return joined.select(
        *[f"o.{name}" for name in PAID_COLUMNS[:6]], *[f"p.{name}" for name in PAID_COLUMNS[6:]]
    )


def merchant_revenue(paid: DataFrame, window: str, allowed_lateness: str) -> DataFrame:
    """Gold: paid orders and what was paid per merchant and currency per ``window``
    of order time.
    """
    hourly = (
        paid.withWatermark("order_time", allowed_lateness)
        .groupBy(F.window("order_time", window).alias("window"), "merchant_id", "currency")
        .agg(F.count(F.lit(1)).alias("paid_orders"), F.sum("paid_amount").alias("revenue"))
    )
    return hourly.select(
        "merchant_id",
        "currency",
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        "paid_orders",
        "revenue",
    )
