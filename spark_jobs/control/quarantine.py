"""A hop's quarantine table as a person reads it (``lakehouse quarantine``, the Lakehouse page): its
rows counted by reason and by source file (by topic partition, for a hop that reads a topic), a
few rows of each reason, and for each file (or, for a hop fed by a table, the quarantined rows'
time span) the backfill that ingests it again once it is fixed. (A backfill of a topic-fed hop
reads every record the broker holds, whatever its range, and rebuilds their quarantine rows.)

Quarantine rows hold the line (or the row as JSON) in ``raw_line``, why in ``reason``, and the
hop's lineage (``_source_file`` for an ingest hop; the hop's time column for a hop whose ``drop``
rules sent rows there). Read without a JVM (:mod:`spark_jobs.logs.table_rows`): the command
answers in about a second, and the page can show it.
"""

from __future__ import annotations

from collections import Counter

from spark_jobs.control.hop_state import HopState
from spark_jobs.logs import delta_log, table_rows
from spark_jobs.logs.ops import read_record
from spark_jobs.model.errors import UsageError
from spark_jobs.model.lake import Lake
from spark_jobs.model.times import iso

DAY_MS = 24 * 3600 * 1000
SAMPLES = 3  # rows shown per reason
TOP = 20  # reasons and files listed
LINE_CHARS = 200  # of each sample's line


def _counts(values: list) -> list[dict]:
    """The most frequent values first (ties by value), :data:`TOP` of them."""
    counted = sorted(
        Counter(values).items(), key=lambda item: (-item[1], item[0] is None, item[0] or "")
    )
    return [{"value": value, "rows": rows} for value, rows in counted[:TOP]]


def _millis(column) -> list[int | None]:
    """A time column's values as epoch milliseconds (a timestamp, or milliseconds already)."""
    import pyarrow as pa

    if pa.types.is_timestamp(column.type):
        column = column.cast(pa.timestamp("ms")).cast(pa.int64())
    return column.to_pylist()


def _day_span(low: int, high: int, file: str | None) -> dict:
    return {
        "file": file,
        "start": iso(low - low % DAY_MS),
        "end": iso(high - high % DAY_MS + DAY_MS),
    }


def _ingest_again(state: HopState, files: list[dict]) -> list[dict]:
    """For each listed file of an ingest hop, the days its valid rows span in the hop's table
    (a backfill of those days reads the file again and rebuilds its quarantine rows)."""
    hop = state.hop
    names = [each["value"] for each in files if each["value"] is not None]
    table = state.table
    if not names or delta_log.table_version(table) is None:
        return []
    rows = table_rows.read(table, ["_source_file", hop.time_column], where=("_source_file", names))
    spans: dict[str, tuple[int, int]] = {}
    for name, moment in zip(
        rows.column("_source_file").to_pylist(), _millis(rows.column(hop.time_column)), strict=True
    ):
        if moment is not None:
            low, high = spans.get(name, (moment, moment))
            spans[name] = (min(low, moment), max(high, moment))
    return [_day_span(low, high, name) for name, (low, high) in sorted(spans.items())]


def _samples(rows: list[dict], reasons: list[dict]) -> dict[str, list[str]]:
    """The first :data:`SAMPLES` lines of each listed reason (by file, then line)."""
    wanted = {each["value"] for each in reasons if each["value"] is not None}
    ordered = sorted(
        (row for row in rows if row["reason"] in wanted),
        key=lambda row: (row.get("_source_file") or "", row["raw_line"] or ""),
    )
    samples: dict[str, list[str]] = {}
    for row in ordered:
        picked = samples.setdefault(row["reason"], [])
        if len(picked) < SAMPLES:
            line = row["raw_line"] or ""
            # cut: says so
            picked.append(line[:LINE_CHARS] + ("\u2026" if len(line) > LINE_CHARS else ""))
    return samples


def summary(state: HopState, run: dict | None = None) -> dict:
    """What the hop's quarantine holds (of one ``run``'s writes, if given): counts by reason and by
    source file, samples per reason, and the backfills that ingest the listed files again."""
    hop = state.hop
    table = state.quarantine
    document = {
        "hop": hop.name,
        "table": table,
        "version": delta_log.table_version(table),
        "run_id": run["run_id"] if run else None,
        "rows": 0,
        "reasons": [],
        "files": [],
        "samples": {},
        "ingest_again": [],
    }
    if delta_log.table_version(table) is None:
        return document
    present = table_rows.columns_of(table)
    columns = [
        name for name in ("reason", "raw_line", "_source_file", hop.time_column) if name in present
    ]
    if run is None:
        rows = table_rows.read(table, columns)
    else:
        change = (run.get("tables") or {}).get(table) or {}
        rows = table_rows.written(
            table, columns, change.get("version_before"), change.get("version_after")
        )
    document["rows"] = rows.num_rows
    if rows.num_rows == 0:
        return document
    listed = rows.select([name for name in columns if name != hop.time_column]).to_pylist()
    document["reasons"] = _counts([row["reason"] for row in listed])
    document["samples"] = _samples(listed, document["reasons"])
    # a record's address: counted by its partition
    if "_source_file" in columns and hop.reads_topic:
        document["files"] = _counts(
            [(row["_source_file"] or "").rsplit("/", 1)[0] or None for row in listed]
        )
    elif "_source_file" in columns:
        document["files"] = _counts([row["_source_file"] for row in listed])
        document["ingest_again"] = _ingest_again(state, document["files"])
    elif hop.time_column in columns:
        moments = [moment for moment in _millis(rows.column(hop.time_column)) if moment is not None]
        document["ingest_again"] = [_day_span(min(moments), max(moments), None)] if moments else []
    return document


def report(lake: Lake, hop: str | None = None, run: str | None = None) -> dict:
    """``lakehouse quarantine``: the :func:`summary` of each hop with a quarantine table (or of
    ``hop``; of one ``run``'s writes, if given); a :class:`UsageError` naming the fix otherwise."""
    hops = (
        [lake.spec.hop(hop)]
        if hop and hop != "all"
        else [each for each in lake.spec.hops if each.quarantine]
    )
    if not hops or not hops[0].quarantine:
        raise UsageError(
            f"hop {hops[0].name if hops else hop} has no quarantine table: give it "
            "`quarantine:` in the spec"
            if hops
            else f"pipeline {lake.spec.name} has no hop with a quarantine table"
        )
    records = {each.name: read_record(lake, run, each.name) for each in hops} if run else {}
    if run and not any(records.values()):
        raise UsageError(
            f"no run {run!r} of {', '.join(each.name for each in hops)}: see `lakehouse "
            f"status {lake.spec.name}`"
        )
    return {
        "pipeline": lake.spec.name,
        "run_id": run,
        "hops": [
            summary(HopState(lake, each), records.get(each.name))
            for each in hops
            if not run or records.get(each.name)
        ],
    }
