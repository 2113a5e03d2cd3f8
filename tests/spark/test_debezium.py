"""``format: debezium`` on real events: the samples in tests/fixtures/debezium are copied from
Debezium's own documentation and examples (SOURCES.md names each one's origin) for PostgreSQL,
MySQL, MariaDB, SQL Server, Oracle, Db2 and MongoDB, with records flattened by
ExtractNewRecordState, a tombstone and a TOASTed column's placeholder. Each parses to what plain
Python reads off the same JSON: the row (``after``, ``before`` for a delete, MongoDB's JSON text
parsed and its extended JSON unwrapped), the operation, the change's time at the finest
precision the event gives, and the log position from its connector's source fields; the
positions of one documented timeline sort in its order."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.integration]

SAMPLES = Path(__file__).parents[1] / "fixtures" / "debezium"
TYPES = {bool: "boolean", int: "long", float: "double", str: "string"}
EXTENDED = ("$numberLong", "$numberInt", "$numberDouble", "$numberDecimal", "$oid")


def _payload(document):
    if isinstance(document, dict) and "payload" in document and "schema" in document:
        return document["payload"]
    return document


def _flat(payload: dict) -> bool:
    return not any(key in payload for key in ("op", "before", "after"))


def _image(payload: dict) -> dict:
    """The row a change event carries, read with plain Python."""
    if _flat(payload):
        return {key: value for key, value in payload.items() if not key.startswith("__")}
    image = payload.get("before") if payload.get("op") == "d" else payload.get("after")
    image = json.loads(image) if isinstance(image, str) else image or {}
    plain = {}
    for key, value in image.items():
        if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in EXTENDED:
            value = next(iter(value.values()))
            value = int(value) if isinstance(value, str) and value.lstrip("-").isdigit() else value
        plain[key] = value
    return plain


def _columns(image: dict) -> dict[str, str]:
    return {key: TYPES[type(value)] for key, value in image.items() if type(value) in TYPES}


def _op(payload: dict) -> str | None:
    if not _flat(payload):
        return payload.get("op")
    if str(payload.get("__deleted")).lower() == "true":
        return "d"
    return payload.get("__op") or ("u" if "__deleted" in payload else None)


def _source(payload: dict) -> dict:
    if not _flat(payload):
        return payload.get("source") or {}
    fields = {}
    for key, value in payload.items():
        if key.startswith("__source_"):
            fields[key.removeprefix("__source_")] = value
    for key, value in payload.items():
        if key.startswith("__") and not key.startswith("__source_"):
            fields.setdefault(key.removeprefix("__"), value)
    return fields


def _position(source: dict) -> dict | None:
    """A change's place in its database's log, by the fields each connector writes (the
    change-data-capture guide's table)."""
    if source.get("lsn") is not None:
        return {"log": "", "offset": Decimal(int(source["lsn"])), "serial": 0}
    if source.get("file") is not None and source.get("pos") is not None:
        return {"log": source["file"], "offset": Decimal(source["pos"]), "serial": source["row"]}
    if source.get("commit_lsn") is not None:
        log = f"{source['commit_lsn']}/{source.get('change_lsn') or ''}"
        return {"log": log, "offset": Decimal(0), "serial": int(source.get("event_serial_no") or 0)}
    if source.get("scn") is not None:
        commit = source.get("commit_scn") or source["scn"]
        return {
            "log": str(int(commit)).zfill(38),
            "offset": Decimal(int(source["scn"])),
            "serial": int(source.get("ssn") or 0),
        }
    if source.get("ord") is not None:
        return {"log": "", "offset": Decimal(source["ts_ms"]), "serial": source["ord"]}
    return None


def _time(payload: dict, source: dict) -> dt.datetime | None:
    epoch = dt.datetime(1970, 1, 1)
    fields = payload if not _flat(payload) else {k[2:]: v for k, v in payload.items()}
    for name, per_us in (("ts_us", 1), ("ts_ns", 0.001), ("ts_ms", 1000)):
        if fields.get(name) is not None:
            return epoch + dt.timedelta(microseconds=int(int(fields[name]) * per_us))
    if _flat(payload) and source.get("ts_ms") is not None:
        return epoch + dt.timedelta(milliseconds=int(source["ts_ms"]))
    return None


def _parse(spark, line: str | None, columns: dict[str, str], keys: tuple[str, ...] = ()):
    from spark_jobs.model.formats import FormatSpec
    from spark_jobs.transforms.formats import parse

    fmt = FormatSpec.from_raw(
        {"format": "debezium", "columns": columns or {"_none": "string"}, "keys": list(keys)},
        "hop sample",
    )
    lines = spark.createDataFrame([(line, "sample.json")], "value string, _source_file string")
    return parse(lines, fmt).collect()[0].asDict(recursive=True)


SAMPLE_FILES = sorted(path.name for path in SAMPLES.glob("*.json"))


@pytest.fixture(scope="module")
def parsed(spark) -> dict[str, dict]:
    """Every sample's parsed row by file name: one parse per connector (its samples' columns
    together; Oracle's upper-case names would clash with others' in one frame)."""
    from spark_jobs.model.formats import FormatSpec
    from spark_jobs.transforms.formats import parse

    groups: dict[str, list[str]] = {}
    for name in SAMPLE_FILES:
        groups.setdefault(name.split("_")[0], []).append(name)
    rows = {}
    for names in groups.values():
        documents = {name: json.loads((SAMPLES / name).read_text()) for name in names}
        columns = {"_none": "string"}
        for document in documents.values():
            columns |= _columns(_image(_payload(document) or {}))
        fmt = FormatSpec.from_raw({"format": "debezium", "columns": columns}, "hop sample")
        lines = [
            (None if document is None else json.dumps(document), name)
            for name, document in documents.items()
        ]
        frame = parse(spark.createDataFrame(lines, "value string, _source_file string"), fmt)
        rows |= {row["_source_file"]: row.asDict(recursive=True) for row in frame.collect()}
    return rows


@pytest.mark.parametrize("name", SAMPLE_FILES)
def test_a_real_event_parses_to_what_plain_python_reads_off_it(parsed, name):
    document = json.loads((SAMPLES / name).read_text())
    row = parsed[name]
    payload = _payload(document)
    if payload is None:  # a tombstone: skipped, neither a row nor a quarantined line
        assert (row["_skipped"], row["reason"]) == (True, None)
        return
    source, image = _source(payload), _image(payload)
    op, position, changed_at = _op(payload), _position(_source(payload)), _time(payload, source)
    assert row["_skipped"] is False
    if op is None:
        assert row["reason"].startswith("no op"), row["reason"]
        return
    if position is None:
        assert row["reason"].startswith("no log position"), row["reason"]
        return
    assert row["reason"] is None
    assert (row["op"], row["position"], row["changed_at"]) == (op, position, changed_at)
    assert {key: row[key] for key in _columns(image)} == {
        key: image[key] for key in _columns(image)
    }


@pytest.mark.parametrize(
    "timeline",
    [
        ("mysql_create", "mysql_update", "mysql_delete"),
        ("mariadb_create", "mariadb_update"),
        ("sqlserver_create", "sqlserver_update", "sqlserver_delete"),
        ("db2_create", "db2_update", "db2_delete"),
    ],
    ids=lambda timeline: timeline[0].split("_")[0],
)
def test_the_positions_of_a_documented_timeline_sort_in_its_order(spark, timeline):
    from pyspark.sql import functions as F

    from spark_jobs.model.formats import FormatSpec
    from spark_jobs.transforms.formats import parse

    lines = [
        (json.dumps(json.loads((SAMPLES / f"{name}.json").read_text())), name) for name in timeline
    ]
    fmt = FormatSpec.from_raw({"format": "debezium", "columns": {"id": "long"}}, "hop sample")
    parsed = parse(spark.createDataFrame(lines, "value string, _source_file string"), fmt)
    ordered = parsed.orderBy(F.col("position")).select("_source_file").collect()
    assert [row[0] for row in ordered] == list(timeline)


def test_bad_events_are_quarantined_with_a_reason_naming_the_problem(spark):
    columns = {"id": "long", "name": "string"}
    source = {"connector": "postgresql", "lsn": 7}
    cases = {
        "not json at all": "not JSON",
        "[1, 2]": "not a JSON object",
        json.dumps({"id": 1, "name": "a"}): "no op: not a Debezium change event",
        json.dumps({"op": "m", "after": {"id": 1}, "ts_ms": 1, "source": source}): "op 'm' is",
        json.dumps({"op": "c", "after": {"id": 1}, "ts_ms": 1, "source": {}}): "no log position",
        json.dumps({"op": "c", "after": {"id": 1}, "source": source}): "no ts_ms, ts_us or ts_ns",
        json.dumps({"op": "c", "after": {"id": "x"}, "ts_ms": 1, "source": source}): (
            "id is not a long: '\"x\"'"
        ),
        json.dumps({"op": "c", "after": {"name": "a"}, "ts_ms": 1, "source": source}): (
            "id (a key) is missing"
        ),
    }
    for line, reason in cases.items():
        row = _parse(spark, line, columns, keys=("id",))
        assert row["reason"] is not None and row["reason"].startswith(reason), (line, row)
    truncate = {"op": "t", "before": None, "after": None, "ts_ms": 1, "source": source}
    assert _parse(spark, json.dumps(truncate), columns, keys=("id",))["reason"] is None
    assert _parse(spark, None, columns)["_skipped"] is True
