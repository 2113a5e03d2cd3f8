"""The log readers on plain files (spark_jobs/logs): the file source's log, offsets, the Delta log."""

from __future__ import annotations

import json

import pytest

from spark_jobs.logs import checkpoint_log, delta_log, file_source_log

pytestmark = [pytest.mark.unit]


def _write_log(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def test_file_source_log_reads_newest_compact_then_later_batches(tmp_path):
    ckpt = tmp_path / "ckpt"
    entry = lambda name, batch: json.dumps({"path": f"file:///land/{name}", "timestamp": 1, "batchId": batch})
    _write_log(ckpt / "sources/0/0", ["v1", entry("a", 0)])
    _write_log(ckpt / "sources/0/1.compact", ["v1", entry("a", 0), entry("b", 1)])
    _write_log(ckpt / "sources/0/2", ["v1", entry("c", 2), entry("d", 2)])
    _write_log(ckpt / "sources/0/.2.crc", ["junk"])
    names = [e["path"].rsplit("/", 1)[-1] for e in file_source_log.file_source_entries(str(ckpt))]
    assert names == ["a", "b", "c", "d"]


def test_offsets_v1_and_v2_formats(tmp_path):
    ckpt = tmp_path / "ckpt"
    _write_log(ckpt / "offsets/3", ["v1", '{"batchWatermarkMs":7,"batchTimestampMs":9,"conf":{}}', '{"logOffset":5}'])
    _write_log(ckpt / "offsets/4", ["v2", '{"batchWatermarkMs":8,"batchTimestampMs":10,"conf":{}}', '0:{"logOffset":6}'])
    _write_log(ckpt / "commits/3", ["v1", '{"nextBatchWatermarkMs":7}'])
    assert checkpoint_log.offset_batch_ids(str(ckpt)) == [3, 4]
    assert checkpoint_log.commit_batch_ids(str(ckpt)) == [3]
    assert checkpoint_log.read_offsets(str(ckpt), 3).sources == [{"logOffset": 5}]
    assert checkpoint_log.read_offsets(str(ckpt), 4).sources == [{"logOffset": 6}]
    assert checkpoint_log.read_offsets(str(ckpt), 4).watermark_ms == 8


def test_delta_log_versions_and_rows_written(tmp_path):
    log = tmp_path / "t/_delta_log"
    commit = lambda metrics: json.dumps({"commitInfo": {"operation": "X", "operationMetrics": metrics}})
    _write_log(log / f"{0:020d}.json", [commit({"numOutputRows": "5"})])
    _write_log(log / f"{1:020d}.json", [commit({"numTargetRowsInserted": "2", "numTargetRowsUpdated": "3",
                                                "numTargetRowsDeleted": "4"}),
                                        json.dumps({"txn": {"appId": "q", "version": 1}})])
    _write_log(log / f"{2:020d}.json", [commit({"numDeletedRows": "6"})])
    (log / f"{1:020d}.crc").write_text("{}")
    table = str(tmp_path / "t")
    assert delta_log.versions(table) == [0, 1, 2]
    assert delta_log.rows_written(table, None, 1) == 10
    assert delta_log.rows_written(table, 0, 1) == 5
    assert (delta_log.rows_deleted(table, None, 2), delta_log.rows_deleted(table, 1, 2)) == (10, 6)
    assert delta_log.transaction(table, 1) == {"appId": "q", "version": 1}
    assert delta_log.table_version(str(tmp_path / "none")) is None


def test_two_commits_hold_the_same_files_when_each_place_has_the_same_rows_by_its_statistics(tmp_path):
    """What a Delta stream indexes of a commit: its data-changing files in order. A replay's
    commit of the same rows differs in file names and write time only; a file with other rows,
    or the files in another order, differ."""
    log = tmp_path / "t/_delta_log"

    def add(path: str, rows: int, low: int, written: str, data_change: bool = True) -> str:
        stats = {"numRecords": rows, "minValues": {"t": low, "_ingest_time": written},
                 "maxValues": {"t": low + 9, "_ingest_time": written}, "nullCount": {"t": 0, "_ingest_time": 0}}
        return json.dumps({"add": {"path": path, "partitionValues": {"d": "1"}, "dataChange": data_change,
                                   "stats": json.dumps(stats)}})

    commits = [[add("a", 3, 0, "x"), add("b", 2, 10, "x")],
               [add("c", 3, 0, "y"), add("d", 2, 10, "y"), add("e", 9, 0, "y", data_change=False)],
               [add("f", 2, 10, "y"), add("g", 3, 0, "y")],
               [add("h", 3, 1, "y"), add("i", 2, 10, "y")]]
    for version, actions in enumerate(commits):
        _write_log(log / f"{version:020d}.json", actions)
    table = str(tmp_path / "t")
    files = [delta_log.data_files(table, version, ("_ingest_time",)) for version in range(4)]
    assert files[0] == files[1] and files[2] != files[0] and files[3] != files[0]
    assert delta_log.data_files(table, 0) != delta_log.data_files(table, 1)  # the write time, unless ignored


def test_a_table_written_again_at_the_same_path_is_read_anew(tmp_path):
    """A long-lived process (the API server, a test process copying one lake to one path) must not
    keep the commits of a table that was deleted and written again: same path, same version."""
    import shutil

    table = tmp_path / "table"
    log = table / "_delta_log"

    def write(app_id: str) -> None:
        log.mkdir(parents=True)
        (log / f"{0:020d}.json").write_text(json.dumps({"txn": {"appId": app_id, "version": 0}}) + "\n")

    write("first-query")
    assert delta_log.transaction(str(table), 0)["appId"] == "first-query"
    shutil.rmtree(table)
    write("second-query, a longer id")
    assert delta_log.transaction(str(table), 0)["appId"] == "second-query, a longer id"


def test_source_log_paths_compare_with_listed_paths():
    """Spark records escaped URIs; fsspec lists plain paths (s3fs's without a scheme)."""
    assert file_source_log.listed_path("file:///tmp/a%20b/x.json") == "/tmp/a b/x.json"
    assert file_source_log.listed_path("/tmp/a/x.json") == "/tmp/a/x.json"
    assert file_source_log.listed_path("s3a://bucket/lake/a%20b/x.json") == "bucket/lake/a b/x.json"
    assert file_source_log.listed_path("s3://bucket/x.json") == "bucket/x.json"


@pytest.mark.parametrize("seed", range(20), ids=lambda seed: f"seed{seed}")
def test_undone_after_flags_every_append_of_a_range_a_later_restore_or_emptying_took_out(tmp_path, seed):
    """Random logs of appends, RESTOREs (to a version, or to a timestamp) and emptying DELETEs,
    against a plain-Python replay of which appends each version holds: an append of ``(start,
    end]`` that a version after ``end`` dropped while the version before it held it is always
    flagged; a range whose appends every later version holds, never."""
    import random

    from spark_jobs.control.rollback import lineage
    rng = random.Random(seed)
    log = tmp_path / "t/_delta_log"
    held: list[frozenset[int]] = []  # the appends each version holds
    for version in range(rng.randint(3, 12)):
        info = {"operation": "WRITE", "timestamp": 1000 * (version + 1)}
        actions = [{"add": {"path": f"f{version}", "dataChange": True}}]
        state = (held[-1] if held else frozenset()) | {version}
        draw = rng.random()
        if version and draw < 0.25:  # RESTORE to an earlier version (by number or by time)
            target = rng.randrange(version)
            parameters = {"version": target} if rng.random() < 0.5 else {"timestamp": f"1970-01-01 00:00:{target + 1:02d}"}
            info = {"operation": "RESTORE", "timestamp": 1000 * (version + 1), "operationParameters": parameters}
            actions = [{"remove": {"path": "x", "dataChange": True}}]
            state = held[target]
        elif version and draw < 0.35:  # an emptying DELETE
            info = {"operation": "DELETE", "timestamp": 1000 * (version + 1), "operationParameters": {"predicate": "[]"}}
            actions = [{"remove": {"path": "x", "dataChange": True}}]
            state = frozenset()
        held.append(state)
        _write_log(log / f"{version:020d}.json", [json.dumps({"commitInfo": info}), *map(json.dumps, actions)])
    table = str(tmp_path / "t")
    appends = [version for version, commit in enumerate(lineage.commits(table)) if commit.appends_only]
    for start in range(-1, len(held)):
        for end in range(start + 1, len(held)):
            in_range = [c for c in appends if start < c <= end]
            dropped = any(c in held[v - 1] and c not in held[v] for c in in_range for v in range(end + 1, len(held)))
            kept = all(c in held[v] for c in in_range for v in range(end, len(held)))
            flagged = lineage.undone_after(table, start, end)
            assert flagged or not dropped, (start, end, held)
            assert not flagged or not kept, (start, end, held)
