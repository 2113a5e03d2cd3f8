"""What the sources and sinks share: a time range as SQL, whether a Delta table exists or a
backfill ever wrote it, and a frame held in memory while a batch's writes read it."""

from __future__ import annotations

from contextlib import contextmanager

from spark_jobs.control.removable.table_files import backfill_writes
from spark_jobs.logs import delta_log
from spark_jobs.model.times import iso


def range_predicate(frame, column: str, start_ms: int, end_ms: int) -> str:
    """SQL for ``start <= column < end``: timestamps compare with timestamp literals, other time
    columns (epoch milliseconds) with numbers, as ``frame``'s schema says."""
    if frame.schema[column].dataType.typeName() != "timestamp":
        return f"{column} >= {start_ms} AND {column} < {end_ms}"
    return f"{column} >= timestamp'{iso(start_ms)}' AND {column} < timestamp'{iso(end_ms)}'"


def table_exists(table: str) -> bool:
    return delta_log.table_version(table) is not None


def has_files(spark, table: str) -> bool:
    """Whether ``table`` exists and holds a data file (a table rolled back to its start holds
    none): from its log's plain files, or Delta's ``DESCRIBE DETAIL`` where they cannot be read
    that way (that one is a Spark job: about 0.4 s of each run of an aggregate hop)."""
    if not table_exists(table):
        return False
    live = delta_log.live_files(table)
    if live is not None:
        return bool(live)
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, table).detail().first()["numFiles"] > 0


def has_backfill_writes(table: str) -> bool:
    """Whether a backfill ever added rows to ``table``
    (:func:`spark_jobs.control.removable.table_files.backfill_writes`).
    """
    return backfill_writes(table)


# Spark's in-memory cache compresses each column as it fills; on bronze's batch of 2 M parsed
# lines that took 6-8 s of a 23-s write of its two tables, about a quarter.
# Uncompressed, a held batch takes more memory (past the cache's share it goes to
# local disk, persist()'s MEMORY_AND_DISK) for as long as its writes read it.
_CACHE_COMPRESSED = "spark.sql.inMemoryColumnarStorage.compressed"


@contextmanager
def held(frame):
    """``frame`` cached, uncompressed, while the block's writes read it more than once."""
    conf = frame.sparkSession.conf
    before = conf.get(_CACHE_COMPRESSED, None)
    conf.set(_CACHE_COMPRESSED, "false")  # read when the first action fills the cache
    frame.persist()
    try:
        yield frame
    finally:
        frame.unpersist()
        if before is None:
            conf.unset(_CACHE_COMPRESSED)
        else:
            conf.set(_CACHE_COMPRESSED, before)
