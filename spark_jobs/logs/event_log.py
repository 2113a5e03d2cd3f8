"""The event log as a Delta table, without a JVM: delta-rs (``deltalake``) appends and reads it.

One table per lake (``_ops/events``), partitioned by pipeline, with the schema of
:data:`SCHEMA` (docs/guides/event-log.md). Spark, delta-rs, pandas and Polars read it as any
Delta table.

Each event is appended exactly once: an append names the pipeline's events transaction in Delta's
log (a ``txn`` action, Delta's application transaction id, with the next version), so two
appenders of the same pipeline that read the table at the same version cannot both commit; the
loser reads the table again and appends only what is still missing (:func:`append_missing`). A
killed appender leaves at most data files no commit names, which VACUUM removes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spark_jobs.logs.table_rows import scan, storage_options

if TYPE_CHECKING:
    import pyarrow

# Levels, mildest first.
LEVELS = ("INFO", "WARN", "ERROR")
# How many times an append is tried again after another appender of the same pipeline won.
_ATTEMPTS = 8


def _schema():
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("event_id", pa.string(), nullable=False),
            pa.field("sequence", pa.int64(), nullable=False),
            pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("pipeline", pa.string(), nullable=False),
            pa.field("hop", pa.string()),
            pa.field("batch", pa.int64()),
            pa.field("run_id", pa.string()),
            pa.field("dag_id", pa.string()),
            pa.field("dag_run_id", pa.string()),
            pa.field("task_id", pa.string()),
            pa.field("level", pa.string(), nullable=False),
            pa.field("event_type", pa.string(), nullable=False),
            pa.field("message", pa.string(), nullable=False),
            pa.field("details", pa.string()),
        ]
    )


COLUMNS = (
    "event_id",
    "sequence",
    "timestamp",
    "pipeline",
    "hop",
    "batch",
    "run_id",
    "dag_id",
    "dag_run_id",
    "task_id",
    "level",
    "event_type",
    "message",
    "details",
)


@dataclass(frozen=True)
class Event:
    """One event before it has a sequence: ``event_id`` is stable (the same happening always
    gives the same id), ``at`` in epoch seconds, ``details`` JSON-ready."""

    event_id: str
    at: float
    pipeline: str
    event_type: str
    message: str
    level: str = "INFO"
    hop: str | None = None
    batch: int | None = None
    run_id: str | None = None
    dag_id: str | None = None
    dag_run_id: str | None = None
    task_id: str | None = None
    details: dict = field(default_factory=dict)


def app_id(pipeline: str) -> str:
    """The Delta application transaction id of a pipeline's events."""
    return f"lakehouse-events/{pipeline}"


def _open(table: str):
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    path, options = storage_options(table)
    try:
        return DeltaTable(path, storage_options=options)
    except TableNotFoundError:
        return None


def _create(table: str):
    """The empty table (or the one another creator made first), opened."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    path, options = storage_options(table)
    try:
        DeltaTable.create(
            path, _schema(), mode="error", partition_by=["pipeline"], storage_options=options
        )
    except DeltaError:
        pass  # created by another appender meanwhile: open that one
    return DeltaTable(path, storage_options=options)


def _rows(events: list[Event], first_sequence: int) -> pyarrow.Table:
    import datetime as dt

    import pyarrow as pa

    ordered = sorted(events, key=lambda event: (event.at, event.event_id))
    columns: dict[str, list] = {name: [] for name in COLUMNS}
    for sequence, event in enumerate(ordered, first_sequence):
        values = {
            "event_id": event.event_id,
            "sequence": sequence,
            "timestamp": dt.datetime.fromtimestamp(event.at, dt.UTC),
            "pipeline": event.pipeline,
            "hop": event.hop,
            "batch": event.batch,
            "run_id": event.run_id,
            "dag_id": event.dag_id,
            "dag_run_id": event.dag_run_id,
            "task_id": event.task_id,
            "level": event.level,
            "event_type": event.event_type,
            "message": event.message,
            "details": json.dumps(event.details, sort_keys=True, default=str),
        }
        for name in COLUMNS:
            columns[name].append(values[name])
    return pa.table(columns, schema=_schema())


def _logged(dt_table, pipeline: str) -> tuple[set[str], int]:
    """The ids of the pipeline's events in the table and its highest sequence (0: none)."""
    import pyarrow.compute as pc

    rows = scan(dt_table, ["event_id", "sequence"], _of(pipeline))
    top = pc.max(rows.column("sequence")).as_py() if rows.num_rows else None
    return {str(each) for each in rows.column("event_id").to_pylist()}, int(top or 0)


def append_missing(table: str, pipeline: str, events: Iterable[Event]) -> int:
    """Append the events of ``pipeline`` whose ids the table does not hold yet, numbered on from
    the pipeline's highest sequence, exactly once; how many went in."""
    from deltalake import CommitProperties, Transaction, write_deltalake
    from deltalake.exceptions import CommitFailedError

    wanted = {event.event_id: event for event in events}
    if not wanted:
        return 0
    for _attempt in range(_ATTEMPTS):
        current = _open(table) or _create(table)
        logged, top = _logged(current, pipeline)
        missing = [event for key, event in wanted.items() if key not in logged]
        if not missing:
            return 0
        version = current.transaction_version(app_id(pipeline)) or 0
        try:
            write_deltalake(
                current,
                _rows(missing, top + 1),
                mode="append",
                commit_properties=CommitProperties(
                    app_transactions=[Transaction(app_id(pipeline), version + 1)]
                ),
            )
            return len(missing)
        except CommitFailedError:
            continue  # another appender of this pipeline won: read what it wrote, then again
    raise RuntimeError(f"the event log {table} kept changing under {_ATTEMPTS} appends in a row")


@dataclass(frozen=True)
class Filter:
    """Which events :func:`read` returns; every field that is set must match."""

    pipeline: str | None = None
    hop: str | None = None
    event_types: tuple[str, ...] = ()
    level: str | None = None  # this level and the ones above it
    since_s: float | None = None
    until_s: float | None = None  # before this time
    run_id: str | None = None
    after_sequence: int | None = None  # with ``pipeline``: only the events numbered after it


def read(table: str, where: Filter = Filter()) -> list[dict]:
    """The events that match, oldest first (by time, then pipeline and sequence); each a dict of
    :data:`COLUMNS` with ``timestamp`` as epoch seconds and ``details`` parsed."""
    import functools

    import pyarrow.compute as pc

    current = _open(table)
    if current is None:
        return []
    rows = scan(current, list(COLUMNS), _of(where.pipeline) if where.pipeline else None)
    if conditions := _conditions(rows, where):
        rows = rows.filter(functools.reduce(pc.and_, conditions))
    found = []
    for row in rows.to_pylist():
        row["timestamp"] = row["timestamp"].timestamp()
        row["details"] = json.loads(row["details"]) if row["details"] else {}
        found.append(row)
    return sorted(found, key=lambda row: (row["timestamp"], row["pipeline"], row["sequence"]))


def _conditions(rows: pyarrow.Table, where: Filter) -> list:
    """The filter's conditions on ``rows``, one boolean array each."""
    import pyarrow.compute as pc

    def text(name: str):
        return rows.column(name).cast("string")

    seconds = pc.divide(pc.cast(rows.column("timestamp").cast("int64"), "double"), 1e6)
    chosen = [
        (where.hop, lambda: pc.equal(text("hop"), where.hop)),
        (where.run_id, lambda: pc.equal(text("run_id"), where.run_id)),
        (where.event_types, lambda: pc.is_in(text("event_type"), _strings(where.event_types))),
        (where.level, lambda: pc.is_in(text("level"), _strings(levels_from(where.level or "")))),
        (where.since_s is not None, lambda: pc.greater_equal(seconds, where.since_s)),
        (where.until_s is not None, lambda: pc.less(seconds, where.until_s)),
        (
            where.after_sequence is not None,
            lambda: pc.greater(rows.column("sequence"), where.after_sequence),
        ),
    ]
    return [condition() for wanted, condition in chosen if wanted]


def levels_from(level: str) -> tuple[str, ...]:
    """``level`` and the levels above it."""
    return LEVELS[LEVELS.index(level) :]


def _strings(values) -> pyarrow.Array:
    import pyarrow as pa

    return pa.array(list(values), pa.string())


def delete_before(table: str, pipeline: str, cutoff_s: float, dry_run: bool = False) -> int:
    """Delete the pipeline's events older than ``cutoff_s`` (epoch seconds); how many."""
    import datetime as dt

    current = _open(table)
    if current is None:
        return 0
    moment = dt.datetime.fromtimestamp(cutoff_s, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    predicate = f"pipeline = '{_quoted(pipeline)}' AND timestamp < '{moment}'"
    if dry_run:
        import pyarrow.compute as pc

        rows = scan(current, ["timestamp"], _of(pipeline))
        stamps = pc.divide(pc.cast(rows.column("timestamp").cast("int64"), "double"), 1e6)
        return int(pc.sum(pc.less(stamps, cutoff_s)).as_py() or 0)
    return int(current.delete(predicate).get("num_deleted_rows") or 0)


def compact(table: str, retention_hours: int = 168) -> dict:
    """Compact the table's small files and vacuum files unreferenced for ``retention_hours``:
    files compacted away and files vacuumed."""
    current = _open(table)
    if current is None:
        return {"files_compacted": 0, "files_vacuumed": 0}
    compacted = current.optimize.compact()
    vacuumed = current.vacuum(
        retention_hours=retention_hours, dry_run=False, enforce_retention_duration=False
    )
    return {
        "files_compacted": int(compacted.get("numFilesRemoved") or 0),
        "files_vacuumed": len(vacuumed),
    }


def _of(pipeline: str):
    """The dataset expression that keeps one pipeline's rows (its partition)."""
    import pyarrow.dataset as ds

    return ds.field("pipeline") == pipeline


def _quoted(text: str) -> str:
    return text.replace("'", "''")
