"""Lineage columns every ingest hop stamps on its rows, whatever the pipeline."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.model.formats import RESCUED  # noqa: F401  (the engine's name for the column)

BATCH_ID = "_batch_id"
BACKFILL_BATCH = -1  # the batch id of rows a backfill wrote


def add_lineage(frame: DataFrame, batch_id: int, ingest_time: Column | None = None) -> DataFrame:
    """Stamp rows with the micro-batch (or :data:`BACKFILL_BATCH`) and the ingest time."""
    return frame.withColumn(BATCH_ID, F.lit(batch_id).cast("long")).withColumn(
        "_ingest_time", ingest_time if ingest_time is not None else F.current_timestamp()
    )


def streamed_rows(frame: DataFrame) -> DataFrame:
    """The rows a stream wrote: a backfill's rows reach the hops below by their own backfill."""
    return frame.where(F.col(BATCH_ID) != BACKFILL_BATCH)


def not_yet_written(new: DataFrame, written: DataFrame) -> DataFrame:
    """Rows of ``new`` with no equal row (nulls equal) among ``written``'s same columns."""
    columns = new.columns
    written = written.select(*columns)
    condition = None
    for name in columns:
        same = new[name].eqNullSafe(written[name])
        condition = same if condition is None else condition & same
    return new.join(written, condition, "left_anti")


def rescued(document: Column, known: tuple[str, ...]) -> Column:
    """The fields of a JSON object ``document`` (a variant) that are not in ``known``, as JSON text,
    or null when it has none (or is not an object): an ingest hop's ``_rescued`` column, so a
    field the schema does not have yet is kept, not dropped (Auto Loader's rescued-data column).

    Keys come out sorted and numbers normalised (``1.5e3`` is ``1500.0``): the values, not the
    line's spelling, are what is kept; the line itself stays in its landing file.
    """
    names = F.array(*[F.lit(name) for name in known])
    extra = F.map_filter(
        F.try_variant_get(document, "$", "map<string,variant>"),
        lambda key, _value: ~F.array_contains(names, key),
    )
    return F.when(F.size(extra) > 0, F.to_json(extra))
