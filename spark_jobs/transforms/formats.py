"""The landing formats the platform parses (:mod:`spark_jobs.model.formats`): rows of
``value`` (a CSV row or a JSON line) and ``_source_file`` (with ``_header``, the file's first
line, for a CSV file with a header) to the declared columns, typed, with ``_rescued``,
``raw_line`` and ``reason`` (null for a valid row), as a hand-written parse returns them.

A reason names the column: ``no column temperature_c in the file's header``, ``temperature_c
is not a double: 'warm'``, ``3 fields, the header has 4``. A field that is empty (CSV) or null
(JSON) is null, not a reason; a quality rule can require it.
"""

from __future__ import annotations

import re

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.model.formats import CSV, DEBEZIUM, RESCUED, SKIPPED, FormatSpec

QUARANTINE_COLUMNS = ("raw_line", "reason", "_source_file")
HEADER = "_header"
UNDECODABLE = "_undecodable"


def file_lines(files: DataFrame, fmt: FormatSpec) -> DataFrame:
    """Each line of each whole file (``content``: its bytes, ``_source_file``: its path) as
    ``value``, with the file's first line as ``_header`` when the format has a header (the
    header is no row); empty lines are no rows either. ``_undecodable``: the line held bytes
    that are not UTF-8 (they read as U+FFFD), so its row is quarantined."""
    if fmt.charset == "UTF-8":
        raw = F.col("content").cast("string")
        text, broken = F.make_valid_utf8(raw), ~F.is_valid_utf8(raw)
    else:
        text, broken = F.decode(F.col("content"), fmt.charset), F.lit(False)
    # A byte order mark is no part of the first column's name.
    lines = F.split(F.regexp_replace(text, "^\ufeff", ""), r"\r?\n")
    exploded = files.select(
        "_source_file",
        F.element_at(lines, 1).alias(HEADER),
        broken.alias("_broken"),
        F.posexplode(lines).alias("_line", "value"),
    )
    first = 1 if fmt.header else 0
    return exploded.where((F.col("_line") >= first) & (F.col("value") != "")).select(
        "value",
        "_source_file",
        HEADER,
        (F.col("_broken") & F.col("value").contains("\ufffd")).alias(UNDECODABLE),
    )


def _fields(line: Column, fmt: FormatSpec) -> Column:
    """The fields of one CSV line: split at each delimiter outside quotes; a quoted field loses
    its quotes and a doubled quote inside it is one."""
    sep, quote = re.escape(fmt.delimiter), re.escape(fmt.quote)
    # Each field follows a delimiter (one is put before the first), so no match is empty: an
    # empty match would make the next search skip a character.
    pattern = f"{sep}({quote}(?:[^{quote}]|{quote}{quote})*{quote}|[^{sep}]*)"
    raw = F.regexp_extract_all(F.concat(F.lit(fmt.delimiter), line), F.lit(pattern), 1)
    q = F.lit(fmt.quote)
    return F.transform(
        raw,
        lambda field: F.when(
            (F.length(field) >= 2) & field.startswith(q) & field.endswith(q),
            F.replace(F.substring(field, F.lit(2), F.length(field) - 2), F.lit(fmt.quote * 2), q),
        ).otherwise(field),
    )


def _not_a(name: str, type_name: str) -> str:
    """``temperature_c is not a double``, ``n is not an int``."""
    return f"{name} is not {'an' if type_name[0] in 'aeiou' else 'a'} {type_name}: '"


def _cast_failure(name: str, type_name: str, text: Column, typed: Column) -> Column:
    return F.when(
        text.isNotNull() & typed.isNull(),
        F.concat(F.lit(_not_a(name, type_name)), F.substring(text, 1, 80), F.lit("'")),
    )


def parse_csv(lines: DataFrame, fmt: FormatSpec) -> DataFrame:
    """CSV rows to the declared columns, each field found by its file's header name."""
    fields, names = F.col("_fields"), F.col("_names")
    declared = F.array(*[F.lit(name) for name in fmt.names])
    header = _fields(F.col(HEADER), fmt) if fmt.header else declared
    undecodable = F.col(UNDECODABLE) if UNDECODABLE in lines.columns else F.lit(False)
    split = lines.select(
        "value",
        "_source_file",
        _fields(F.col("value"), fmt).alias("_fields"),
        header.alias("_names"),
        undecodable.alias(UNDECODABLE),
    )
    # ``get`` is null past either end: a column the header lacks has position 0.
    texts = {
        name: F.nullif(F.get(fields, F.array_position(names, name).cast("int") - 1), F.lit(""))
        for name in fmt.names
    }
    typed = {
        name: texts[name] if type_name == "string" else texts[name].try_cast(type_name)
        for name, type_name in fmt.columns
    }
    # The fields whose header name no column declares (of a name given twice, the first), by name.
    entries = F.filter(
        F.transform(
            names,
            lambda name, index: F.struct(name.alias("key"), F.get(fields, index).alias("value")),
        ),
        lambda entry, index: (
            ~F.array_contains(declared, entry["key"])
            & (F.array_position(names, entry["key"]) == index + 1)
        ),
    )
    extra = F.map_from_entries(entries)
    twice = F.filter(names, lambda name, index: F.array_position(names, name) != index + 1)
    reason = F.when(F.col(UNDECODABLE), F.lit(f"not valid {fmt.charset}")).when(
        F.size(twice) > 0,
        F.concat(F.lit("the file's header names "), F.element_at(twice, 1), F.lit(" twice")),
    )
    named_by = "the header has " if fmt.header else "the columns are "
    reason = reason.when(
        F.size(fields) != F.size(names),
        F.concat(
            F.size(fields).cast("string"),
            F.lit(f" fields, {named_by}"),
            F.size(names).cast("string"),
        ),
    )
    for name in fmt.names:
        reason = reason.when(
            ~F.array_contains(names, name), F.lit(f"no column {name} in the file's header")
        )
    for name, type_name in fmt.columns:
        failure = _cast_failure(name, type_name, texts[name], typed[name])
        reason = reason.when(failure.isNotNull(), failure)
    return _parsed(split, typed, F.when(F.size(extra) > 0, F.to_json(extra)), reason)


def parse_json(lines: DataFrame, fmt: FormatSpec) -> DataFrame:
    """JSON lines (objects) to the declared columns; a field no column names is rescued."""
    from spark_jobs.transforms.stamps import rescued

    doc = F.col("_doc")
    split = lines.select("value", "_source_file", F.try_parse_json(F.col("value")).alias("_doc"))
    fields = {name: F.try_variant_get(doc, f"$['{name}']", "variant") for name in fmt.names}
    typed = {
        name: F.try_variant_get(doc, f"$['{name}']", type_name) for name, type_name in fmt.columns
    }
    reason = F.when(doc.isNull(), F.lit("not JSON")).when(
        F.try_variant_get(doc, "$", "map<string,variant>").isNull(), F.lit("not a JSON object")
    )
    for name, type_name in fmt.columns:
        present = fields[name].isNotNull() & ~F.is_variant_null(fields[name])
        failure = F.when(
            present & typed[name].isNull(),
            F.concat(
                F.lit(_not_a(name, type_name)),
                F.substring(F.to_json(fields[name]), 1, 80),
                F.lit("'"),
            ),
        )
        reason = reason.when(failure.isNotNull(), failure)
    return _parsed(split, typed, rescued(doc, fmt.names), reason)


def _parsed(split: DataFrame, typed: dict[str, Column], extra: Column, reason: Column) -> DataFrame:
    """The declared columns, ``_rescued``, ``raw_line`` (the line, which the hop's transform may
    still refuse), ``_source_file`` and ``reason``."""
    return split.select(
        *[column.alias(name) for name, column in typed.items()],
        extra.alias(RESCUED),
        F.col("value").alias("raw_line"),
        "_source_file",
        reason.alias("reason"),
    )


def parse(lines: DataFrame, fmt: FormatSpec) -> DataFrame:
    """``lines`` parsed by the hop's format."""
    if fmt.name == DEBEZIUM:
        from spark_jobs.transforms.changes import parse_debezium

        return parse_debezium(lines, fmt)
    return parse_csv(lines, fmt) if fmt.name == CSV else parse_json(lines, fmt)


def split_parsed(parsed: DataFrame) -> tuple[DataFrame, DataFrame]:
    """The valid rows (every column but the reason and line) and the refused ones (the
    quarantine's columns) of a parse, after the hop's transform if it has one; a row marked
    :data:`SKIPPED` (a tombstone) is neither."""
    if SKIPPED in parsed.columns:
        parsed = parsed.where(~F.col(SKIPPED)).drop(SKIPPED)
    valid = parsed.where(F.col("reason").isNull()).drop("reason", "raw_line")
    return valid, parsed.where(F.col("reason").isNotNull()).select(*QUARANTINE_COLUMNS)
