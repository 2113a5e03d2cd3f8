"""A streaming query's progress, batch by batch, into the run record: batch ids, rows read, rows
dropped as late, and each batch's progress entry; a line per batch to the run's progress."""

from __future__ import annotations

import json

from spark_jobs.engine.progress import Progress
from spark_jobs.engine.sources import LINES_READ
from spark_jobs.model.records import RunRecord


class StreamProgress:
    """Reads a query's ``recentProgress`` into ``record``, each batch once."""

    def __init__(self, record: RunRecord, hop_name: str, progress: Progress):
        self.record, self.hop_name, self.progress = record, hop_name, progress
        self._seen: set[int] = set()

    def note(self, query) -> None:
        for progress in query.recentProgress:
            entry = json.loads(progress.json)
            batch_id = entry["batchId"]
            # An idle progress (no batch ran: nothing new) names the next batch id but
            # has no addBatch.
            if batch_id in self._seen or "addBatch" not in entry.get("durationMs", {}):
                continue
            self._seen.add(batch_id)
            self._add(batch_id, entry)

    def _add(self, batch_id: int, entry: dict) -> None:
        # A source that reads whole files counts its rows itself (numInputRows would be files).
        lines = entry.get("observedMetrics", {}).get(LINES_READ)
        rows = int(lines["rows"] if lines else entry.get("numInputRows") or 0)
        rate = float(entry.get("processedRowsPerSecond") or 0.0)
        dropped = sum(
            int(op.get("numRowsDroppedByWatermark") or 0) for op in entry.get("stateOperators", [])
        )
        record = self.record
        record.batch_ids.append(batch_id)
        record.rows_in += rows
        record.rows_dropped_late += dropped
        record.progress.append(
            {
                "batch_id": batch_id,
                "timestamp": entry.get("timestamp"),
                "rows": rows,
                "rows_per_second": round(rate, 1),
                "duration_ms": entry.get("durationMs", {}),
                "watermark": entry.get("eventTime", {}).get("watermark"),
                "rows_dropped_late": dropped,
                "sources": [
                    {"start": source.get("startOffset"), "end": source.get("endOffset")}
                    for source in entry.get("sources", [])
                ],
            }
        )
        late = f", {dropped} late rows dropped" if dropped else ""
        self.progress(
            f"[{self.hop_name}] batch {batch_id}: {rows:,} rows ({rate:,.0f} rows/s){late}"
        )
