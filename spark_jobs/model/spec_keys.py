"""The spec's keys, declared once: what each means, which hops take it and what its value is.

:func:`spark_jobs.model.spec.load_spec` refuses a key declared nowhere here (with the nearest
valid one: a misspelled ``allowed_latenes`` is an error, not a silent default) and a value of
the wrong type; the manual's spec reference (``docs/reference/spec.md``) is generated from
these tables, the defaults from :class:`~spark_jobs.model.spec.PipelineSpec`'s fields.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
from dataclasses import dataclass

from spark_jobs.model.errors import UsageError
from spark_jobs.model.times import duration_ms

# A pipeline's name: it names modules, tables and DAG ids.
PIPELINE_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")

# What a value is; each a check and the hint its error gives.
TEXT, COUNT, DURATION, COLUMNS, HOPS, INPUTS, DATE, LIST, MAPPING, COLUMN_OR_COLUMNS, FLAG = (
    "text",
    "count",
    "duration",
    "columns",
    "hop or hops",
    "inputs",
    "date",
    "list",
    "mapping",
    "column or columns",
    "flag",
)


@dataclass(frozen=True)
class Key:
    """One key of a spec.

    :param kinds: for a hop key, the kinds that take it (``all``: every kind).
    :param required: the spec (or hop) must give it.
    """

    name: str
    value: str
    meaning: str
    kinds: str = "all"
    required: bool = False
    example: str = ""  # for its error's fix, when not its type's


PIPELINE_KEYS: tuple[Key, ...] = (
    Key(
        "name",
        TEXT,
        "the pipeline's name: lower-case letters, digits and `_`; it names the DAGs "
        "(`<name>__stream`, ...)",
        required=True,
    ),
    Key(
        "hops",
        LIST,
        "the hops, in order (below); a hop's upstreams are listed above it",
        required=True,
    ),
    Key("description", TEXT, "shown in the DAGs' documentation and on the Lakehouse page"),
    Key("landing", TEXT, "the landing folder of the ingest hops that name none of their own"),
    Key(
        "inputs",
        INPUTS,
        "the pipeline's static inputs by name (`campaigns: landing/campaigns`), read by its "
        "pipeline module through `lake.input(name)`",
    ),
    Key("campaigns", TEXT, "older specs' name of `inputs: {campaigns: ...}`, read as that"),
    Key(
        "schedule",
        TEXT,
        "the stream DAG's schedule (cron or an Airflow preset), with `trigger: schedule`",
    ),
    Key(
        "trigger",
        TEXT,
        "what starts the stream DAG: `schedule` (its cron `schedule`) or `arrival` (new landing "
        "files or topic records, watched by Airflow's triggerer without a JVM: "
        "[Runs on arrival](../guides/arrival.md))",
        example="`arrival`",
    ),
    Key(
        "min_interval",
        DURATION,
        "with `trigger: arrival`: the least time between two runs' starts; what arrives sooner "
        "waits and goes into one next run",
        example="`5 minutes`",
    ),
    Key(
        "max_wait",
        DURATION,
        "with `trigger: arrival`: a run also starts this long after the last tick when nothing "
        "arrived (a fallback for an arrival the watcher could not see); none by default",
        example="`1 hour`",
    ),
    Key("backfill_start", DATE, "the first data interval of the daily backfill DAG"),
    Key(
        "shuffle_partitions",
        COUNT,
        "Spark's shuffle partitions, pinned in each stateful hop's checkpoint at its first run",
    ),
    Key(
        "window",
        DURATION,
        "the event-time window of the hops that set none of their own (`spec.window` in a "
        "transform)",
    ),
    Key(
        "allowed_lateness",
        DURATION,
        "the watermark delay of the stateful hops that set none of their own "
        "(`spec.allowed_lateness`); rows later than it are dropped by the stream and counted",
    ),
    Key(
        "min_batches_to_retain",
        COUNT,
        "how many batches each checkpoint keeps (Spark's `minBatchesToRetain`): "
        "how far back a rollback can reach",
    ),
    Key("source_log_compact_interval", COUNT, "how often the file source's log is compacted"),
    Key(
        "compact_min_files",
        COUNT,
        "`lakehouse maintain` compacts a table (Delta OPTIMIZE) once it has this many "
        "files or more (default 8)",
    ),
    Key(
        "retention",
        MAPPING,
        "what the pipeline keeps, each bounded by the rest: `rollback`, `landing`, "
        "`expired_landing` and `records` (below)",
    ),
    Key(
        "freshness",
        DURATION,
        "how old a hop's newest commit may get before it is stale (red on the Lakehouse "
        "page; the stream DAG's deadline alert)",
        example="`15 minutes`",
    ),
    Key(
        "notify",
        LIST,
        "the Airflow notifiers this pipeline's alerts go to, instead of `LAKEHOUSE_NOTIFIERS`'s: "
        "each a mapping of `class` (a `BaseNotifier`'s import path) and its arguments "
        "([Alerts](../guides/airflow.md#alerts))",
        example="`[{class: ..., to: team@example.com}]`",
    ),
)

# The keys under ``retention:`` (spark_jobs/model/retention.py).
RETENTION_KEYS: tuple[Key, ...] = (
    Key(
        "rollback",
        DURATION,
        "how far back in time a rollback must reach (at most 30 days, Delta's log "
        "retention): the checkpoints keep the batches the schedule makes in a window that long, "
        "wherever it starts (100 at least, unless `min_batches_to_retain` gives a number), and "
        "a spec whose `min_batches_to_retain` is fewer is refused with the number it needs",
        example="`7 days`",
    ),
    Key(
        "landing",
        DURATION,
        "how long `lakehouse maintain` keeps a landing file once every hop reading it has "
        "committed it and no rollback inside the window reads it again; then it is archived or "
        "deleted (`expired_landing`). Unset: landing files are kept",
        example="`30 days`",
    ),
    Key(
        "expired_landing",
        TEXT,
        "what happens to a landing file past `landing`: `archive` (the default) moves "
        "it to `_archive/<its landing folder>/` in the lake, `delete` deletes it",
        example="`archive`",
    ),
    Key(
        "records",
        DURATION,
        "how long `lakehouse maintain` keeps run records, quality results, rollback "
        "journals, maintenance records and alerts (default 90 days, at least the rollback window); "
        "each hop's newest run record stays",
        example="`90 days`",
    ),
)

HOP_KEYS: tuple[Key, ...] = (
    Key(
        "name",
        TEXT,
        "the hop's name, unique in the spec; it names the checkpoint, the DAG tasks and the suite "
        "file",
        required=True,
    ),
    Key(
        "kind",
        TEXT,
        "`ingest`, `append`, `aggregate`, `join`, `changes` or `summary` ([Hops and "
        "kinds](../concepts/hops.md))",
        required=True,
    ),
    Key("table", TEXT, "the hop's Delta table", required=True),
    Key(
        "time_column",
        TEXT,
        "the event-time column a backfill's `[start, end)` applies to (epoch milliseconds "
        "or a timestamp)",
        required=True,
    ),
    Key(
        "upstream",
        HOPS,
        "the hop above whose table it reads; a list of two or more for a join",
        kinds="append, aggregate, join, changes, summary",
    ),
    Key(
        "landing",
        TEXT,
        "the hop's own landing folder (else the pipeline's `landing`)",
        kinds="ingest",
    ),
    Key(
        "topic",
        TEXT,
        "the Kafka topic the hop reads instead of a landing folder (brokers and login from the "
        "`LAKEHOUSE_KAFKA_*` settings; [Kafka](../guides/kafka.md))",
        kinds="ingest",
        example="`ad_events`",
    ),
    Key(
        "topic_pattern",
        TEXT,
        "instead of `topic`: a regular expression; the hop reads every topic it matches "
        "anywhere in the name (anchor it with `^...$` for whole names), topics created later "
        "included (Spark's `subscribePattern`)",
        kinds="ingest",
        example="`^orders-[a-z]+$`",
    ),
    Key(
        "starting_offsets",
        TEXT,
        "where a topic-fed hop's first run starts: `earliest` (default: every retained "
        "record) or `latest` (only what is produced from then on)",
        kinds="ingest",
        example="`earliest`",
    ),
    Key(
        "max_offsets_per_trigger",
        COUNT,
        "at most this many records of a topic in one batch (Spark's "
        "`maxOffsetsPerTrigger`); a run takes as many batches as it needs",
        kinds="ingest",
        example="`100000`",
    ),
    Key(
        "avro",
        MAPPING,
        "a topic's values are Avro binary: `schema` the writer's `.avsc` file (beside the spec), "
        "`header: confluent` when each value starts with Confluent's 5-byte header (no registry is "
        "asked); each value is decoded into a JSON line for `format: json` or the transform, an "
        "undecodable one quarantined ([Kafka](../guides/kafka.md))",
        kinds="ingest",
        example="`{schema: event.avsc, header: confluent}`",
    ),
    Key(
        "format",
        TEXT,
        "`csv`, `json` or `debezium`: the platform parses each row into `columns`, keeps fields "
        "no column names in `_rescued` and quarantines rows it cannot type, with the column in "
        "the reason (`debezium`: any connector's change events, with `op`, `position` and "
        "`changed_at`; an event without one of the hop's `keys` is quarantined, a tombstone "
        "skipped and counted); else each line goes to the hop's transform as it is ([Landing "
        "formats](../guides/formats.md), [Change data capture](../guides/changes.md))",
        kinds="ingest",
        example="`csv`",
    ),
    Key(
        "columns",
        MAPPING,
        "with `format`: each column's name and Spark SQL type, in the table's order",
        kinds="ingest",
        example="`{sensor_id: string, reading_time: timestamp, temperature_c: double}`",
    ),
    Key(
        "csv",
        MAPPING,
        "with `format: csv`: `header` (default true: each file's first line names its columns), "
        '`delimiter` (`,`), `quote` (`"`) and `encoding` (`utf-8`)',
        kinds="ingest",
        example="`{delimiter: ';', encoding: latin-1}`",
    ),
    Key(
        "quarantine",
        TEXT,
        "the table of rows the hop refuses (invalid lines, or rows a `drop` rule takes out)",
        kinds="ingest, append",
    ),
    Key("partition_by", COLUMNS, "the table's partition columns"),
    Key(
        "zorder_by",
        COLUMNS,
        "columns `lakehouse maintain` Z-orders the table's files by when it compacts them "
        "(Delta `OPTIMIZE ... ZORDER BY`, in the partitions with `compact_min_files` files or "
        "more): reads that filter on them skip more files. Not a partition column",
        example="`[ad_id]`",
    ),
    Key(
        "keys",
        COLUMNS,
        "the columns the MERGE matches on: an aggregate's grouping keys and `window_start`, "
        "the columns that name a row of a change feed, a summary's groups",
        kinds="aggregate, changes, summary",
    ),
    Key(
        "sequence_by",
        COLUMN_OR_COLUMNS,
        "the column that orders the changes of one key (a number or a "
        "timestamp), or a list of columns compared in turn; a change older than one applied never "
        "overwrites it ([Change data capture](../guides/changes.md))",
        kinds="changes",
        example="`lsn` or `[lsn, event_index]`",
    ),
    Key(
        "operation",
        TEXT,
        "the column that says whether a change is a delete (its values in `deletes`); "
        "without it every change is an insert or an update",
        kinds="changes",
        example="`op`",
    ),
    Key(
        "deletes",
        COLUMNS,
        "the `operation` values that mark a delete (default `[d, delete]`, Debezium's and "
        "the spelled-out one)",
        kinds="changes",
        example="`[d, D]`",
    ),
    Key(
        "measures",
        MAPPING,
        "each column of a summary hop and the Spark SQL aggregate that makes it from a group's "
        "current rows of the changes hop above (every touched group computed again per batch, so "
        "updates, deletes and truncates are exact)",
        kinds="summary",
        example="`{customers: count(*), last_change: max(changed_at)}`",
    ),
    Key(
        "snapshots",
        FLAG,
        "`true`: the upstream holds whole snapshots of the table, `sequence_by` the column with "
        "each one's time (no `operation`): a key a snapshot holds is inserted or updated at its "
        "time, a key it no longer holds is deleted then; a snapshot older than one applied is "
        "refused",
        kinds="changes",
        example="`true`",
    ),
    Key(
        "truncates",
        COLUMNS,
        "the `operation` values that mark a truncate (default `[t, truncate]`): every key live "
        "before it ends at its sequence (type 1: deleted; type 2: its version closes), and "
        "later changes apply after it",
        kinds="changes",
        example="`[t]`",
    ),
    Key(
        "unavailable_value",
        TEXT,
        "the text a connector writes for a value it did not send (default Debezium's "
        "`__debezium_unavailable_value`, for an unchanged TOASTed PostgreSQL column): such a "
        "column keeps the key's value from its latest change before that holds one; `null` "
        "turns it off",
        kinds="changes",
        example="`__debezium_unavailable_value`",
    ),
    Key(
        "except_columns",
        COLUMNS,
        "upstream columns the table leaves out (the operation column and the run's "
        "lineage `_batch_id`, `_ingest_time` are left out always)",
        kinds="changes",
    ),
    Key(
        "scd",
        COUNT,
        "`1`: the latest row of each live key; `2`: every version of each key with its validity "
        "range",
        kinds="changes",
        example="`2`",
    ),
    Key(
        "track_history",
        COLUMNS,
        "type 2: the columns whose change starts a new version (default: every value "
        "column but the time column and lineage); a change of the others "
        "updates the current version",
        kinds="changes",
    ),
    Key(
        "validity",
        COLUMNS,
        "type 2: the names of the columns that hold each version's first sequence and "
        "the sequence that ended it (null while current); default `[valid_from, valid_to]`",
        kinds="changes",
    ),
    Key(
        "unique",
        COLUMNS,
        "columns whose values the table holds once (a transform that drops resends): a batch "
        "leaves out rows whose key a backfill already wrote",
        kinds="append, join",
    ),
    Key(
        "window",
        DURATION,
        "this hop's event-time window (`spec.window` in its transform); else the "
        "pipeline's `window`",
    ),
    Key(
        "allowed_lateness",
        DURATION,
        "this hop's watermark delay (`spec.allowed_lateness` in its transform); "
        "else the pipeline's `allowed_lateness`",
    ),
    Key(
        "within",
        DURATION,
        "how far apart in event time two joined rows can be; a backfill reads its upstreams "
        "this much around its range",
        kinds="join",
        example="`1 hour`",
    ),
)

# Each value type: what a valid value is, and an example for the error's fix.
_WHAT = {
    TEXT: ("a non-empty string", "`tables/silver/orders`"),
    COUNT: ("a positive whole number", "`4`"),
    DURATION: ("a duration", "`10 seconds`"),
    COLUMNS: ("a list of column names", "`[event_date]`"),
    HOPS: ("a hop's name or a list of them", "`bronze` or `[orders, payments]`"),
    INPUTS: ("a mapping of names to paths", "`{campaigns: landing/campaigns}`"),
    DATE: ("a date", '`"2026-01-01"`'),
    LIST: ("a list", "a list of mappings"),
    MAPPING: ("a mapping", "`{rollback: 7 days}`"),
    COLUMN_OR_COLUMNS: ("a column's name or a list of them", "`lsn` or `[lsn, event_index]`"),
    FLAG: ("true or false", "`true`"),
}


def _is_duration(value: object) -> bool:
    try:
        duration_ms(str(value))
    except (ValueError, KeyError):
        return False
    return True


def _is_date(value: object) -> bool:
    try:
        dt.date.fromisoformat(str(value))
    except ValueError:
        return False
    return True


def _names(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


# Each value type's check.
_VALID = {
    TEXT: lambda value: isinstance(value, str) and value != "",
    COUNT: lambda value: isinstance(value, int) and not isinstance(value, bool) and value > 0,
    DURATION: _is_duration,
    COLUMNS: _names,
    HOPS: lambda value: isinstance(value, str) or _names(value),
    INPUTS: lambda value: (
        isinstance(value, dict) and all(isinstance(path, str) for path in value.values())
    ),
    DATE: _is_date,
    LIST: lambda value: isinstance(value, list),
    MAPPING: lambda value: isinstance(value, dict),
    COLUMN_OR_COLUMNS: lambda value: (
        (isinstance(value, str) and value != "") or (_names(value) and len(value) > 0)
    ),
    FLAG: lambda value: isinstance(value, bool),
}


def check_keys(raw: dict, keys: tuple[Key, ...], subject: str) -> None:
    """Refuse a key ``keys`` does not declare, naming the nearest declared one, and a declared
    key's value of the wrong type (``subject``: ``<file>: the pipeline`` or ``<file>:
    hop <name>``)."""
    names = [key.name for key in keys]
    for name in raw:
        if name not in names:
            near = difflib.get_close_matches(str(name), names, n=1, cutoff=0.6)
            fix = (
                f"did you mean `{near[0]}`?"
                if near
                else f"remove it (valid keys: {', '.join(names)})"
            )
            raise UsageError(f"{subject} has unknown key `{name}`: {fix}")
    for key in keys:
        value = raw.get(key.name)
        if value is not None and not _VALID[key.value](value):
            what, example = _WHAT[key.value]
            raise UsageError(
                f"{subject} has {key.name} {value!r}, not {what}: use e.g. {key.example or example}"
            )
