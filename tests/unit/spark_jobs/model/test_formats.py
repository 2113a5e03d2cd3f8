"""``spark_jobs/model/formats.py``: landing formats as the spec declares them, and refusals naming
the fix (no JVM: the parse itself is tests/spark/test_formats.py)."""

from __future__ import annotations

import re

import pytest

from spark_jobs.model.errors import UsageError
from spark_jobs.model.formats import FormatSpec

pytestmark = pytest.mark.unit


COLUMNS = {"id": "string", "t": "timestamp", "v": "decimal(12, 2)"}


def test_a_csv_format_has_its_columns_and_options_with_defaults():
    fmt = FormatSpec.from_raw(
        {"format": "csv", "columns": COLUMNS, "csv": {"delimiter": ";", "encoding": "Latin-1"}},
        "hop",
    )
    assert fmt.names == ("id", "t", "v") and fmt.columns[2] == ("v", "decimal(12, 2)")
    assert (fmt.header, fmt.delimiter, fmt.quote, fmt.encoding, fmt.charset) == (
        True,
        ";",
        '"',
        "iso8859-1",
        "ISO-8859-1",
    )
    assert FormatSpec.from_raw({}, "hop") is None
    assert (
        FormatSpec.from_raw({"format": "json", "columns": COLUMNS}, "hop").reads_files_whole
        is False
    )


@pytest.mark.parametrize(
    "raw,problem",
    [
        ({"format": "xml", "columns": COLUMNS}, "has format 'xml': use csv, json or debezium"),
        ({"format": "csv"}, "has format csv but no columns: add `columns:"),
        ({"columns": COLUMNS}, "has columns but no format: add `format: csv`"),
        (
            {"format": "csv", "columns": {"a": "strin"}},
            "declares column a as 'strin', which is no type it knows",
        ),
        (
            {"format": "json", "columns": COLUMNS, "csv": {"header": False}},
            "has csv options but format json",
        ),
        (
            {"format": "csv", "columns": COLUMNS, "csv": {"sep": ";"}},
            "has csv option 'sep': use header, delimiter",
        ),
        (
            {"format": "csv", "columns": COLUMNS, "csv": {"delimiter": ";;"}},
            "has csv delimiter ';;': use one character",
        ),
        (
            {"format": "csv", "columns": COLUMNS, "csv": {"header": "yes"}},
            "has csv header 'yes': use e.g. True",
        ),
        (
            {"format": "csv", "columns": COLUMNS, "csv": {"encoding": "cp1252"}},
            "has csv encoding 'cp1252': use utf-8",
        ),
    ],
)
def test_a_format_spark_cannot_read_as_declared_is_refused_with_the_fix(raw, problem):
    with pytest.raises(UsageError, match="^" + re.escape("hop " + problem)):
        FormatSpec.from_raw(raw, "hop")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"format": "debezium", "columns": {"id": "long", "op": "string"}},
            "declares column op, which format debezium writes itself",
        ),
        (
            {"format": "debezium", "columns": {"id": "long"}, "keys": ["customer_id"]},
            "has key 'customer_id', which its columns do not declare",
        ),
    ],
)
def test_a_debezium_format_that_clashes_with_its_own_columns_is_refused(raw, message):
    with pytest.raises(UsageError, match=message):
        FormatSpec.from_raw(raw, "hop b")


def test_a_debezium_format_keeps_the_hops_keys():
    fmt = FormatSpec.from_raw(
        {"format": "debezium", "columns": {"id": "long", "name": "string"}, "keys": ["id"]}, "hop b"
    )
    assert (fmt.name, fmt.names, fmt.keys) == ("debezium", ("id", "name"), ("id",))
