"""Reading change events in an ingest hop's parse: Debezium's envelope (and the flat records of its
``ExtractNewRecordState`` transform) to flat columns, with a log position that orders one key's
changes for every connector Debezium has for a relational database, and for MongoDB."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F

# The type of ``position``: the connector's place in its database's log, compared field by field
# (as Spark orders structs). ``log`` is the part that is text (a binlog file, an LSN written in
# fixed-width hex), ``offset`` a number within or after it, ``serial`` the order of events that
# share both.
POSITION = "struct<log:string,offset:decimal(38,0),serial:bigint>"
# A decimal(38,0) holds any log position a connector writes (Oracle's SCN included).
_NUMBER = "decimal(38,0)"


class _Event:
    """The parts of a Debezium change event that its columns are read from: its ``envelope`` (a
    variant: the message's ``payload``, or the message), whether it is a record flattened by
    ``ExtractNewRecordState`` (``flat``), its operation (``op``) and its row image (``image``).

    Each part is an expression over the ones before it; :func:`with_debezium_columns` makes each
    a column in turn, so that no expression is written out again in every one that uses it."""

    def __init__(self, envelope: Column):
        self.envelope = envelope
        self.flat = (
            F.try_variant_get(envelope, "$.op", "variant").isNull()
            & F.try_variant_get(envelope, "$.after", "variant").isNull()
            & F.try_variant_get(envelope, "$.before", "variant").isNull()
        )
        self.tops = self.top_fields()
        self.sources = self.source_fields()
        self.op = self.operation()
        self.image = self.row_image()

    def operation(self) -> Column:
        deleted = F.try_variant_get(self.envelope, "$.__deleted", "string")
        return F.when(self.flat & (F.lower(deleted) == "true"), F.lit("d")).otherwise(
            F.coalesce(
                self.top("op", "string"), F.when(self.flat & deleted.isNotNull(), F.lit("u"))
            )
        )

    def row_image(self) -> Column:
        before = F.try_variant_get(self.envelope, "$.before", "variant")
        after = F.try_variant_get(self.envelope, "$.after", "variant")
        return F.when(self.flat, self.envelope).otherwise(
            _document(F.when(self.op == "d", before).otherwise(after))
        )

    def top(self, name: str, kind: str) -> Column:
        """An envelope field (``__<name>`` in a flat record)."""
        return _field(self.tops, name, kind)

    def source(self, name: str, kind: str) -> Column:
        """A field of the envelope's ``source`` (``__source_<name>``, or ``__<name>`` as
        ``add.fields`` names a source field without its prefix, in a flat record)."""
        return _field(self.sources, name, kind)

    def top_fields(self) -> Column:
        """The envelope's fields by name (a map; a flat record's ``__`` fields without it)."""
        fields = F.try_variant_get(self.envelope, "$", "map<string,variant>")
        return F.when(self.flat, _unprefixed(fields, "__")).otherwise(fields)

    def source_fields(self) -> Column:
        """The ``source`` fields by name (a map; in a flat record, its ``__source_`` fields and
        then its other ``__`` ones, without the prefix)."""
        fields = F.try_variant_get(self.envelope, "$", "map<string,variant>")
        return F.when(
            self.flat,
            F.map_concat(_unprefixed(fields, "__source_"), _unprefixed(fields, "__")),
        ).otherwise(F.try_variant_get(self.envelope, "$.source", "map<string,variant>"))

    def columns(self, fields: dict[str, str]) -> list[Column]:
        return [
            *[
                F.try_variant_get(_plain(self.image, name), "$", kind).alias(name)
                for name, kind in fields.items()
            ],
            self.op.alias("op"),
            self.source("connector", "string").alias("connector"),
            log_position(self.source).alias("position"),
            self.source("lsn", "long").alias("lsn"),
            _changed_at(self.flat, self.top, self.source).alias("changed_at"),
        ]


# MongoDB's extended JSON wraps a value whose type JSON lacks: {"$numberLong": "1004"}.
_EXTENDED = ("$numberLong", "$numberInt", "$numberDouble", "$numberDecimal", "$oid")


def _plain(image: Column, name: str) -> Column:
    """Field ``name`` of a row image (a variant), unwrapped from MongoDB's extended JSON."""
    field = F.try_variant_get(image, f"$['{name}']", "variant")
    return F.coalesce(
        *[F.try_variant_get(field, f"$['{wrapper}']", "variant") for wrapper in _EXTENDED], field
    )


def _field(fields: Column, name: str, kind: str) -> Column:
    return F.try_variant_get(F.element_at(fields, F.lit(name)), "$", kind)


def _unprefixed(fields: Column, prefix: str) -> Column:
    """The entries of map ``fields`` whose key starts with ``prefix``, without it (of two that
    become one key, the first)."""
    chosen = F.map_filter(fields, lambda key, _value: key.startswith(prefix))
    entries = F.transform(
        F.map_entries(chosen),
        lambda entry: F.struct(
            F.substring(entry["key"], len(prefix) + 1, 1000).alias("key"),
            entry["value"].alias("value"),
        ),
    )
    return F.map_from_entries(
        F.filter(
            entries,
            lambda entry, index: (
                F.array_position(F.transform(entries, lambda other: other["key"]), entry["key"])
                == index + 1
            ),
        )
    )


def _envelope(document: Column) -> Column:
    return F.coalesce(F.try_variant_get(document, "$.payload", "variant"), document)


def debezium_columns(document: Column, fields: dict[str, str]) -> list[Column]:
    """The columns of a Debezium change event ``document`` (a variant: the envelope, a message
    whose ``payload`` is one, or a record flattened by ``ExtractNewRecordState``):

    - each of ``fields`` (name: Spark type) from ``after``, or from ``before`` for a delete (a
      MongoDB event's document, a JSON string, is parsed first); a flat record's own fields;
    - ``op``: ``c`` insert, ``u`` update, ``d`` delete, ``r`` snapshot read, ``t`` truncate (a
      flat record's ``__op``, ``d`` where ``__deleted`` is ``"true"``);
    - ``connector``: ``source.connector`` (``postgresql``, ``mysql``, ``sqlserver``, ...);
    - ``position``: where the change is in its database's log (:data:`POSITION`), from the
      source fields of the connector that wrote it, so that the changes of one key sort in the
      order the database made them (docs/guides/changes.md lists the fields of each);
    - ``lsn``: PostgreSQL's ``source.lsn`` (a long; null for other connectors);
    - ``changed_at``: the envelope's ``ts_us``, ``ts_ns`` or ``ts_ms`` (the first present) as a
      timestamp (a flat record's ``__ts_*``, else its ``__source_ts_*``).

    A field, ``op``, ``position`` or ``changed_at`` that is missing or of another type is null:
    the parse's checks quarantine such a row. For a parse of more than a few fields,
    :func:`with_debezium_columns` gives the same columns as a smaller plan.
    """
    return _Event(_envelope(document)).columns(fields)


# The working columns of with_debezium_columns.
ENVELOPE, FLAT, OP, IMAGE = "_dbz_envelope", "_dbz_flat", "_dbz_op", "_dbz_image"
TOPS, SOURCES = "_dbz_tops", "_dbz_sources"


def with_debezium_columns(frame, document: Column, fields: dict[str, str], keep_image=False):
    """``frame`` with :func:`debezium_columns` of ``document`` added, each part of the event made
    a column once (so a parse of many fields stays small enough for Spark to compile); with
    ``keep_image``, the row image too (a variant column named :data:`IMAGE`)."""
    event = _Event(F.col(ENVELOPE))
    staged = frame.withColumn(ENVELOPE, _envelope(document)).withColumn(FLAT, event.flat)
    event.flat = F.col(FLAT)
    staged = staged.withColumn(TOPS, event.top_fields()).withColumn(SOURCES, event.source_fields())
    event.tops, event.sources = F.col(TOPS), F.col(SOURCES)
    staged = staged.withColumn(OP, event.operation())
    event.op = F.col(OP)
    staged = staged.withColumn(IMAGE, event.row_image())
    event.image = F.col(IMAGE)
    added = staged.select("*", *event.columns(fields))
    return added.drop(ENVELOPE, FLAT, TOPS, SOURCES, OP, *([] if keep_image else [IMAGE]))


def _document(value: Column) -> Column:
    """A row image: an object as it is, a JSON string (MongoDB's documents) parsed."""
    return F.when(
        F.schema_of_variant(value) == "STRING",
        F.try_parse_json(F.try_variant_get(value, "$", "string")),
    ).otherwise(value)


def _changed_at(
    flat: Column, top: Callable[[str, str], Column], source: Callable[[str, str], Column]
) -> Column:
    """The envelope's time; a flat record's ``__ts_*``, else its ``__source_ts_*``."""

    def stamp(field: Callable[[str, str], Column]) -> Column:
        return F.coalesce(
            F.timestamp_micros(field("ts_us", "long")),
            F.timestamp_micros(F.floor(field("ts_ns", "long") / 1000).cast("long")),
            F.timestamp_millis(field("ts_ms", "long")),
        )

    return F.when(flat, F.coalesce(stamp(top), stamp(source))).otherwise(stamp(top))


def log_position(source: Callable[[str, str], Column]) -> Column:
    """The :data:`POSITION` of an event from ``source(field, type)``, by the fields its connector
    writes (each connector's are its own, so their presence says which wrote it):

    - PostgreSQL: ``lsn`` (each change's own LSN) as the offset;
    - MySQL and MariaDB: ``file`` (the binlog file), ``pos`` (the event's position in it) and
      ``row`` (the row within the event);
    - SQL Server: ``commit_lsn`` then ``change_lsn`` (fixed-width hex, so they sort as text),
      then ``event_serial_no``;
    - Db2: ``commit_lsn`` then ``change_lsn``;
    - Oracle: ``commit_scn`` (``scn`` for a snapshot read) as text padded to sort as a number,
      then ``scn``, then ``ssn`` (the statement's place in its redo record);
    - MongoDB: ``ts_ms`` of the oplog entry (whole seconds) then ``ord`` (its order within the
      second).

    Null when none of them is there.
    """

    def position(log: Column, offset: Column, serial: Column) -> Column:
        return F.struct(
            log.cast("string").alias("log"),
            offset.cast(_NUMBER).alias("offset"),
            serial.cast("bigint").alias("serial"),
        )

    zero = F.lit(0)
    lsn, file, pos = source("lsn", _NUMBER), source("file", "string"), source("pos", _NUMBER)
    commit_lsn, change_lsn = source("commit_lsn", "string"), source("change_lsn", "string")
    scn, commit_scn = source("scn", _NUMBER), source("commit_scn", _NUMBER)
    ordinal = source("ord", "long")
    return (
        F.when(lsn.isNotNull(), position(F.lit(""), lsn, zero))
        .when(
            file.isNotNull() & pos.isNotNull(),
            position(file, pos, F.coalesce(source("row", "long"), zero)),
        )
        .when(
            commit_lsn.isNotNull(),
            position(
                F.concat(commit_lsn, F.lit("/"), F.coalesce(change_lsn, F.lit(""))),
                zero,
                F.coalesce(source("event_serial_no", "long"), zero),
            ),
        )
        .when(
            scn.isNotNull(),
            position(
                F.lpad(F.coalesce(commit_scn, scn).cast("string"), 38, "0"),
                scn,
                F.coalesce(source("ssn", "long"), zero),
            ),
        )
        .when(ordinal.isNotNull(), position(F.lit(""), source("ts_ms", _NUMBER), ordinal))
        .otherwise(F.lit(None).cast(POSITION))
    )


OPERATIONS = ("c", "u", "d", "r", "t")


def is_tombstone(value: Column, document: Column) -> Column:
    """A record with no value (a Kafka tombstone), a ``null`` line, or an envelope whose
    ``payload`` is null (a tombstone written by the JSON converter with schemas)."""
    envelope = F.coalesce(F.try_variant_get(document, "$.payload", "variant"), document)
    return value.isNull() | F.coalesce(F.is_variant_null(envelope), F.lit(False))


def parse_debezium(lines, fmt):
    """``format: debezium``: each line (or a topic's record) a Debezium change event, to the
    declared columns (from the row image), ``op``, ``position`` and ``changed_at``
    (:func:`debezium_columns`), ``_rescued`` (the image's fields no column names), ``raw_line``,
    ``_source_file``, ``reason`` and :data:`SKIPPED` (a tombstone).

    A reason names what is wrong: not JSON, no operation, an operation it does not know, no log
    position or time, a key that is missing (a truncate has none), a field of another type."""
    from spark_jobs.model.formats import RESCUED, SKIPPED

    doc = F.col("_doc")
    split = lines.select("value", "_source_file", F.try_parse_json(F.col("value")).alias("_doc"))
    columns = dict(fmt.columns)
    parsed = with_debezium_columns(split, doc, columns, keep_image=True).withColumn(
        SKIPPED, is_tombstone(F.col("value"), doc)
    )
    reason = F.when(F.col(SKIPPED), F.lit(None)).when(doc.isNull(), F.lit("not JSON"))
    reason = reason.when(
        F.try_variant_get(doc, "$", "map<string,variant>").isNull(), F.lit("not a JSON object")
    ).when(
        F.col("op").isNull(),
        F.lit(
            "no op: not a Debezium change event (a record flattened by ExtractNewRecordState "
            "needs add.fields=op)"
        ),
    )
    reason = reason.when(
        ~F.col("op").isin(*OPERATIONS),
        F.concat(F.lit("op '"), F.col("op"), F.lit(f"' is not {'|'.join(OPERATIONS)}")),
    ).when(
        F.col("position").isNull(),
        F.lit(
            "no log position: source has none of lsn, file and pos, commit_lsn, scn or ord "
            "(a flattened record needs add.fields with them)"
        ),
    )
    reason = reason.when(F.col("changed_at").isNull(), F.lit("no ts_ms, ts_us or ts_ns"))
    image = F.col(IMAGE)
    for name, type_name in fmt.columns:
        field = _plain(image, name)
        present = field.isNotNull() & ~F.is_variant_null(field)
        reason = reason.when(
            present & F.col(name).isNull(),
            F.concat(
                F.lit(f"{name} is not {'an' if type_name[0] in 'aeiou' else 'a'} {type_name}: '"),
                F.substring(F.to_json(field), 1, 80),
                F.lit("'"),
            ),
        )
    for key in fmt.keys:
        reason = reason.when(
            (F.col("op") != "t") & F.col(key).isNull(), F.lit(f"{key} (a key) is missing")
        )
    return parsed.select(
        *columns,
        "op",
        "position",
        "changed_at",
        _rescued(image, tuple(columns)).alias(RESCUED),
        F.col("value").alias("raw_line"),
        "_source_file",
        reason.alias("reason"),
        SKIPPED,
    )


def _rescued(image: Column, known: tuple[str, ...]) -> Column:
    """The image's fields that no column names, as JSON text (null when none): a flat record's
    ``__`` fields (what ExtractNewRecordState added) are no part of the row."""
    names = F.array(*[F.lit(name) for name in known])
    extra = F.map_filter(
        F.try_variant_get(image, "$", "map<string,variant>"),
        lambda key, _value: ~F.array_contains(names, key) & ~key.startswith("__"),
    )
    return F.when(F.size(extra) > 0, F.to_json(extra))


def time_in_file_name(pattern: str, time_format: str, path: Column | None = None) -> Column:
    """The time a landing file's name holds (a snapshot's, say): the first group of regular
    expression ``pattern`` in the file's name (``_source_file`` by default), read with Spark's
    datetime pattern ``time_format``; null where the name does not match."""
    name = F.regexp_extract(
        F.element_at(F.split(path if path is not None else F.col("_source_file"), "/"), -1),
        pattern,
        1,
    )
    return F.try_to_timestamp(F.nullif(name, F.lit("")), F.lit(time_format))
