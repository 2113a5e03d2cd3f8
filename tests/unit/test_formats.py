"""Landing formats as the spec declares them, refusals naming the fix, and the sample writer's
CSV files (no JVM: the parse itself is tests/spark/test_formats.py)."""

from __future__ import annotations

import csv
import io
import re

import pytest

from spark_jobs.control.writers.samples import csv_text
from spark_jobs.model.errors import UsageError
from spark_jobs.model.formats import FormatSpec
from spark_jobs.model.spec import load_spec

pytestmark = [pytest.mark.unit]

COLUMNS = {"id": "string", "t": "timestamp", "v": "decimal(12, 2)"}


def test_a_csv_format_has_its_columns_and_options_with_defaults():
    fmt = FormatSpec.from_raw({"format": "csv", "columns": COLUMNS, "csv": {"delimiter": ";", "encoding": "Latin-1"}},
                              "hop")
    assert fmt.names == ("id", "t", "v") and fmt.columns[2] == ("v", "decimal(12, 2)")
    assert (fmt.header, fmt.delimiter, fmt.quote, fmt.encoding, fmt.charset) == (True, ";", '"', "iso8859-1",
                                                                                   "ISO-8859-1")
    assert FormatSpec.from_raw({}, "hop") is None
    assert FormatSpec.from_raw({"format": "json", "columns": COLUMNS}, "hop").reads_files_whole is False


@pytest.mark.parametrize("raw,problem", [
    ({"format": "xml", "columns": COLUMNS}, "has format 'xml': use csv or json"),
    ({"format": "csv"}, "has format csv but no columns: add `columns:"),
    ({"columns": COLUMNS}, "has columns but no format: add `format: csv`"),
    ({"format": "csv", "columns": {"a": "strin"}}, "declares column a as 'strin', which is no type it knows"),
    ({"format": "json", "columns": COLUMNS, "csv": {"header": False}}, "has csv options but format json"),
    ({"format": "csv", "columns": COLUMNS, "csv": {"sep": ";"}}, "has csv option 'sep': use header, delimiter"),
    ({"format": "csv", "columns": COLUMNS, "csv": {"delimiter": ";;"}}, "has csv delimiter ';;': use one character"),
    ({"format": "csv", "columns": COLUMNS, "csv": {"header": "yes"}}, "has csv header 'yes': use e.g. True"),
    ({"format": "csv", "columns": COLUMNS, "csv": {"encoding": "cp1252"}}, "has csv encoding 'cp1252': use utf-8"),
])
def test_a_format_spark_cannot_read_as_declared_is_refused_with_the_fix(raw, problem):
    with pytest.raises(UsageError, match="^" + re.escape("hop " + problem)):
        FormatSpec.from_raw(raw, "hop")


def test_format_keys_belong_to_ingest_hops_and_a_topic_has_no_header(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\nlanding: landing/s\nhops:\n"
                    "  - {name: bronze, kind: ingest, table: t/b, time_column: t, format: csv, columns: {t: long}}\n"
                    "  - {name: silver, kind: append, upstream: bronze, table: t/s, time_column: t, format: json}\n")
    with pytest.raises(UsageError, match="hop silver \\(kind append\\) has format, which only an ingest hop takes"):
        load_spec(spec)
    spec.write_text("name: s\nhops:\n  - {name: bronze, kind: ingest, table: t/b, time_column: t, topic: s, "
                    "format: csv, columns: {t: long}}\n")
    with pytest.raises(UsageError, match="reads topic 's' as CSV with a header.*add `csv: {header: false}`"):
        load_spec(spec)
    spec.write_text("name: s\nhops:\n  - {name: bronze, kind: ingest, table: t/b, time_column: t, topic: s, "
                    "format: csv, columns: {t: long}, csv: {header: false}}\n")
    hop = load_spec(spec).hop("bronze")
    assert hop.format.header is False and hop.transform_optional


def test_the_sample_writer_puts_every_key_in_the_header_and_bad_lines_where_they_stood():
    fmt = FormatSpec.from_raw({"format": "csv", "columns": {"id": "string", "n": "int"}, "csv": {"delimiter": ";"}},
                              "hop")
    text = csv_text(fmt, [{"id": "a;b", "n": 1}, "not a row", {"id": 'say "x"', "n": None, "extra": 2}])
    assert text.splitlines()[2] == "not a row"
    rows = list(csv.reader(io.StringIO(text), delimiter=";"))
    assert rows == [["id", "n", "extra"], ["a;b", "1", ""], ["not a row"], ['say "x"', "", "2"]]
