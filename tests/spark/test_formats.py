"""Landing formats the platform parses: a CSV pipeline written without a line parser.

A ``sensors`` pipeline whose one ingest hop declares ``format: csv`` and its columns, and whose
module has no transform at all, reads random CSV files with a header: quoted fields holding the
delimiter and doubled quotes, rows that cannot be typed, rows with a field too many or too few,
a file that gained a column (rescued by its name into ``_rescued``), a file that lost one and a
file whose header names a column twice (every row quarantined, the reason naming the column),
a byte order mark and Windows line ends. Its table and quarantine equal what Python's ``csv``
module makes of the files (the oracle below), after two stream runs and after a backfill into
an empty lake.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import random
import shutil

import pytest

from testkit.sensors import COLUMNS, write_pipeline

pytestmark = [pytest.mark.spark, pytest.mark.integration]

START = dt.datetime(2026, 3, 1)


def _file(
    rng: random.Random, header: list[str], rows: int, bom: bool = False, crlf: bool = False
) -> str:
    """A CSV file of random readings under ``header``: some notes hold the delimiter or quotes,
    some temperatures are not numbers, some rows have a field too many or too few."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n" if crlf else "\n")
    writer.writerow(header)
    for _ in range(rows):
        values = {
            "sensor_id": f"s{rng.randrange(50)}",
            "reading_time": (START + dt.timedelta(seconds=rng.randrange(86_400))).isoformat(),
            "temperature_c": rng.choice([f"{rng.uniform(-10, 40):.2f}", "warm", "", "21"]),
            "note": rng.choice(["", "ok", 'said "hi", then left', "a,b"]),
            "battery": str(rng.randrange(100)),
        }
        row = [values.get(name, "x") for name in header]
        shape = rng.random()
        if shape < 0.05:
            row = row[:-1]
        elif shape < 0.1:
            row = [*row, "extra"]
        writer.writerow(row)
    return ("\ufeff" if bom else "") + buffer.getvalue()


def _oracle(files: dict[str, str]) -> tuple[list[tuple], list[tuple]]:
    """The rows (each column's value and the rescued fields) and the quarantined (line,
    reason) of ``files``, by Python's csv module."""
    rows, refused = [], []
    for text in files.values():
        lines = [line for line in text.lstrip("\ufeff").splitlines() if line != ""]
        header = next(csv.reader([lines[0]]))
        for line in lines[1:]:
            fields = next(csv.reader([line]))
            reason = None
            twice = [name for index, name in enumerate(header) if name in header[:index]]
            if twice:
                reason = f"the file's header names {twice[0]} twice"
            elif len(fields) != len(header):
                reason = f"{len(fields)} fields, the header has {len(header)}"
            else:
                missing = [name for name in COLUMNS if name not in header]
                reason = f"no column {missing[0]} in the file's header" if missing else None
            value = dict(zip(header, fields, strict=False))
            typed = {name: value.get(name) or None for name in COLUMNS}
            if reason is None and typed["temperature_c"] is not None:
                try:
                    typed["temperature_c"] = float(typed["temperature_c"])
                except ValueError:
                    reason = f"temperature_c is not a double: '{value['temperature_c']}'"
            if reason is not None:
                refused.append((line, reason))
                continue
            typed["reading_time"] = dt.datetime.fromisoformat(typed["reading_time"])
            extra = {name: value[name] for name in header if name not in COLUMNS}
            rows.append((*typed.values(), json.dumps(extra, sort_keys=True) if extra else None))
    return sorted(rows, key=repr), sorted(refused)


def _tables(spark, home) -> tuple[list[tuple], list[tuple]]:
    table = spark.read.format("delta").load(str(home / "tables/bronze/sensors")).collect()
    rows = [
        (
            *(row[name] for name in COLUMNS),
            json.dumps(json.loads(row["_rescued"]), sort_keys=True) if row["_rescued"] else None,
        )
        for row in table
    ]
    quarantine = spark.read.format("delta").load(str(home / "tables/quarantine/sensors")).collect()
    return sorted(rows, key=repr), sorted((row.raw_line, row.reason) for row in quarantine)


def _assert_same(actual: tuple[list, list], expected: tuple[list, list]) -> None:
    for name, got, want in zip(("table", "quarantine"), actual, expected, strict=True):
        extra, lacking = (
            [row for row in got if row not in want],
            [row for row in want if row not in got],
        )
        assert got == want, (
            f"{name}: {len(extra)} rows not expected ({extra[:3]}), {len(lacking)} "
            f"missing ({lacking[:3]})"
        )


def test_a_csv_pipeline_without_a_line_parser_equals_pythons_csv_module(
    spark, tmp_path, monkeypatch
):
    from spark_jobs import service

    home = tmp_path / "lake"
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(write_pipeline(tmp_path / "pipelines")))
    monkeypatch.setenv("LAKEHOUSE_HOME", str(home))
    landing = home / "landing" / "sensors"
    landing.mkdir(parents=True)
    rng = random.Random(3)
    base = ["sensor_id", "reading_time", "temperature_c", "note"]
    increments = [
        {
            "a.csv": _file(rng, base, 60),
            "b.csv": _file(rng, [*base[:2], "battery", *base[2:]], 40, bom=True),
        },
        {
            "c.csv": _file(rng, ["sensor_id", "reading_time", "note"], 10, crlf=True),
            "d.csv": _file(rng, [*base, "sensor_id"], 5),
            "e.csv": _file(rng, base[::-1], 30, crlf=True),
        },
    ]
    landed: dict[str, str] = {}
    for files in increments:
        for name, text in files.items():
            (landing / name).write_bytes(text.encode())
        landed.update(files)
        result = service.run("sensors", progress=lambda line: None)
        result.raise_for_gate()
        _assert_same(_tables(spark, home), _oracle(landed))
        # "rows in": the lines the run read (every row, refused or not; no header, no empty line).
        assert result.records[0].rows_in == sum(map(len, _oracle(files)))
    rows, refused = _oracle(landed)
    assert (
        any(row[-1] for row in rows)
        and {reason.split()[0] for _line, reason in refused} >= {"no", "the", "temperature_c"}
        and any("fields, the header has" in reason for _line, reason in refused)
    )

    # A backfill into an empty lake over the same files: the same table and quarantine.
    shutil.rmtree(home / "tables")
    shutil.rmtree(home / "checkpoints")
    start = int(START.replace(tzinfo=dt.UTC).timestamp() * 1000)
    result = service.backfill("sensors", start, start + 86_400_000, progress=lambda line: None)
    result.raise_for_gate()
    _assert_same(_tables(spark, home), _oracle(landed))
    assert result.records[0].rows_in == len(rows) + len(refused)


def test_the_parse_reads_other_delimiters_encodings_and_json_lines(spark):
    """Latin-1 with ``;`` and ``'``; a UTF-8 file with a broken byte; JSON lines."""
    from spark_jobs.model.formats import FormatSpec
    from spark_jobs.transforms.formats import file_lines, parse

    fmt = FormatSpec.from_raw(
        {
            "format": "csv",
            "columns": {"name": "string", "n": "int"},
            "csv": {"delimiter": ";", "quote": "'", "encoding": "latin-1"},
        },
        "hop",
    )
    text = "n;name\n1;'caf\u00e9; bar'\n2;'it''s'\nx;y\n"
    files = spark.createDataFrame(
        [(bytearray(text.encode("latin-1")), "f.csv")], ["content", "_source_file"]
    )
    parsed = parse(file_lines(files, fmt), fmt).collect()
    assert [(row.name, row.n, row.reason) for row in parsed] == [
        ("caf\u00e9; bar", 1, None),
        ("it's", 2, None),
        ("y", None, "n is not an int: 'x'"),
    ]

    # A line with a byte that is not UTF-8 is quarantined; the rest of its file reads.
    fmt = FormatSpec.from_raw({"format": "csv", "columns": {"name": "string", "n": "int"}}, "hop")
    files = spark.createDataFrame(
        [(bytearray(b"name,n\na\xff,1\nb,2\n"), "f.csv")], ["content", "_source_file"]
    )
    assert [
        (row.name, row.n, row.raw_line, row.reason)
        for row in parse(file_lines(files, fmt), fmt).collect()
    ] == [("a\ufffd", 1, "a\ufffd,1", "not valid UTF-8"), ("b", 2, "b,2", None)]

    fmt = FormatSpec.from_raw({"format": "json", "columns": {"a": "long", "t": "timestamp"}}, "hop")
    lines = spark.createDataFrame(
        [('{"a": 1, "z": [2]}',), ('{"a": "x"}',), ("[1]",), ("nope",), ('{"t": null}',)], ["value"]
    ).selectExpr("value", "'f' AS _source_file")
    assert [(row.a, row._rescued, row.reason) for row in parse(lines, fmt).collect()] == [
        (1, '{"z":[2]}', None),
        (None, None, "a is not a long: '\"x\"'"),
        (None, None, "not a JSON object"),
        (None, None, "not JSON"),
        (None, None, None),
    ]
