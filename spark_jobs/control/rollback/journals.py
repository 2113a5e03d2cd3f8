"""Where rollbacks are recorded: one journal per rollback in
``_ops/rollbacks/<pipeline>/<id>.json``, its steps and status (also the audit record)."""

from __future__ import annotations

from spark_jobs.control.rollback.plans import Journal
from spark_jobs.logs.fs import read_json_folder, write_json
from spark_jobs.model.lake import Lake


def write_journal(lake: Lake, journal: Journal) -> str:
    """Write (or overwrite) a rollback journal, the audit record of one rollback."""
    return write_json(lake.rollbacks, f"{journal.rollback_id}.json", journal.to_dict())


def read_rollbacks(lake: Lake) -> list[Journal]:
    """Every rollback journal of the pipeline (audit records), oldest first."""
    journals = [Journal.from_dict(document) for document in read_json_folder(lake.rollbacks)]
    return sorted(journals, key=lambda journal: journal.created_at or 0)
