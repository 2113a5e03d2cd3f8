"""Landing formats the platform parses itself: an ingest hop's ``format``, ``columns`` and
``csv`` keys.

``format: csv`` reads each landing file whole, knows its header, and maps every row's fields to
the file's column names; ``format: json`` parses JSON lines (or a topic's JSON records). Both
type the declared ``columns``, keep the fields no column names in ``_rescued`` (a JSON object,
by name), and quarantine a row that cannot be typed, with a reason naming the column. Without
``format``, each line goes to the hop's transform as it is (any format the platform does not know).

Plain data: the parse itself is :mod:`spark_jobs.transforms.formats`.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from spark_jobs.model.errors import UsageError
from spark_jobs.model.kinds import HopKind

CSV, JSON, DEBEZIUM = "csv", "json", "debezium"
# The column an ingest hop keeps the fields no column names in (JSON text; Auto
# Loader's rescued data).
RESCUED = "_rescued"
FORMATS = (CSV, JSON, DEBEZIUM)
# The columns ``format: debezium`` adds to the row's own: the operation, the log position that
# orders one key's changes, and the change's time (spark_jobs.transforms.changes).
DEBEZIUM_COLUMNS = ("op", "position", "changed_at")
# The column of a parse whose true rows are neither the table's nor the quarantine's: counted
# and left out (a Debezium tombstone, the null value that follows a delete for log compaction).
SKIPPED = "_skipped"

# The Spark SQL types a column may declare: what ``try_cast`` (CSV) or ``try_variant_get``
# (JSON) makes of a field.
_TYPE = re.compile(
    r"(string|boolean|byte|tinyint|short|smallint|int|integer|long|bigint|float|double|date|"
    r"timestamp|timestamp_ntz|decimal(\(\s*\d+\s*(,\s*\d+\s*)?\))?)",
    re.IGNORECASE,
)
_CSV_OPTIONS = {"header": True, "delimiter": ",", "quote": '"', "encoding": "utf-8"}
# The encodings a file can be read in without the run failing on a byte it does not expect, by
# Python's name of each (the sample writer's): UTF-8 (invalid bytes are found and their rows
# quarantined) and Latin-1 (every byte is a character). Spark's ``decode`` of the others fails
# the whole query on one malformed byte.
CHARSETS = {"utf-8": "UTF-8", "iso8859-1": "ISO-8859-1"}


@dataclass(frozen=True)
class FormatSpec:
    """How an ingest hop's landing files (or a topic's records) are parsed.

    :param name: ``csv``, ``json`` or ``debezium``.
    :param columns: ``(name, Spark SQL type)`` of each column, in the table's order.
    :param keys: ``debezium``: the columns that name a row (the hop's ``keys``); an event
        without one is quarantined (a truncate has none).
    :param header: CSV: each file's first line names its columns (else ``columns`` are the
        fields in order).
    """

    name: str
    columns: tuple[tuple[str, str], ...]
    header: bool = True
    delimiter: str = ","
    quote: str = '"'
    encoding: str = "utf-8"
    keys: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _type in self.columns)

    @property
    def charset(self) -> str:
        """The encoding's name as the JVM knows it."""
        return CHARSETS[self.encoding]

    @property
    def reads_files_whole(self) -> bool:
        """Each file is read as one value and split into lines (a CSV file's
        header is its first).
        """
        return self.name == CSV

    @classmethod
    def from_raw(cls, raw: dict, subject: str) -> FormatSpec | None:
        """The hop's format from its spec keys; None when it names none. Refused with the fix: an
        unknown format, no ``columns``, a type Spark does not know, ``csv`` options on a JSON hop,
        an option that is not one character or an encoding Spark cannot decode."""
        name, columns, options = raw.get("format"), raw.get("columns"), raw.get("csv")
        if name is None:
            given = [key for key in ("columns", "csv") if raw.get(key) is not None]
            if given:
                raise UsageError(
                    f"{subject} has {given[0]} but no format: add `format: csv` or `format: json`"
                )
            return None
        if name not in FORMATS:
            raise UsageError(
                f"{subject} has format {name!r}: use csv, json or debezium (or leave it out: each "
                "line goes to the hop's transform)"
            )
        if options is not None and name != CSV:
            raise UsageError(f"{subject} has csv options but format {name}: remove them")
        typed = _columns(columns, name, subject)
        keys = tuple(raw.get("keys") or ()) if name == DEBEZIUM else ()
        if name == DEBEZIUM:
            _check_debezium(typed, keys, subject)
        return cls(name=name, columns=typed, keys=keys, **_csv_options(options or {}, subject))


def _check_debezium(columns: tuple[tuple[str, str], ...], keys: tuple, subject: str) -> None:
    """Refuse a column ``format: debezium`` writes itself, and keys no column declares."""
    names = [name for name, _type in columns]
    taken = [name for name in names if name in DEBEZIUM_COLUMNS]
    if taken:
        raise UsageError(
            f"{subject} declares column {taken[0]}, which format debezium writes itself (with "
            f"{', '.join(DEBEZIUM_COLUMNS)}): rename the row's column in a transform after the "
            "parse"
        )
    absent = [key for key in keys if key not in names]
    if absent:
        raise UsageError(
            f"{subject} has key {absent[0]!r}, which its columns do not declare: add it to "
            "`columns`"
        )


def _columns(columns: dict | None, name: str, subject: str) -> tuple[tuple[str, str], ...]:
    if not columns:
        raise UsageError(
            f"{subject} has format {name} but no columns: add `columns: {{name: type, ...}}`, "
            "e.g. `{sensor_id: string, reading_time: timestamp, temperature_c: double}`"
        )
    for column, type_name in columns.items():
        if not isinstance(type_name, str) or not _TYPE.fullmatch(type_name.strip()):
            raise UsageError(
                f"{subject} declares column {column} as {type_name!r}, which is no type it knows: "
                "use string, boolean, int, long, double, decimal(p,s), date or timestamp"
            )
    return tuple((str(column), type_name.strip().lower()) for column, type_name in columns.items())


def _csv_options(options: dict, subject: str) -> dict:
    settings = dict(_CSV_OPTIONS)
    for key, value in options.items():
        if key not in settings:
            raise UsageError(f"{subject} has csv option {key!r}: use {', '.join(_CSV_OPTIONS)}")
        if not isinstance(value, type(settings[key])):
            raise UsageError(f"{subject} has csv {key} {value!r}: use e.g. {_CSV_OPTIONS[key]!r}")
        settings[key] = value
    for key in ("delimiter", "quote"):
        if len(settings[key]) != 1 or settings[key] in "\r\n":
            raise UsageError(
                f"{subject} has csv {key} {settings[key]!r}: use one character, e.g. ';'"
            )
    try:
        settings["encoding"] = codecs.lookup(settings["encoding"]).name
    except LookupError:
        settings["encoding"] = ""
    if settings["encoding"] not in CHARSETS:
        raise UsageError(
            f"{subject} has csv encoding {options['encoding']!r}: use utf-8 (which ASCII is too) "
            "or latin-1, or convert the files before they land"
        )
    return settings


def hop_format(raw: dict, kind: HopKind, subject: str) -> FormatSpec | None:
    """An ingest hop's landing format; the format keys on another kind's hop are refused. A CSV
    file's header is its first line: a topic's records have none."""
    if not kind.reads_landing:
        given = [name for name in ("format", "columns", "csv") if name in raw]
        if given:
            raise UsageError(
                f"{subject} (kind {kind.name}) has {given[0]}, which only an "
                "ingest hop takes: remove it"
            )
        return None
    parsed = FormatSpec.from_raw(raw, subject)
    if parsed is not None and parsed.reads_files_whole and parsed.header and raw.get("topic"):
        raise UsageError(
            f"{subject} reads topic {raw['topic']!r} as CSV with a header, which records do not "
            "have: add `csv: {header: false}` (the columns are the fields in "
            "order) or use format json"
        )
    return parsed
