"""Run records: what one hop did in one run, kept as one small JSON file per hop and run in
``_ops/runs/<pipeline>/`` (written and read by :mod:`spark_jobs.logs.ops`)."""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field

from spark_jobs.model.origin import current as current_origin
from spark_jobs.model.times import now_s


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
    started_at: float = field(default_factory=now_s)
    ended_at: float | None = None
    duration_s: float | None = None
    query_id: str | None = None
    batch_ids: list[int] = field(default_factory=list)
    tables: dict[str, TableChange] = field(default_factory=dict)
    rows_in: int = 0
    rows_out: int = 0
    rows_quarantined: int = 0
    rows_dropped_late: int = 0
    # Rows an ingest hop wrote with fields its schema does not have (their ``_rescued`` column).
    rows_rescued: int | None = None
    # Records an ingest hop's parse left out, in no table (``format: debezium``'s tombstones).
    rows_skipped: int | None = None
    # Rows a changes hop's MERGEs deleted from its table: keys deleted, history versions replaced.
    rows_deleted: int | None = None
    # The keys a changes hop's table holds a live row of when the run ended: its rows (type 1),
    # its open versions (type 2, one per live key).
    live_keys: int | None = None
    range_start: str | None = None
    range_end: str | None = None
    progress: list[dict] = field(default_factory=list)
    error: str | None = None
    quality: dict | None = None  # the gate's summary (spark_jobs.engine.quality), once checked
    # The streaming query's fingerprint (spark_jobs.control.fingerprint): code, query, state.
    fingerprint: dict | None = None
    # A backfill a run made after its stream (spark_jobs.control.join_repairs), not one
    # a user asked for.
    repair: bool = False
    # The gate's counts, taken as the run's batches wrote their rows (spark_jobs.engine.quality.
    # counted_rules): the suite's digest, "batches", "rows" and each rule's "u<i>"/"c<i>".
    counted: dict | None = None
    # Rows each ``drop`` rule took out of the run's writes (to the quarantine), by rule name.
    rows_dropped_by_rule: dict[str, int] = field(default_factory=dict)
    # Who asked for the run and through which interface (spark_jobs.model.origin).
    origin: dict = field(default_factory=current_origin)

    def finish(self, status: str, error: str | None = None) -> None:
        self.status = status
        self.error = error
        self.ended_at = now_s()
        self.duration_s = round(self.ended_at - self.started_at, 3)

    def to_dict(self) -> dict:
        return asdict(self)


def new_maintenance_id() -> str:
    """A sortable, unique maintenance id (as a run id)."""
    return "maintain-" + new_run_id()


@dataclass
class MaintenanceRecord:
    """What one ``lakehouse maintain`` did (or with ``dry_run``, would do): one entry per table
    (:func:`spark_jobs.engine.maintenance.maintain_table`), kept in
    ``_ops/maintenance/<pipeline>/``."""

    pipeline: str
    maintenance_id: str = field(default_factory=new_maintenance_id)
    dry_run: bool = False
    started_at: float = field(default_factory=now_s)
    ended_at: float | None = None
    duration_s: float | None = None
    tables: list[dict] = field(default_factory=list)
    # per hop whose old state files went (control.removable)
    state: list[dict] = field(default_factory=list)
    # per landing folder (spark_jobs.control.removable.expired)
    landing: list[dict] = field(default_factory=list)
    records: dict[str, int] = field(default_factory=dict)  # records deleted, by kind
    # the event log: the pipeline's events deleted, files compacted and vacuumed
    event_log: dict[str, int] = field(default_factory=dict)
    # Who asked for it and through which interface (spark_jobs.model.origin).
    origin: dict = field(default_factory=lambda: current_origin("maintain"))

    def finish(self) -> None:
        self.ended_at = now_s()
        self.duration_s = round(self.ended_at - self.started_at, 3)

    def totals(self) -> dict[str, int]:
        """Over every table: current files and stored bytes before and after, files compacted away
        and files (and bytes) vacuumed, log files deleted; state files deleted, landing files and
        records pruned (0 in a dry run)."""
        keys = (
            "files_before",
            "files_after",
            "stored_before",
            "stored_after",
            "files_compacted",
            "files_vacuumed",
            "bytes_vacuumed",
            "log_files_deleted",
        )
        totals = {key: sum(int(table.get(key) or 0) for table in self.tables) for key in keys}
        return totals | {
            "state_files_deleted": 0
            if self.dry_run
            else sum(int(entry["state_files"]) for entry in self.state),
            "landing_pruned": 0
            if self.dry_run
            else sum(int(entry["files"]) for entry in self.landing),
            "records_pruned": 0 if self.dry_run else sum(self.records.values()),
        }

    def to_dict(self) -> dict:
        return asdict(self) | {"totals": self.totals()}
