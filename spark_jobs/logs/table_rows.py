"""A Delta table's rows without a JVM: delta-rs (``deltalake``, Rust) reads them as Arrow tables,
in milliseconds where a Spark session costs seconds to start. For what a person reads about a
table (the quarantine's counts and samples), never for what a hop computes.

A lake on S3 is reached with the standard ``AWS_*`` variables, as Spark's ``s3a`` is
(:func:`spark_jobs.engine.session.s3a_confs`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow

_AWS = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_REGION",
)
# Rows a change-data read returns that are in the table after the change.
_WRITTEN = ("insert", "update_postimage")


def storage_options(table: str) -> tuple[str, dict[str, str]]:
    """The table's path as delta-rs spells it and the options that reach its store."""
    if not table.startswith(("s3://", "s3a://")):
        return table, {}
    options = {key: os.environ[key] for key in _AWS if os.environ.get(key)}
    options["AWS_ALLOW_HTTP"] = str(
        options.get("AWS_ENDPOINT_URL", "").startswith("http://")
    ).lower()
    return "s3://" + table.split("://", 1)[1], options


def _open(table: str):
    from deltalake import DeltaTable

    path, options = storage_options(table)
    return DeltaTable(path, storage_options=options)


def scan(dt_table, columns: list[str], where=None) -> pyarrow.Table:
    """These columns of a delta-rs table's current rows (``where``: a ``pyarrow.dataset``
    expression), read on the calling thread: a read on Arrow's thread pool can leave a worker
    alive at interpreter exit, which aborts the process ("terminate called without an active
    exception", exit -6) after its work is done."""
    return _plain(
        dt_table.to_pyarrow_dataset().to_table(columns=columns, filter=where, use_threads=False)
    )


def fields_of(table: str) -> list[tuple[str, str]]:
    """The table's columns as (name, type), the type as Delta's schema spells it (``string``,
    ``long``, ``timestamp``; a nested type as its JSON)."""
    import json

    fields = []
    for column in _open(table).schema().fields:
        kind = column.type
        spelt = getattr(kind, "type", None)
        fields.append(
            (column.name, spelt if isinstance(spelt, str) else json.dumps(kind.to_json()))
        )
    return fields


def columns_of(table: str) -> list[str]:
    return [field.name for field in _open(table).schema().fields]


def read(table: str, columns: list[str], where: tuple[str, list] | None = None) -> pyarrow.Table:
    """The table's current rows, these columns only; ``where``: (column, values) keeps the rows
    whose column holds one of the values."""
    import pyarrow.compute as pc

    rows = scan(_open(table), columns)
    if where is not None:
        rows = rows.filter(pc.is_in(rows.column(where[0]), value_set=_array(where[1])))
    return rows


def written(table: str, columns: list[str], after: int | None, upto: int | None) -> pyarrow.Table:
    """The rows the commits after version ``after`` up to ``upto`` wrote (its change feed, which
    every table of the lake keeps): what one run added."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if upto is None or (after is not None and upto <= after):
        return read(table, columns).slice(0, 0)
    changes = _plain(
        pa.table(
            _open(table).load_cdf(
                starting_version=0 if after is None else after + 1,
                ending_version=upto,
                columns=[*columns, "_change_type"],
            )
        )
    )
    return changes.filter(
        pc.is_in(changes.column("_change_type"), value_set=pa.array(_WRITTEN))
    ).select(columns)


def _array(values: list):
    import pyarrow as pa

    return pa.array(values)


def _plain(rows: pyarrow.Table) -> pyarrow.Table:
    """Text columns as plain strings: delta-rs gives string views, which most of Arrow's compute
    functions do not take."""
    import pyarrow as pa

    fields = [
        pa.field(field.name, pa.string()) if pa.types.is_string_view(field.type) else field
        for field in rows.schema
    ]
    return rows.cast(pa.schema(fields))
