"""``spark_jobs/logs/file_source_log.py`` on hand-made logs: the file source's log read from
its newest compaction, truncated as Spark cleaned it up, its paths compared with listed
ones (no Spark)."""

from __future__ import annotations

import json

import pytest

from spark_jobs.logs import file_source_log
from tests.unit.spark_jobs._helpers import _write_log
from tests.unit.spark_jobs.logs._helpers import _log_file

pytestmark = pytest.mark.unit


def test_file_source_log_reads_newest_compact_then_later_batches(tmp_path):
    ckpt = tmp_path / "ckpt"
    entry = lambda name, batch: json.dumps(
        {"path": f"file:///land/{name}", "timestamp": 1, "batchId": batch}
    )
    _write_log(ckpt / "sources/0/0", ["v1", entry("a", 0)])
    _write_log(ckpt / "sources/0/1.compact", ["v1", entry("a", 0), entry("b", 1)])
    _write_log(ckpt / "sources/0/2", ["v1", entry("c", 2), entry("d", 2)])
    _write_log(ckpt / "sources/0/.2.crc", ["junk"])
    names = [e["path"].rsplit("/", 1)[-1] for e in file_source_log.file_source_entries(str(ckpt))]
    assert names == ["a", "b", "c", "d"]


def test_source_log_paths_compare_with_listed_paths():
    """Spark records escaped URIs; fsspec lists plain paths (s3fs's without a scheme)."""
    assert file_source_log.listed_path("file:///tmp/a%20b/x.json") == "/tmp/a b/x.json"
    assert file_source_log.listed_path("/tmp/a/x.json") == "/tmp/a/x.json"
    assert file_source_log.listed_path("s3a://bucket/lake/a%20b/x.json") == "bucket/lake/a b/x.json"
    assert file_source_log.listed_path("s3://bucket/x.json") == "bucket/x.json"


def _entry(batch: int, number: int) -> dict:
    return {"path": f"file:///landing/f{batch}-{number}.json", "timestamp": 1, "batchId": batch}


def test_truncating_a_compacted_source_log_rebuilds_what_spark_cleaned_up(tmp_path):
    # Interval 3: compactions at 2, 5. Spark has deleted 0, 1, 2.compact, 3, 4 after 5.compact.
    source = tmp_path / "ckpt/sources/0"
    source.mkdir(parents=True)
    everything = [_entry(batch, n) for batch in range(8) for n in range(2)]
    _log_file(source / "5.compact", [e for e in everything if e["batchId"] <= 5])
    for batch in (6, 7):
        _log_file(source / str(batch), [e for e in everything if e["batchId"] == batch])
    checkpoint = str(tmp_path / "ckpt")

    for _attempt in range(2):  # a second pass (a re-run after a crash) changes nothing more
        file_source_log.truncate_file_source(checkpoint, 3, compact_interval=3)
        names = sorted(path.name for path in source.iterdir() if not path.name.startswith("."))
        assert names == ["2.compact", "3"]
        assert file_source_log.file_source_entries(checkpoint) == [
            e for e in everything if e["batchId"] <= 3
        ]
    assert not (source / ".5.compact.crc").exists() and not (source / ".7.crc").exists()

    file_source_log.truncate_file_source(checkpoint, -1, compact_interval=3)
    assert list(source.iterdir()) == [] and file_source_log.file_source_entries(checkpoint) == []
