"""``crm``'s transforms: the customers' events as the platform parses them (``format: debezium``)
checked further; the parse of a Debezium event per line (``value``, ``_source_file``) to typed
columns and a ``reason`` that is null for a valid event, for the orders' feed (inserts of the
database's orders table); and gold's join of each order with the version of its customer that
was current at the order's log position."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.authoring import with_debezium_columns

FIELDS = {"customer_id": "string", "name": "string", "email": "string", "tier": "string"}
ORDER_FIELDS = {"order_id": "string", "customer_id": "string", "amount": "double"}
TIERS = ("bronze", "silver", "gold")


def _checked(lines: DataFrame, fields: dict[str, str], checks: list) -> DataFrame:
    """Each line's ``fields``, operation, log position and time, and ``reason``: the message of
    the first of ``checks`` (``(failed, message)``) that fails, after the envelope's own."""
    typed = with_debezium_columns(
        lines.select("value", "_source_file"), F.try_parse_json("value"), fields
    )
    reason = None
    for failed, message in [
        (F.col("position").isNull(), "source has no log position (lsn, file and pos, ...)"),
        (F.col("changed_at").isNull(), "ts_ms is missing or not a number"),
        *checks,
    ]:
        reason = (
            F.when(failed, F.lit(message))
            if reason is None
            else reason.when(failed, F.lit(message))
        )
    return typed.select(
        *fields,
        "op",
        "position",
        "changed_at",
        "_source_file",
        reason.alias("reason"),
        F.when(reason.isNotNull(), F.col("value")).alias("raw_line"),
    )


def _not_in(column: str, values: tuple[str, ...]):
    return ~F.coalesce(F.col(column).isin(*values), F.lit(False))


def check_changes(parsed: DataFrame) -> DataFrame:
    """The customers' events as ``format: debezium`` parsed them, a live row's tier checked too
    (a delete's or truncate's may be absent), and each event's date for bronze's partitions."""
    bad_tier = F.col("reason").isNull() & F.col("op").isin("c", "u", "r") & _not_in("tier", TIERS)
    return parsed.withColumn(
        "reason",
        F.when(bad_tier, F.lit("tier is not one of " + "|".join(TIERS))).otherwise(F.col("reason")),
    ).withColumn("changed_date", F.to_date("changed_at"))


def parse_orders(lines: DataFrame) -> DataFrame:
    """Each line's order (an insert or snapshot read of the orders table), its log position and
    its time as ``ordered_at``; ``reason`` says what is wrong."""
    checks = [
        (F.col("order_id").isNull(), "order_id is missing"),
        (F.col("customer_id").isNull(), "customer_id is missing"),
        (~F.coalesce(F.col("amount") > 0, F.lit(False)), "amount is missing or not positive"),
        (_not_in("op", ("c", "r")), "op is not c|r: an order is inserted once"),
    ]
    parsed = (
        _checked(lines, ORDER_FIELDS, checks)
        .drop("op")
        .withColumnRenamed("changed_at", "ordered_at")
    )
    return parsed.withColumn("order_date", F.to_date("ordered_at"))


def tier_at_order(orders: DataFrame, history: DataFrame, allowed_lateness: str) -> DataFrame:
    """Each order once (producers resend some), with the tier of its customer's version that was
    current at the order's log position (``valid_from <= position < valid_to``, ``valid_to``
    null while current): the tier the customer had when the order was placed, null when the
    customer had no live version then. The order's time is part of the de-duplication's key,
    which bounds the stream's state (as shop's silver_orders)."""
    orders = orders.withWatermark("ordered_at", allowed_lateness).dropDuplicates(
        ["order_id", "ordered_at"]
    )
    version = history.select(
        F.col("customer_id").alias("_customer"), "tier", "valid_from", "valid_to"
    )
    current = (
        (orders["customer_id"] == version["_customer"])
        & (version["valid_from"] <= orders["position"])
        & (version["valid_to"].isNull() | (orders["position"] < version["valid_to"]))
    )
    return orders.join(version, current, "left").drop("_customer", "valid_from", "valid_to")


def split(parsed: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Valid events for bronze, the rest (the line and its reason) for its quarantine."""
    valid = parsed.where(F.col("reason").isNull()).drop("reason", "raw_line")
    invalid = parsed.where(F.col("reason").isNotNull()).select("raw_line", "reason", "_source_file")
    return valid, invalid
