"""``__pipeline__``'s transforms: DataFrames in, DataFrames out. They never read, write or ask
whether their input is streaming, so run-once streams and batch backfills share them."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.authoring import RESCUED, rescued

KINDS = ("a", "b", "c")
# an event's other fields are kept in RESCUED (JSON text)
FIELDS = ("id", "kind", "amount", "event_time")
BRONZE_COLUMNS = (*FIELDS, "event_ts", "event_date", RESCUED, "_source_file")
# what the ingest hop's quarantine holds
QUARANTINE_COLUMNS = ("raw_line", "reason", "_source_file")
SILVER_COLUMNS = ("id", "kind", "amount", "event_time", "event_ts", "event_date")


def parse(lines: DataFrame) -> DataFrame:
    """JSON lines (``value``, ``_source_file``) to typed events and a ``reason``
    (null when valid).
    """
    doc = F.try_parse_json(F.col("value"))
    fields = lines.select(
        "value",
        "_source_file",
        F.try_variant_get(doc, "$.id", "string").alias("id"),
        F.try_variant_get(doc, "$.kind", "string").alias("kind"),
        F.try_variant_get(doc, "$.amount", "decimal(12,2)").alias("amount"),
        F.try_variant_get(doc, "$.event_time", "bigint").alias("event_time"),
        doc.isNull().alias("_not_json"),
        rescued(doc, FIELDS).alias(RESCUED),
    )
    reason = (
        F.when(F.col("_not_json"), F.lit("not JSON"))
        .when(F.col("amount").isNull(), F.lit("amount is missing or not a number"))
        .when(F.col("event_time").isNull(), F.lit("event_time is missing or not a number"))
    )
    return stamp(
        fields.select(
            "id",
            "kind",
            "amount",
            "event_time",
            RESCUED,
            "_source_file",
            reason.alias("reason"),
            F.col("value").alias("raw_line"),
        )
    )


def stamp(events: DataFrame) -> DataFrame:
    """Typed events (from :func:`parse`, or the platform's parse of a CSV file) with their time
    as a timestamp and its date; an event with no id or a kind not in ``KINDS`` gets a reason
    (the first reason found is kept)."""
    reason = F.coalesce(
        F.col("reason"),
        F.when(F.col("id").isNull(), F.lit("missing id")),
        F.when(
            ~F.coalesce(F.col("kind").isin(*KINDS), F.lit(False)),
            F.lit("kind is not one of " + "|".join(KINDS)),
        ),
    )
    event_ts = F.timestamp_millis(F.col("event_time"))
    return (
        events.withColumn("reason", reason)
        .withColumn("event_ts", event_ts)
        .withColumn("event_date", F.to_date(event_ts))
    )


def valid(parsed: DataFrame) -> DataFrame:
    return parsed.where(F.col("reason").isNull()).select(*BRONZE_COLUMNS)


def invalid(parsed: DataFrame) -> DataFrame:
    return parsed.where(F.col("reason").isNotNull()).select(*QUARANTINE_COLUMNS)


def positive(events: DataFrame) -> DataFrame:
    """Silver: the events with a positive amount."""
    return events.where(F.col("amount") > 0).select(*SILVER_COLUMNS)


def per_minute(events: DataFrame, window: str, allowed_lateness: str) -> DataFrame:
    """Gold: events and their total amount per kind in tumbling event-time windows."""
    counted = (
        events.withWatermark("event_ts", allowed_lateness)
        .groupBy(F.window("event_ts", window).alias("window"), F.col("kind"))
        .agg(F.count(F.lit(1)).alias("events"), F.sum("amount").alias("amount"))
    )
    return counted.select(
        "kind",
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        "events",
        "amount",
    )
