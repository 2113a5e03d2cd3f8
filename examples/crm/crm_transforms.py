"""``crm``'s parse: a Debezium change event per line (``value``, ``_source_file``) to typed
columns and a ``reason`` that is null for a valid event."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.authoring import debezium_columns

FIELDS = {"customer_id": "string", "name": "string", "email": "string", "tier": "string"}
OPERATIONS = ("c", "u", "d", "r")
TIERS = ("bronze", "silver", "gold")


def parse_changes(lines: DataFrame) -> DataFrame:
    """Each line's customer row, operation, log position and time; ``reason`` says what is wrong."""
    typed = lines.select("value", "_source_file", *debezium_columns(F.try_parse_json("value"), FIELDS))
    checks = [(F.col("customer_id").isNull(), "customer_id is missing"),
              (F.col("lsn").isNull(), "source.lsn is missing or not a number"),
              (F.col("changed_at").isNull(), "ts_ms is missing or not a number"),
              (~F.coalesce(F.col("op").isin(*OPERATIONS), F.lit(False)), "op is not one of " + "|".join(OPERATIONS)),
              ((F.col("op") != "d") & ~F.coalesce(F.col("tier").isin(*TIERS), F.lit(False)),
               "tier is not one of " + "|".join(TIERS))]
    reason = None
    for failed, message in checks:
        reason = F.when(failed, F.lit(message)) if reason is None else reason.when(failed, F.lit(message))
    return typed.select(*FIELDS, "op", "lsn", "changed_at", "_source_file", reason.alias("reason"),
                        F.when(reason.isNotNull(), F.col("value")).alias("raw_line")
                        ).withColumn("changed_date", F.to_date("changed_at"))


def split(parsed: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Valid events for bronze, the rest (the line and its reason) for its quarantine."""
    valid = parsed.where(F.col("reason").isNull()).drop("reason", "raw_line")
    invalid = parsed.where(F.col("reason").isNotNull()).select("raw_line", "reason", "_source_file")
    return valid, invalid
