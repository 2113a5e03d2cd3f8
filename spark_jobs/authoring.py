"""What a pipeline's own modules import from the platform: this module, and nothing else.

A pipeline folder holds a spec, a pipeline module (``TRANSFORMS``, ``split_ingested``, ...: see
the manual's "Pipeline modules" reference), its transforms and its sample module. They use:

- :data:`RESCUED` and :func:`rescued` in an ingest hop's parse: the fields of a JSON object the
  schema does not know, kept as JSON text in the ``_rescued`` column instead of dropped;
- :func:`debezium_columns` and :func:`with_debezium_columns` in a hand-written parse of a
  change feed: a Debezium event's row, operation, log position and time as flat columns, for a
  ``changes`` hop below (``format: debezium`` does the whole parse without code);
- :func:`time_in_file_name` in a parse whose files are each one snapshot of a table, named by
  its time (a ``changes`` hop with ``snapshots: true`` below);
- :func:`hop_table` in a pipeline module's ``STATIC_INPUTS``: another hop's table as a static
  input (a dimension a transform joins, such as a ``changes`` hop's history);
- :class:`SampleFiles` in a sample module whose pipeline has several sources: what its
  ``landing_files`` hook returns for ``lakehouse generate``;
- :class:`UsageError`, the error to raise for a problem the user can fix (one line: what is
  wrong and the fix), and :func:`files_in` and :func:`write_text` for a pipeline's static inputs
  (local or on S3, like the lake).

Importing this module imports no ``pyspark`` (a sample module runs without Spark);
:func:`rescued` imports it when called.
"""

from __future__ import annotations

from spark_jobs.control.writers.samples import SampleFiles
from spark_jobs.logs.fs import filesystem, listing, write_text
from spark_jobs.model.errors import UsageError
from spark_jobs.model.formats import RESCUED

__all__ = [
    "RESCUED",
    "SampleFiles",
    "UsageError",
    "debezium_columns",
    "files_in",
    "hop_table",
    "rescued",
    "time_in_file_name",
    "with_debezium_columns",
    "write_text",
]


def files_in(folder: str) -> list[str]:
    """The paths of the files in ``folder`` (a local path or an ``s3a://`` URI); none when it is
    missing."""
    return listing(filesystem(folder), folder)


def rescued(document, known: tuple[str, ...]):
    """The fields of a JSON object ``document`` (a variant ``Column``) that are not in ``known``,
    as JSON text, or null when it has none (or is not an object): an ingest hop's ``_rescued``
    column, so a field the schema does not have yet is kept, not dropped.

    Keys come out sorted and numbers normalised (``1.5e3`` is ``1500.0``): the values, not the
    line's spelling, are what is kept; the line itself stays in its landing file.
    """
    from spark_jobs.transforms.stamps import rescued as rescued_fields

    return rescued_fields(document, known)


def debezium_columns(document, fields: dict[str, str]) -> list:
    """The flat columns of a Debezium change event ``document`` (a variant ``Column``): each of
    ``fields`` from the row image, ``op``, ``connector``, ``position``, ``lsn`` and
    ``changed_at`` (:func:`spark_jobs.transforms.changes.debezium_columns`)."""
    from spark_jobs.transforms.changes import debezium_columns as columns

    return columns(document, fields)


def with_debezium_columns(frame, document, fields: dict[str, str]):
    """``frame`` with :func:`debezium_columns` of ``document`` added, as a plan Spark compiles
    however many fields there are
    (:func:`spark_jobs.transforms.changes.with_debezium_columns`)."""
    from spark_jobs.transforms.changes import with_debezium_columns as added

    return added(frame, document, fields)


def time_in_file_name(pattern: str, time_format: str):
    """The time a landing file's name holds, as a column (``_source_file``'s last part, the
    first group of ``pattern``, read with Spark's datetime pattern ``time_format``): a snapshot
    feed's time when each file is one snapshot
    (:func:`spark_jobs.transforms.changes.time_in_file_name`)."""
    from spark_jobs.transforms.changes import time_in_file_name as file_time

    return file_time(pattern, time_format)


def hop_table(spark, lake, hop: str, schema: str):
    """Hop ``hop``'s table as it is now, for a pipeline module's ``STATIC_INPUTS``: read again at
    every run and backfill (a replay too), or no rows of ``schema`` (a DDL string) before the
    hop's first run has written it."""
    from spark_jobs.logs.delta_log import table_version

    path = lake.table(lake.spec.hop(hop))
    if table_version(path) is not None:
        return spark.read.format("delta").load(path)
    return spark.createDataFrame([], schema)
