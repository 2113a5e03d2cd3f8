"""``spark_jobs/engine/stream_progress.py``: a streaming query's batches go into the run record
once each (batch ids, rows read, rows dropped as late, a progress entry) with one line per batch.

No JVM: the query is a stand-in for PySpark's ``StreamingQuery``, and only the query: it has the
one member the code reads, ``recentProgress``, whose entries have ``json``, the progress's JSON
text as Spark writes it. The record, the hop name and the progress callback are the real ones."""

from __future__ import annotations

import json

import pytest

from spark_jobs.engine.stream_progress import StreamProgress
from spark_jobs.model.records import RunRecord

pytestmark = pytest.mark.unit


class _Progress:
    """One ``StreamingQueryProgress``: its ``json`` text."""

    def __init__(self, entry: dict):
        self.json = json.dumps(entry)


class _Query:
    """The stand-in query: the progress entries Spark still holds (oldest first)."""

    def __init__(self, *entries: dict):
        self.recentProgress = [_Progress(entry) for entry in entries]


def _tracker(hop: str = "gold") -> tuple[StreamProgress, RunRecord, list[str]]:
    record = RunRecord(pipeline="ad_events", hop=hop, run_id="r1", mode="run-once")
    lines: list[str] = []
    return StreamProgress(record, hop, lines.append), record, lines


# A batch of a stateful hop, as Spark reports it (fields the code does not read left out).
GOLD_BATCH_0 = {
    "id": "5f0c",
    "runId": "9a1b",
    "name": "ad_events.gold",
    "timestamp": "2026-04-01T00:05:00.000Z",
    "batchId": 0,
    "numInputRows": 1200,
    "inputRowsPerSecond": 0.0,
    "processedRowsPerSecond": 400.04,
    "durationMs": {"addBatch": 2800, "latestOffset": 40, "triggerExecution": 3000},
    "eventTime": {"max": "2026-04-01T00:04:59.000Z", "watermark": "2026-04-01T00:00:00.000Z"},
    "stateOperators": [
        {"operatorName": "stateStoreSave", "numRowsTotal": 10, "numRowsDroppedByWatermark": 3},
        {"operatorName": "dedupe", "numRowsTotal": 5, "numRowsDroppedByWatermark": 4},
    ],
    "sources": [
        {
            "description": "DeltaSource[file:/lake/tables/silver]",
            "startOffset": None,
            "endOffset": {"reservoirVersion": 2, "index": -1},
            "numInputRows": 1200,
        }
    ],
    "sink": {"description": "ForeachBatchSink"},
}
# What Spark reports between batches when nothing new came: the next batch's id, no addBatch.
IDLE_AFTER_0 = {
    "timestamp": "2026-04-01T00:05:10.000Z",
    "batchId": 1,
    "numInputRows": 0,
    "durationMs": {"latestOffset": 3, "triggerExecution": 3},
    "stateOperators": [{"numRowsDroppedByWatermark": 99}],
}
GOLD_BATCH_1 = {
    "timestamp": "2026-04-01T00:06:00.000Z",
    "batchId": 1,
    "numInputRows": 12345,
    "processedRowsPerSecond": 12345.66,
    "durationMs": {"addBatch": 1000, "triggerExecution": 1100},
    "eventTime": {"watermark": "2026-04-01T00:01:00.000Z"},
    "stateOperators": [{"numRowsDroppedByWatermark": 0}],
    "sources": [
        {
            "startOffset": {"reservoirVersion": 2, "index": -1},
            "endOffset": {"reservoirVersion": 3, "index": -1},
        }
    ],
}


def test_a_batch_goes_into_the_record_with_its_rows_late_drops_and_progress_entry():
    tracker, record, lines = _tracker()
    tracker.note(_Query(GOLD_BATCH_0))

    assert record.batch_ids == [0]
    assert record.rows_in == 1200
    assert record.rows_dropped_late == 3 + 4  # summed over the state operators
    assert record.progress == [
        {
            "batch_id": 0,
            "timestamp": "2026-04-01T00:05:00.000Z",
            "rows": 1200,
            "rows_per_second": 400.0,
            "duration_ms": {"addBatch": 2800, "latestOffset": 40, "triggerExecution": 3000},
            "watermark": "2026-04-01T00:00:00.000Z",
            "rows_dropped_late": 7,
            "sources": [{"start": None, "end": {"reservoirVersion": 2, "index": -1}}],
        }
    ]
    assert lines == ["[gold] batch 0: 1,200 rows (400 rows/s), 7 late rows dropped"]


def test_each_batch_is_counted_once_however_often_spark_still_lists_it():
    """``recentProgress`` keeps the last entries: each call sees the earlier batches again."""
    tracker, record, lines = _tracker()
    tracker.note(_Query(GOLD_BATCH_0))
    tracker.note(_Query(GOLD_BATCH_0, IDLE_AFTER_0))
    tracker.note(_Query(GOLD_BATCH_0, IDLE_AFTER_0, GOLD_BATCH_1))
    tracker.note(_Query(GOLD_BATCH_0, IDLE_AFTER_0, GOLD_BATCH_1))

    assert record.batch_ids == [0, 1]
    assert record.rows_in == 1200 + 12345
    assert record.rows_dropped_late == 7
    assert [entry["batch_id"] for entry in record.progress] == [0, 1]
    assert record.progress[1]["rows_per_second"] == 12345.7
    assert record.progress[1]["sources"] == [
        {
            "start": {"reservoirVersion": 2, "index": -1},
            "end": {"reservoirVersion": 3, "index": -1},
        }
    ]
    # no drops in batch 1: its line says nothing of late rows
    assert lines == [
        "[gold] batch 0: 1,200 rows (400 rows/s), 7 late rows dropped",
        "[gold] batch 1: 12,345 rows (12,346 rows/s)",
    ]


def test_an_idle_progress_is_no_batch_and_does_not_hide_the_batch_it_names():
    tracker, record, lines = _tracker()
    tracker.note(_Query(IDLE_AFTER_0))
    assert (record.batch_ids, record.rows_in, record.rows_dropped_late) == ([], 0, 0)
    assert record.progress == [] and lines == []

    # the batch the idle entry named runs later: it is counted
    tracker.note(_Query(IDLE_AFTER_0, GOLD_BATCH_1))
    assert record.batch_ids == [1] and record.rows_in == 12345


def test_an_ingest_batch_counts_the_lines_it_read_not_the_files():
    """A whole-file source reports files as ``numInputRows``; its observed ``lines_read``
    metric is the rows."""
    tracker, record, lines = _tracker("bronze")
    tracker.note(
        _Query(
            {
                "batchId": 4,
                "numInputRows": 2,
                "processedRowsPerSecond": 1.5,
                "durationMs": {"addBatch": 10},
                "observedMetrics": {"lines_read": {"rows": 240}},
            }
        )
    )
    assert record.rows_in == 240
    assert record.progress[0]["rows"] == 240
    assert lines == ["[bronze] batch 4: 240 rows (2 rows/s)"]


def test_a_batch_with_only_an_id_and_a_duration_counts_zero_rows():
    tracker, record, lines = _tracker("silver")
    tracker.note(_Query({"batchId": 5, "durationMs": {"addBatch": 7}}))
    assert record.batch_ids == [5]
    assert (record.rows_in, record.rows_dropped_late) == (0, 0)
    assert record.progress == [
        {
            "batch_id": 5,
            "timestamp": None,
            "rows": 0,
            "rows_per_second": 0.0,
            "duration_ms": {"addBatch": 7},
            "watermark": None,
            "rows_dropped_late": 0,
            "sources": [],
        }
    ]
    assert lines == ["[silver] batch 5: 0 rows (0 rows/s)"]


def test_a_query_with_no_progress_yet_changes_nothing():
    tracker, record, lines = _tracker()
    tracker.note(_Query())
    assert (record.batch_ids, record.rows_in, record.progress, lines) == ([], 0, [], [])
