"""Run records: one small JSON file per hop and run in ``_ops/runs/<pipeline>/`` (DESIGN.md s. 7).

``status``, the quality gates, rollback and the UI read these and the checkpoints, never a JVM.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass, field

from spark_jobs.lake import Lake, filesystem


def new_run_id() -> str:
    """A sortable, unique run id: UTC time plus a short random suffix."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:6]


@dataclass
class TableChange:
    """A table's version before and after a run (None: no table yet)."""

    version_before: int | None
    version_after: int | None


@dataclass
class RunRecord:
    """What one hop did in one run."""

    pipeline: str
    hop: str
    run_id: str
    mode: str
    status: str = "running"
    started_at: float = field(default_factory=time.time)
    ended_at: float | None = None
    duration_s: float | None = None
    query_id: str | None = None
    batch_ids: list[int] = field(default_factory=list)
    tables: dict[str, TableChange] = field(default_factory=dict)
    rows_in: int = 0
    rows_out: int = 0
    rows_quarantined: int = 0
    rows_dropped_late: int = 0
    range_start: str | None = None
    range_end: str | None = None
    progress: list[dict] = field(default_factory=list)
    error: str | None = None
    quality: dict | None = None  # the gate's summary (spark_jobs.quality), once checked

    def finish(self, status: str, error: str | None = None) -> None:
        self.status = status
        self.error = error
        self.ended_at = time.time()
        self.duration_s = round(self.ended_at - self.started_at, 3)

    def to_dict(self) -> dict:
        return asdict(self)


def write_record(lake: Lake, record: RunRecord) -> str:
    """Write (or overwrite) the record atomically; return its path."""
    return write_json(lake.runs, f"{record.run_id}.{record.hop}.json", record.to_dict())


def _read_folder(folder: str) -> list[dict]:
    fs = filesystem(folder)
    if not fs.exists(folder):
        return []
    documents = []
    for path in sorted(fs.ls(folder, detail=False)):
        name = path.rsplit("/", 1)[-1]
        if name.startswith(".") or not name.endswith(".json"):
            continue
        with fs.open(path, "r") as handle:
            documents.append(json.load(handle))
    return documents


def write_json(folder: str, name: str, document: dict) -> str:
    """Write ``folder/name`` atomically (a temp file, then rename); return its path."""
    fs = filesystem(folder)
    fs.makedirs(folder, exist_ok=True)
    path, staging = f"{folder}/{name}", f"{folder}/.{name}.tmp"
    with fs.open(staging, "w") as handle:
        json.dump(document, handle, indent=2, default=str)
    fs.mv(staging, path)
    return path


def read_records(lake: Lake, hop: str | None = None) -> list[dict]:
    """Every run record of the pipeline (optionally one hop), oldest first."""
    records = [record for record in _read_folder(lake.runs) if hop is None or record.get("hop") == hop]
    return sorted(records, key=lambda record: record.get("started_at") or 0)


def read_rollbacks(lake: Lake) -> list[dict]:
    """Every rollback journal of the pipeline (audit records), oldest first."""
    return sorted(_read_folder(lake.rollbacks), key=lambda journal: journal.get("created_at") or 0)
