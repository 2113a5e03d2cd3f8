"""``spark_jobs/logs/delta_log.py`` on plain files: versions, rows written, transactions, the
data files of a commit, and the live files of a log that starts at a checkpoint (delta-rs
wrote it; no JVM)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

import pytest

from spark_jobs.control.removable.table_files import TablePlan
from spark_jobs.logs import delta_log
from tests.unit.spark_jobs._helpers import _write_log

pytestmark = pytest.mark.unit


def test_delta_log_versions_and_rows_written(tmp_path):
    log = tmp_path / "t/_delta_log"
    commit = lambda metrics: json.dumps(
        {"commitInfo": {"operation": "X", "operationMetrics": metrics}}
    )
    _write_log(log / f"{0:020d}.json", [commit({"numOutputRows": "5"})])
    _write_log(
        log / f"{1:020d}.json",
        [
            commit(
                {
                    "numTargetRowsInserted": "2",
                    "numTargetRowsUpdated": "3",
                    "numTargetRowsDeleted": "4",
                }
            ),
            json.dumps({"txn": {"appId": "q", "version": 1}}),
        ],
    )
    _write_log(log / f"{2:020d}.json", [commit({"numDeletedRows": "6"})])
    (log / f"{1:020d}.crc").write_text("{}")
    table = str(tmp_path / "t")
    assert delta_log.versions(table) == [0, 1, 2]
    assert delta_log.rows_written(table, None, 1) == 10
    assert delta_log.rows_written(table, 0, 1) == 5
    assert (delta_log.rows_deleted(table, None, 2), delta_log.rows_deleted(table, 1, 2)) == (10, 6)
    assert delta_log.transaction(table, 1) == {"appId": "q", "version": 1}
    assert delta_log.table_version(str(tmp_path / "none")) is None


def test_two_commits_hold_the_same_files_when_each_place_has_the_same_rows_by_its_statistics(
    tmp_path,
):
    """What a Delta stream indexes of a commit: its data-changing files in order. A replay's
    commit of the same rows differs in file names and write time only; a file with other rows,
    or the files in another order, differ."""
    log = tmp_path / "t/_delta_log"

    def add(path: str, rows: int, low: int, written: str, data_change: bool = True) -> str:
        stats = {
            "numRecords": rows,
            "minValues": {"t": low, "_ingest_time": written},
            "maxValues": {"t": low + 9, "_ingest_time": written},
            "nullCount": {"t": 0, "_ingest_time": 0},
        }
        return json.dumps(
            {
                "add": {
                    "path": path,
                    "partitionValues": {"d": "1"},
                    "dataChange": data_change,
                    "stats": json.dumps(stats),
                }
            }
        )

    commits = [
        [add("a", 3, 0, "x"), add("b", 2, 10, "x")],
        [add("c", 3, 0, "y"), add("d", 2, 10, "y"), add("e", 9, 0, "y", data_change=False)],
        [add("f", 2, 10, "y"), add("g", 3, 0, "y")],
        [add("h", 3, 1, "y"), add("i", 2, 10, "y")],
    ]
    for version, actions in enumerate(commits):
        _write_log(log / f"{version:020d}.json", actions)
    table = str(tmp_path / "t")
    files = [delta_log.data_files(table, version, ("_ingest_time",)) for version in range(4)]
    assert files[0] == files[1] and files[2] != files[0] and files[3] != files[0]
    # the write time, unless ignored
    assert delta_log.data_files(table, 0) != delta_log.data_files(table, 1)


def test_a_table_written_again_at_the_same_path_is_read_anew(tmp_path):
    """A long-lived process (the API server, a test process copying one lake to one path) must not
    keep the commits of a table that was deleted and written again: same path, same version."""
    import shutil

    table = tmp_path / "table"
    log = table / "_delta_log"

    def write(app_id: str) -> None:
        log.mkdir(parents=True)
        (log / f"{0:020d}.json").write_text(
            json.dumps({"txn": {"appId": app_id, "version": 0}}) + "\n"
        )

    write("first-query")
    assert delta_log.transaction(str(table), 0)["appId"] == "first-query"
    shutil.rmtree(table)
    write("second-query, a longer id")
    assert delta_log.transaction(str(table), 0)["appId"] == "second-query, a longer id"


def test_a_log_that_starts_at_a_checkpoint_names_every_live_file(tmp_path):
    """After the log's early commits are gone, the files the checkpoint it starts from names
    (delta-rs wrote, deleted and checkpointed: an independent writer) are not strays; a file
    no commit took is."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from spark_jobs.control.removable.table_files import clean_log

    table = str(tmp_path / "table")
    for version in range(12):
        write_deltalake(
            table,
            pa.table({"n": [version, version + 100], "day": ["a", "b b"]}),
            mode="append",
            partition_by=["day"],
        )
        if version == 6:
            DeltaTable(table).delete("n < 3")
            DeltaTable(table).create_checkpoint()
    DeltaTable(table).delete("n = 105")
    clean_log(TablePlan("t", table, 13, 9, "test", None), dry_run=False)
    assert delta_log.versions(table)[0] == 7
    # the snapshot as delta-rs sees it, with each file's partition
    live = delta_log.live_files(table)
    uris = {
        uri.removeprefix("file://").removeprefix(table).lstrip("/")
        for uri in DeltaTable(table).file_uris()
    }
    # the log escapes the folder's own escape (b%20b)
    assert {unquote(path) for path in live} == uris
    assert {(unquote(path), action["partitionValues"]["day"]) for path, action in live.items()} == {
        (uri, unquote(uri.split("/")[0].split("=", 1)[1])) for uri in uris
    }
    stray = Path(table, "day=a", "part-stray.parquet")
    stray.write_text("s")
    assert delta_log.unnamed_files(table, 10**15) == [str(stray)]
    assert delta_log.unnamed_files(table, 1) == []
