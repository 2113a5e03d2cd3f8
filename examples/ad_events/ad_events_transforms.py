"""The ``ad_events`` transforms (docs/examples/ad_events.md).

Each function takes and returns DataFrames and never reads, writes, creates a session or
asks whether its input is streaming, so run-once streams and batch backfills share them.
"""

from __future__ import annotations

import functools
import operator

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.authoring import RESCUED, rescued

EVENT_TYPES = ("view", "click", "purchase")
REQUIRED_FIELDS = ("ad_id", "event_type", "event_time")
STRING_FIELDS = ("user_id", "page_id", "ad_id", "ad_type", "event_type", "ip_address")
MAX_LINE_BYTES = 1 << 20  # an event is a few hundred bytes; longer lines go to quarantine
EVENT_TIME_RANGE = (946_684_800_000, 4_102_444_800_000)  # epoch ms of 2000-01-01 and 2100-01-01
# schema_of_variant of a JSON number
_NUMBER_KIND = "^(BIGINT|INT|SMALLINT|TINYINT|DOUBLE|FLOAT|DECIMAL\\(.*)$"

KNOWN_FIELDS = (*STRING_FIELDS, "event_time")  # any other field of an event is kept in RESCUED
# ``schema_of_variant`` of an event with exactly the known fields, each of its type (keys sorted),
# as the generator and most sources write them: such a line is typed and has nothing to rescue.
PLAIN_SHAPE = (
    "OBJECT<"
    + ", ".join(
        f"{name}: {'BIGINT' if name == 'event_time' else 'STRING'}" for name in sorted(KNOWN_FIELDS)
    )
    + ">"
)
BRONZE_COLUMNS = (
    "user_id",
    "page_id",
    "ad_id",
    "ad_type",
    "event_type",
    "event_time",
    "event_ts",
    "ip_address",
    "event_date",
    RESCUED,
    "_source_file",
)
QUARANTINE_COLUMNS = ("raw_line", "reason", "_source_file")
SILVER_COLUMNS = (
    "campaign_id",
    "ad_id",
    "user_id",
    "page_id",
    "ad_type",
    "event_time",
    "event_ts",
    "ip_address",
    "event_date",
)
GOLD_COLUMNS = ("campaign_id", "window_start", "window_end", "views")


def _kind(parsed: Column, name: str) -> Column:
    """The JSON type of a top-level field (``STRING``, ``BIGINT``, ``OBJECT<...>``),
    null when absent.
    """
    return F.schema_of_variant(F.variant_get(parsed, f"$.{name}", "variant"))


def _is_text(kind: Column) -> Column:
    """True when a field's :func:`_kind` is a JSON string or null."""
    return kind.isin("STRING", "VOID")


def _is_number(kind: Column) -> Column:
    """True when a field's :func:`_kind` is a JSON number (not a string that looks like one)."""
    return kind.rlike(_NUMBER_KIND)


def _typed(parsed: Column) -> Column:
    """True when every known field present has its type: strings are strings, the time a number.

    Computed once per line, before the rules: a valid line then skips the per-field type rules,
    which name the first field that fails (each reading the field again) only for lines that fail.
    """
    checks = [_is_text(_kind(parsed, name)) for name in STRING_FIELDS] + [
        _is_number(_kind(parsed, "event_time"))
    ]
    return functools.reduce(operator.and_, [F.coalesce(check, F.lit(True)) for check in checks])


def _invalid_reason(
    line: Column,
    parsed: Column,
    fields: dict[str, Column],
    event_time: Column,
    typed: Column,
    plain: Column,
) -> Column:
    """Why a parsed line is not an event, or null when it is one (first failed rule wins).

    A line with bytes that are not UTF-8 is quarantined (its ``raw_line`` shows them as
    U+FFFD; the source file keeps the bytes) rather than stored with them changed. Fields
    that must be strings and hold an object, array or number are quarantined too; unknown extra
    fields are ignored. ``event_time`` must lie in [2000-01-01, 2100-01-01).

    ``parsed``, ``fields`` (the string fields, by name), ``event_time``, ``typed``
    (:func:`_typed`) and ``plain`` (the line is of :data:`PLAIN_SHAPE`) are columns computed
    once per line. A plain line has every required field, so only another line looks for a
    missing one (reading the time again, as text: present but not a number is another reason);
    whether the document is an object is asked only when a required field is missing (a
    document that is not an object has none), and which field has the wrong type only when
    ``typed`` is false, since those checks read the document again.
    """
    required = [
        fields[name] if name in fields else F.try_variant_get(parsed, f"$.{name}", "string")
        for name in REQUIRED_FIELDS
    ]
    missing = F.when(~F.schema_of_variant(parsed).startswith("OBJECT"), F.lit("not a JSON object"))
    for name, value in zip(REQUIRED_FIELDS, required):
        missing = missing.when(value.isNull(), F.lit(f"missing {name}"))
    first, *rest = STRING_FIELDS
    mistyped = F.when(~_is_text(_kind(parsed, first)), F.lit(f"{first} is not a string"))
    for name in rest:
        mistyped = mistyped.when(~_is_text(_kind(parsed, name)), F.lit(f"{name} is not a string"))
    mistyped = mistyped.when(
        ~_is_number(_kind(parsed, "event_time")), F.lit("event_time is not a number")
    )
    return (
        F.when(
            F.octet_length(line) > MAX_LINE_BYTES, F.lit(f"line longer than {MAX_LINE_BYTES} bytes")
        )
        .when(~F.is_valid_utf8(line), F.lit("not valid UTF-8"))
        .when(parsed.isNull(), F.lit("not a JSON object"))
        .when(~plain & F.greatest(*[value.isNull() for value in required]), missing)
        .when(~typed, mistyped)
        .when(
            ~fields["event_type"].isin(*EVENT_TYPES),
            F.lit("event_type is not one of " + "|".join(EVENT_TYPES)),
        )
        .when(
            (event_time < EVENT_TIME_RANGE[0]) | (event_time >= EVENT_TIME_RANGE[1]),
            F.lit("event_time out of range (2000..2100)"),
        )
    )


def parse_events(lines: DataFrame) -> DataFrame:
    """Parse JSON lines into typed events plus a ``reason`` column (null for a valid event).

    Each line is parsed once, into a variant column that every field and rule then reads
    (an expression used in many places would parse the line again for each: 5x slower).

    :param lines: ``value`` (one raw line) and ``_source_file``.
    :return: the bronze columns, ``raw_line`` and ``reason``; ``_rescued`` holds the fields an
        event has beyond :data:`KNOWN_FIELDS` as JSON text (null when none).
    """
    doc, plain = F.col("_doc"), F.col("_plain")
    fields = (
        lines.select("value", "_source_file", F.try_parse_json(F.col("value")).alias("_doc"))
        .select(
            "value",
            "_source_file",
            "_doc",
            (F.schema_of_variant(doc) == PLAIN_SHAPE).alias("_plain"),
        )
        .select(
            "value",
            "_source_file",
            "_doc",
            "_plain",
            *[F.try_variant_get(doc, f"$.{name}", "string").alias(name) for name in STRING_FIELDS],
            F.try_variant_get(doc, "$.event_time", "double").alias("_event_time"),
            # A line of PLAIN_SHAPE (one look at the whole document) skips the per-field type
            # checks and the rescued map: it is typed and has no other field.
            F.when(plain, F.lit(True)).otherwise(_typed(doc)).alias("_typed"),
            F.when(~plain, rescued(doc, KNOWN_FIELDS)).alias(RESCUED),
        )
    )
    typed = fields.select(
        *STRING_FIELDS,
        F.col("_event_time").cast("long").alias("event_time"),
        "value",
        F.col("_source_file"),
        _invalid_reason(
            F.col("value"),
            doc,
            {name: F.col(name) for name in STRING_FIELDS},
            F.col("_event_time"),
            F.col("_typed"),
            plain,
        ).alias("reason"),
        RESCUED,
    ).select(
        *STRING_FIELDS,
        "event_time",
        RESCUED,
        # Only a quarantined line keeps its text: valid events are their fields, and a batch
        # held in memory for the two writes stays small.
        F.when(F.col("reason").isNotNull(), F.make_valid_utf8(F.col("value"))).alias("raw_line"),
        "_source_file",
        "reason",
    )
    event_ts = F.timestamp_millis(F.col("event_time"))
    return typed.withColumn("event_ts", event_ts).withColumn("event_date", F.to_date(event_ts))


def valid_events(parsed: DataFrame) -> DataFrame:
    """The rows of :func:`parse_events` that are events, with the bronze columns."""
    return parsed.where(F.col("reason").isNull()).select(*BRONZE_COLUMNS)


def invalid_lines(parsed: DataFrame) -> DataFrame:
    """The rows of :func:`parse_events` that are not events, with the quarantine columns."""
    return parsed.where(F.col("reason").isNotNull()).select(*QUARANTINE_COLUMNS)


def enrich_views(events: DataFrame, campaigns: DataFrame) -> DataFrame:
    """``view`` events with their ``campaign_id`` (null when the ad has no campaign).

    A left join keeps unmatched views visible in silver instead of dropping them silently.
    """
    views = events.where(F.col("event_type") == "view")
    return views.join(campaigns.select("ad_id", "campaign_id"), on="ad_id", how="left").select(
        *SILVER_COLUMNS
    )


def count_views(
    views: DataFrame, window: str = "10 seconds", allowed_lateness: str = "1 minute"
) -> DataFrame:
    """Views per campaign in tumbling event-time windows, with a watermark for late events.

    Views without a campaign are not counted; silver keeps them for inspection.
    """
    windowed = (
        views.where(F.col("campaign_id").isNotNull())
        .withWatermark("event_ts", allowed_lateness)
        .groupBy(F.window("event_ts", window).alias("window"), F.col("campaign_id"))
        .agg(F.count(F.lit(1)).alias("views"))
    )
    return windowed.select(
        "campaign_id",
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        "views",
    )
