"""Lineage columns every ingest hop stamps on its rows, whatever the pipeline."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F


def add_lineage(frame: DataFrame, batch_id: int, ingest_time: Column | None = None) -> DataFrame:
    """Stamp rows with the micro-batch (or -1 for a backfill) and the ingest time."""
    return frame.withColumn("_batch_id", F.lit(batch_id).cast("long")).withColumn(
        "_ingest_time", ingest_time if ingest_time is not None else F.current_timestamp()
    )
