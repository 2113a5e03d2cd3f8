"""The ``_ops`` folder as plain files: run records (``_ops/runs/<pipeline>/``), rollback
journals (``_ops/rollbacks/<pipeline>/``), missed freshness deadlines (``_ops/alerts/<pipeline>/``),
maintenance records (``_ops/maintenance/<pipeline>/``) and refused commands
(``_ops/refusals/<pipeline>/``). ``status``, the quality gates,
rollback and the UI read these and the checkpoints, never a JVM (docs/guides/airflow.md)."""

from __future__ import annotations

from spark_jobs.logs.fs import read_json, read_json_folder, write_json
from spark_jobs.model.lake import Lake
from spark_jobs.model.records import MaintenanceRecord, RunRecord


def write_record(lake: Lake, record: RunRecord) -> str:
    """Write (or overwrite) the record atomically; return its path."""
    return write_json(lake.runs, f"{record.run_id}.{record.hop}.json", record.to_dict())


def read_record(lake: Lake, run_id: str, hop: str) -> dict | None:
    """The record of one run of one hop (None: that run did not run that hop)."""
    return read_json(f"{lake.runs}/{run_id}.{hop}.json")


def read_records(lake: Lake, hop: str | None = None) -> list[dict]:
    """Every run record of the pipeline (optionally one hop), oldest first."""
    records = [
        record for record in read_json_folder(lake.runs) if hop is None or record.get("hop") == hop
    ]
    return sorted(records, key=lambda record: record.get("started_at") or 0)


def write_alert(lake: Lake, alert: dict) -> str:
    """Write a missed freshness deadline (its ``at`` and ``dag_run`` name the file)."""
    name = "".join(
        c if c.isalnum() or c in "-_." else "_" for c in f"{alert['at']}.{alert['dag_run']}"
    )
    return write_json(lake.alerts, f"{name}.json", alert)


def read_alerts(lake: Lake) -> list[dict]:
    """Every missed freshness deadline of the pipeline, oldest first."""
    return sorted(read_json_folder(lake.alerts), key=lambda alert: alert.get("at") or "")


def write_maintenance(lake: Lake, record: MaintenanceRecord) -> str:
    """Write the record of one ``lakehouse maintain``."""
    return write_json(lake.maintenance, f"{record.maintenance_id}.json", record.to_dict())


def read_maintenance(lake: Lake) -> list[dict]:
    """Every maintenance record of the pipeline, oldest first."""
    return sorted(
        read_json_folder(lake.maintenance), key=lambda record: record.get("started_at") or 0
    )


def write_refusal(lake: Lake, refusal: dict) -> str:
    """Write a command the platform refused (its ``refusal_id`` names the file)."""
    return write_json(lake.refusals, f"{refusal['refusal_id']}.json", refusal)


def read_refusals(lake: Lake) -> list[dict]:
    """Every refused command of the pipeline, oldest first."""
    return sorted(read_json_folder(lake.refusals), key=lambda refusal: refusal.get("at") or 0)
