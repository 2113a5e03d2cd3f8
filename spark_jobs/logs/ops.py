"""The ``_ops`` folder as plain files: run records (``_ops/runs/<pipeline>/``) and rollback
journals (``_ops/rollbacks/<pipeline>/``). ``status``, the quality gates, rollback and the UI
read these and the checkpoints, never a JVM (README: "Airflow")."""

from __future__ import annotations

from spark_jobs.logs.fs import read_json_folder, write_json
from spark_jobs.model.lake import Lake
from spark_jobs.model.records import RunRecord


def write_record(lake: Lake, record: RunRecord) -> str:
    """Write (or overwrite) the record atomically; return its path."""
    return write_json(lake.runs, f"{record.run_id}.{record.hop}.json", record.to_dict())


def read_records(lake: Lake, hop: str | None = None) -> list[dict]:
    """Every run record of the pipeline (optionally one hop), oldest first."""
    records = [record for record in read_json_folder(lake.runs) if hop is None or record.get("hop") == hop]
    return sorted(records, key=lambda record: record.get("started_at") or 0)


def write_journal(lake: Lake, journal: dict) -> str:
    """Write (or overwrite) a rollback journal, the audit record of one rollback."""
    return write_json(lake.rollbacks, f"{journal['plan']['rollback_id']}.json", journal)


def read_rollbacks(lake: Lake) -> list[dict]:
    """Every rollback journal of the pipeline (audit records), oldest first."""
    return sorted(read_json_folder(lake.rollbacks), key=lambda journal: journal.get("created_at") or 0)
