"""``spark_jobs/logs/table_rows.py``: a Delta table's rows read by delta-rs, no JVM, on the
quarantine table of the ``replayed`` fixture lake (tests/fixtures/make_lakes.py): three runs'
appends, a RESTORE back to the first (a rollback), then the replay's append, in a log real Spark
and Delta wrote.

The fixture lakes keep the logs and empty every parquet file (the planner reads only names), so
each test first writes rows of its own into the table's data files, each file exactly the size
its ``add`` records (a reader finds the footer from that size), and drops the emptied checkpoint
(the JSON commits hold the whole history). The expected rows are those rows, picked by replaying
the JSON commits here, never through delta-rs or the module.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_jobs.logs import table_rows
from testkit.lakes import fixture_lake

pytestmark = pytest.mark.unit

COLUMNS = ["reason", "raw_line", "_source_file"]  # what `lakehouse quarantine` reads
REASONS = ("not a JSON object", "event_time is not a number")


def _sized(rows: pa.Table, size: int) -> bytes:
    """``rows`` as a parquet file of exactly ``size`` bytes: padded with footer metadata."""

    def written(pad: int) -> bytes:
        sink = io.BytesIO()
        with pq.ParquetWriter(sink, rows.schema, store_schema=False) as writer:
            writer.write_table(rows)
            writer.add_key_value_metadata({"pad": "x" * pad})
        return sink.getvalue()

    gap = size - len(written(0))
    # one byte more from 128 characters on: the value's length takes two bytes
    for pad in (gap, gap - 1):
        if len(data := written(pad)) == size:
            return data
    raise AssertionError(f"no parquet file of {size} bytes")


def _commits(table: Path) -> dict[int, list[dict]]:
    return {
        int(path.name.split(".")[0]): [json.loads(line) for line in path.read_text().splitlines()]
        for path in sorted((table / "_delta_log").glob("*.json"))
    }


@pytest.fixture
def quarantine(tmp_path):
    """The lake, its bronze quarantine table's path, and the rows written into each data file
    (as tuples of :data:`COLUMNS`) by the version that added it."""
    lake = fixture_lake("replayed", tmp_path)
    table = Path(lake.quarantine(lake.spec.hop("bronze")))
    hint = table / "_delta_log" / "_last_checkpoint"
    (hint.parent / f"{json.loads(hint.read_text())['version']:020d}.checkpoint.parquet").unlink()
    hint.unlink()
    added: dict[int, list[tuple]] = {}
    for version, actions in _commits(table).items():
        for add in (action["add"] for action in actions if "add" in action):
            count = json.loads(add["stats"])["numRecords"]
            rows = {
                "raw_line": [f"line {index} of {add['path']}" for index in range(count)],
                "reason": [REASONS[index % 2] for index in range(count)],
                "_source_file": [
                    f"file:/landing/{version}-{index % 3}.jsonl" for index in range(count)
                ],
                "_batch_id": pa.array([version] * count, pa.int64()),
                "_ingest_time": pa.array([version] * count, pa.timestamp("us", tz="UTC")),
            }
            (table / add["path"]).write_bytes(_sized(pa.table(rows), add["size"]))
            added.setdefault(version, []).extend(zip(*(rows[name] for name in COLUMNS)))
    return lake, table, added


def _tuples(rows: pa.Table) -> list[tuple]:
    return sorted(zip(*(rows.column(name).to_pylist() for name in COLUMNS), strict=True))


def test_read_gives_the_rows_of_the_live_files_after_a_rollback_and_its_replay(quarantine):
    _lake, table, added = quarantine
    live: dict[str, int] = {}  # data file -> the version that added it
    for version, actions in _commits(table).items():
        for action in actions:
            if "add" in action:
                live[action["add"]["path"]] = version
            elif "remove" in action:
                live.pop(action["remove"]["path"])
    kept = set(live.values())
    assert kept == {0, 4}  # what the history leads to: r0's commit, and the replay's
    rows = table_rows.read(str(table), COLUMNS)
    assert rows.column_names == COLUMNS
    assert _tuples(rows) == sorted(row for version in kept for row in added[version])
    metadata = next(action["metaData"] for action in _commits(table)[0] if "metaData" in action)
    fields = json.loads(metadata["schemaString"])["fields"]
    assert table_rows.columns_of(str(table)) == [field["name"] for field in fields]


def test_read_where_keeps_the_rows_whose_column_holds_one_of_the_values(quarantine):
    """The question the quarantine summary asks of a hop's table (the rows of the source files
    it lists), here of the quarantine table: a text column, and a value no row holds."""
    _lake, table, added = quarantine
    files = sorted({row[2] for row in added[0] + added[4]})
    wanted = [files[0], files[-1], "file:/landing/never-read.jsonl"]
    rows = table_rows.read(str(table), COLUMNS, where=("_source_file", wanted))
    expected = sorted(row for version in (0, 4) for row in added[version] if row[2] in wanted)
    assert _tuples(rows) == expected and 0 < len(expected) < len(added[0]) + len(added[4])


def test_written_gives_what_each_run_appended_and_nothing_for_the_rollback_or_no_commit(
    quarantine,
):
    """Each run's range as its record holds it (what ``lakehouse quarantine --run`` reads):
    the rows that run's commit appended, even when a rollback since took them away. The
    RESTORE commit only removed files: nothing written. A run that committed nothing, or a
    range that ends where it starts, gives no row but the columns asked for."""
    lake, table, added = quarantine
    for run, version in (("r0", 0), ("r1", 1), ("r2", 2), ("r3", 4)):
        change = json.loads(Path(lake.runs, f"{run}.bronze.json").read_text())["tables"][str(table)]
        assert change["version_after"] == version, run
        rows = table_rows.written(
            str(table), COLUMNS, change["version_before"], change["version_after"]
        )
        assert rows.column_names == COLUMNS and _tuples(rows) == sorted(added[version]), run
    (restore,) = [
        version
        for version, actions in _commits(table).items()
        if any(action.get("commitInfo", {}).get("operation") == "RESTORE" for action in actions)
    ]
    for after, upto in ((restore - 1, restore), (None, None), (restore, restore)):
        rows = table_rows.written(str(table), COLUMNS, after, upto)
        assert rows.num_rows == 0 and rows.column_names == COLUMNS, (after, upto)
    # A range over several commits, the rollback in it: every append of the range.
    rows = table_rows.written(str(table), COLUMNS, 0, restore + 1)
    assert _tuples(rows) == sorted(added[1] + added[2] + added[restore + 1])
