"""What a rollback plan takes away, for people rather than experts: per table the rows and files
the commits it undoes wrote, the runs it undoes with their times, the hops below that it touches,
and what the replay reads again. Read from the Delta logs and the run records: no JVM."""

from __future__ import annotations

from spark_jobs.control.rollback.plans import Plan
from spark_jobs.logs import delta_log
from spark_jobs.logs.ops import read_records
from spark_jobs.model.lake import Lake


def _files_added(table: str, after: int, upto: int | None) -> int:
    if upto is None:
        return 0
    return sum(
        1
        for version in range(after + 1, upto + 1)
        for action in delta_log.read_commit(table, version)
        if "add" in action
    )


def takes_away(lake: Lake, plan: Plan) -> list[dict]:
    """One entry per hop the plan undoes batches of: its tables (rows and files written by the
    commits undone), the runs whose batches it undoes (id and start time, newest first) and what
    its next run reads again."""
    found = []
    for step in plan.hops:
        if not step.undone or step.refused:
            continue
        tables = [
            {
                "table": each.label,
                "rows": delta_log.rows_written(each.table, each.restore_to, each.version_now),
                "files": _files_added(each.table, each.restore_to, each.version_now),
                "version_now": each.version_now,
                "back_to": each.restore_to,
            }
            for each in step.tables
        ]
        # A replay after an earlier rollback used the undone batch ids again under a new query
        # id: the runs undone are those of the query the plan rolls back.
        undone = set(step.undone)
        runs = [
            {
                "run_id": record.get("run_id"),
                "started_at": record.get("started_at"),
                "mode": record.get("mode"),
            }
            for record in reversed(read_records(lake, step.hop))
            if record.get("query_id") == step.old_query_id
            and undone & set(record.get("batch_ids") or [])
        ]
        found.append(
            {
                "hop": step.hop,
                "below": step.hop != plan.request.hop,
                "batches": sorted(undone),
                "tables": tables,
                "runs": runs,
                "reread": step.reread,
            }
        )
    return found
