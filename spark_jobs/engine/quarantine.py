"""A hop's quarantine table as a person reads it (``lakehouse quarantine``): its rows counted by
reason and by source file, a few rows of each reason, and for each file (or, for a hop fed by a
table, the quarantined rows' time span) the backfill that ingests it again once it is fixed.

Quarantine rows hold the line (or the row as JSON) in ``raw_line``, why in ``reason``, and the
hop's lineage (``_source_file`` for an ingest hop; the hop's time column for a hop whose
``drop`` rules sent rows there). One aggregation counts them; one small job reads the samples.
"""

from __future__ import annotations

from spark_jobs.engine import quality
from spark_jobs.engine.tables import table_exists
from spark_jobs.logs import delta_log
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import HopSpec
from spark_jobs.model.times import iso

DAY_MS = 24 * 3600 * 1000
SAMPLES = 3  # rows shown per reason
TOP = 20  # reasons and files listed (the rest is summed up)
LINE_CHARS = 200  # of each sample's line


def _rows(spark, lake: Lake, hop: HopSpec, run: dict | None):
    """The quarantine's rows: all of them, or those one run wrote (its commits' change feed)."""
    table = lake.quarantine(hop)
    if run is None:
        return spark.read.format("delta").load(table)
    change = (run.get("tables") or {}).get(table) or {}
    rows = quality.increment(spark, table, change.get("version_before"), change.get("version_after"))
    return rows if rows is not None else spark.read.format("delta").load(table).limit(0)


def _counts(frame, column: str) -> list[dict]:
    from pyspark.sql import functions as F

    counted = frame.groupBy(column).count().orderBy(F.desc("count"), F.asc(column)).limit(TOP).collect()
    return [{"value": row[0], "rows": row["count"]} for row in counted]


def _samples(frame, reasons: list[dict]) -> dict[str, list[str]]:
    """The first :data:`SAMPLES` lines of each listed reason, in one job."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    wanted = [each["value"] for each in reasons if each["value"] is not None]
    if not wanted:
        return {}
    order = Window.partitionBy("reason").orderBy(*(["_source_file"] if "_source_file" in frame.columns else []), "raw_line")
    picked = (frame.where(F.col("reason").isin(wanted)).withColumn("_n", F.row_number().over(order))
              .where(F.col("_n") <= SAMPLES).select("reason", F.substring("raw_line", 1, LINE_CHARS).alias("line"))
              .collect())
    samples: dict[str, list[str]] = {}
    for row in picked:
        samples.setdefault(row["reason"], []).append(row["line"])
    return samples


def _ingest_again(spark, lake: Lake, hop: HopSpec, files: list[dict]) -> list[dict]:
    """For each listed file of an ingest hop, the days its valid rows span in the hop's table
    (a backfill of those days reads the file again and rebuilds its quarantine rows)."""
    from pyspark.sql import functions as F

    names = [each["value"] for each in files if each["value"] is not None]
    table = lake.table(hop)
    if not names or not table_exists(table):
        return []
    column = F.col(hop.time_column)
    millis = F.unix_millis(column) if spark.read.format("delta").load(table).schema[hop.time_column].dataType.typeName() \
        == "timestamp" else column
    spans = (spark.read.format("delta").load(table).where(F.col("_source_file").isin(names))
             .groupBy("_source_file").agg(F.min(millis).alias("low"), F.max(millis).alias("high")).collect())
    return [{"file": row["_source_file"], "start": iso(row["low"] - row["low"] % DAY_MS),
             "end": iso(row["high"] - row["high"] % DAY_MS + DAY_MS)} for row in sorted(spans, key=lambda row: row[0])]


def summary(spark, lake: Lake, hop: HopSpec, run: dict | None = None) -> dict:
    """What the hop's quarantine holds (of one ``run``'s writes, if given): counts by reason and by
    source file, samples per reason, and the backfills that ingest the listed files again."""
    table = lake.quarantine(hop)
    document = {"hop": hop.name, "table": table, "version": delta_log.table_version(table),
                "run_id": run["run_id"] if run else None, "rows": 0, "reasons": [], "files": [], "samples": {},
                "ingest_again": []}
    if not table_exists(table):
        return document
    frame = _rows(spark, lake, hop, run).cache()
    try:
        document["rows"] = frame.count()
        if document["rows"] == 0:
            return document
        document["reasons"] = _counts(frame, "reason")
        document["samples"] = _samples(frame, document["reasons"])
        if "_source_file" in frame.columns:
            document["files"] = _counts(frame, "_source_file")
            document["ingest_again"] = _ingest_again(frame.sparkSession, lake, hop, document["files"])
        elif hop.time_column in frame.columns:
            document["ingest_again"] = _time_span(frame, hop)
    finally:
        frame.unpersist()
    return document


def _time_span(frame, hop: HopSpec) -> list[dict]:
    """A hop fed by a table: the days its quarantined rows span (fix the rule or the rows, then backfill them)."""
    from pyspark.sql import functions as F

    column = F.col(hop.time_column)
    millis = F.unix_millis(column) if frame.schema[hop.time_column].dataType.typeName() == "timestamp" else column
    low, high = frame.agg(F.min(millis), F.max(millis)).first()
    if low is None:
        return []
    return [{"file": None, "start": iso(low - low % DAY_MS), "end": iso(high - high % DAY_MS + DAY_MS)}]
