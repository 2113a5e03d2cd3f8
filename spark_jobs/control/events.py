"""What happened to a pipeline, as events: each derived from the ``_ops`` records
(:mod:`spark_jobs.logs.ops`), which stay the one truth the control layer reads, and appended to
the lake's event log table (:mod:`spark_jobs.logs.event_log`) by :func:`sync`.

Every event has a stable id built from the record it comes from, so a sync after a retried task,
a killed command or another sync appends only what the table does not hold yet: each event goes
in once. The service syncs after every command that writes records; ``lakehouse events`` syncs
before it reads, so an event whose command was killed before its sync still arrives.

The event types (docs/guides/event-log.md):

- ``run_started``, ``batch``, ``run_finished``: a hop's run (stream, backfill, repair) from its
  run record; one ``batch`` per micro-batch of a stream;
- ``gate``: the quality gate's result on what the run wrote;
- ``rollback_started``, ``rollback_finished``: a rollback's plan and its execution (a refresh's
  rollback too);
- ``maintenance``: one ``lakehouse maintain``;
- ``freshness_alert``: a missed freshness deadline;
- ``refused``: a command the platform refused (a pipeline busy, an unfinished rollback, data a
  stream must read gone, a code change its state cannot follow...).
"""

from __future__ import annotations

from spark_jobs.control.rollback.journals import read_rollbacks
from spark_jobs.logs import event_log, ops
from spark_jobs.logs.event_log import Event
from spark_jobs.model.lake import Lake
from spark_jobs.model.retention import records_ms
from spark_jobs.model.times import epoch_seconds, now_s

# The counts of a run record a ``run_finished`` event carries.
_RUN_COUNTS = (
    "rows_in",
    "rows_out",
    "rows_quarantined",
    "rows_dropped_late",
    "rows_dropped_by_rule",
    "rows_rescued",
    "rows_skipped",
    "rows_deleted",
    "live_keys",
)


def _airflow(origin: dict | None) -> dict:
    origin = origin or {}
    return {key: origin.get(key) for key in ("dag_id", "dag_run_id", "task_id")}


def run_events(record: dict) -> list[Event]:
    """The events of one hop's run record: started, each batch, finished, its gate."""
    pipeline, hop, run_id = record["pipeline"], record["hop"], record["run_id"]
    key = f"{pipeline}/run/{run_id}/{hop}"
    origin = record.get("origin") or {}
    common = {"pipeline": pipeline, "hop": hop, "run_id": run_id, **_airflow(origin)}
    mode = record.get("mode")
    what = "repair backfill" if record.get("repair") else mode
    events = [
        Event(
            f"{key}/started",
            record["started_at"],
            event_type="run_started",
            message=f"{hop}: {what} {run_id} started",
            details={"mode": mode, "repair": bool(record.get("repair")), "origin": origin}
            | {"range": [record.get("range_start"), record.get("range_end")]},
            **common,
        )
    ]
    for entry in record.get("progress") or []:
        batch = entry.get("batch_id")
        at = entry.get("timestamp")
        events.append(
            Event(
                f"{key}/batch/{batch}",
                epoch_seconds(at) or record["started_at"],
                event_type="batch",
                message=f"{hop}: batch {batch} read {int(entry.get('rows') or 0):,} rows",
                batch=batch,
                details={
                    name: entry.get(name)
                    for name in ("rows", "rows_per_second", "watermark", "rows_dropped_late")
                }
                | {"duration_ms": (entry.get("duration_ms") or {}).get("triggerExecution")},
                **common,
            )
        )
    status = record.get("status")
    if record.get("ended_at") is None or status == "running":
        return events
    counts = {name: record.get(name) for name in _RUN_COUNTS}
    events.append(
        Event(
            f"{key}/finished",
            record["ended_at"],
            event_type="run_finished",
            level="ERROR" if status == "failed" else "INFO",
            message=_finished_message(record),
            details=counts
            | {
                "status": status,
                "mode": mode,
                "batch_ids": record.get("batch_ids") or [],
                "duration_s": record.get("duration_s"),
                "watermark": _last_watermark(record),
                "error": record.get("error"),
                "tables": record.get("tables") or {},
            },
            **common,
        )
    )
    if gate := record.get("quality"):
        verdict = gate.get("gate")
        level = {"failed": "ERROR"}.get(verdict, "WARN" if gate.get("warned") else "INFO")
        failed, warned = gate.get("failed") or [], gate.get("warned") or []
        events.append(
            Event(
                f"{key}/gate",
                record["ended_at"] + float(gate.get("seconds") or 0),
                event_type="gate",
                level=level,
                message=f"{hop}: gate {verdict} on {int(gate.get('rows') or 0):,} rows"
                + (f", failed {', '.join(failed)}" if failed else "")
                + (f", warned {', '.join(warned)}" if warned else ""),
                details={name: gate.get(name) for name in ("gate", "rows", "failed", "warned")},
                **common,
            )
        )
    return events


def _finished_message(record: dict) -> str:
    hop, status = record["hop"], record.get("status")
    if status == "failed":
        return f"{hop}: {record.get('mode')} {record['run_id']} failed: {record.get('error')}"
    batches = record.get("batch_ids") or []
    return (
        f"{hop}: {record.get('mode')} {record['run_id']} {status}, {len(batches)} batches, rows "
        f"in {int(record.get('rows_in') or 0):,} out {int(record.get('rows_out') or 0):,} "
        f"quarantined {int(record.get('rows_quarantined') or 0):,}"
    )


def _last_watermark(record: dict) -> str | None:
    marks = [entry.get("watermark") for entry in record.get("progress") or []]
    return next((mark for mark in reversed(marks) if mark), None)


def rollback_events(pipeline: str, journal: dict) -> list[Event]:
    """A rollback journal's events: its plan (started) and, once done, its end."""
    plan = journal.get("plan") or {}
    rollback_id = plan.get("rollback_id")
    request = plan.get("request") or {}
    origin = journal.get("origin") or {}
    key = f"{pipeline}/rollback/{rollback_id}"
    hops = [step.get("hop") for step in plan.get("hops") or []]
    common = {"pipeline": pipeline, "hop": request.get("hop"), **_airflow(origin)}
    who = f" by {origin['user']} through {origin.get('interface')}" if origin.get("user") else ""
    events = [
        Event(
            f"{key}/started",
            journal.get("created_at") or 0.0,
            event_type="rollback_started",
            level="WARN",
            message=f"rollback {rollback_id} of {request.get('hop')} to batch "
            f"{plan.get('requested_batch')} started{who}: undoes {', '.join(hops) or 'nothing'}",
            details={
                "rollback_id": rollback_id,
                "request": request,
                "requested_batch": plan.get("requested_batch"),
                "hops": [
                    {
                        "hop": step.get("hop"),
                        "target_batch": step.get("target_batch"),
                        "undone": step.get("undone"),
                    }
                    for step in plan.get("hops") or []
                ],
                "origin": origin,
            },
            **common,
        )
    ]
    if journal.get("status") == "succeeded":
        events.append(
            Event(
                f"{key}/finished",
                journal.get("finished_at") or journal.get("created_at") or 0.0,
                event_type="rollback_finished",
                message=f"rollback {rollback_id} done in {journal.get('duration_s')} s",
                details={
                    "rollback_id": rollback_id,
                    "restored": journal.get("restored") or {},
                    "duration_s": journal.get("duration_s"),
                },
                **common,
            )
        )
    return events


def maintenance_event(pipeline: str, record: dict) -> list[Event]:
    if record.get("ended_at") is None:
        return []
    totals = record.get("totals") or {}
    dry = " (dry run)" if record.get("dry_run") else ""
    return [
        Event(
            f"{pipeline}/maintenance/{record['maintenance_id']}",
            record["ended_at"],
            pipeline=pipeline,
            event_type="maintenance",
            message=f"maintenance{dry}: {totals.get('files_compacted', 0)} files compacted, "
            f"{totals.get('files_vacuumed', 0)} vacuumed, {totals.get('records_pruned', 0)} "
            "records pruned",
            details={"dry_run": bool(record.get("dry_run")), "totals": totals},
            **_airflow(record.get("origin")),
        )
    ]


def alert_event(pipeline: str, alert: dict) -> list[Event]:
    at = epoch_seconds(alert.get("at"))
    if at is None:
        return []
    return [
        Event(
            f"{pipeline}/alert/{alert.get('at')}/{alert.get('dag_run')}",
            at,
            pipeline=pipeline,
            event_type="freshness_alert",
            level="WARN",
            message=f"freshness deadline of {alert.get('freshness')} missed; stale hops: "
            f"{', '.join(alert.get('stale') or []) or 'none yet'}",
            dag_run_id=alert.get("dag_run"),
            details={key: alert.get(key) for key in ("freshness", "stale", "commit_age_s")},
        )
    ]


def refusal_event(pipeline: str, refusal: dict) -> list[Event]:
    origin = refusal.get("origin") or {}
    return [
        Event(
            f"{pipeline}/refused/{refusal['refusal_id']}",
            float(refusal["at"]),
            pipeline=pipeline,
            hop=refusal.get("hop"),
            run_id=refusal.get("run_id"),
            event_type="refused",
            level="ERROR",
            message=f"{origin.get('command') or 'a command'} refused: {refusal.get('message')}",
            details={"error": refusal.get("error"), "origin": origin},
            **_airflow(origin),
        )
    ]


def events_of(lake: Lake) -> list[Event]:
    """Every event the pipeline's ``_ops`` records tell, in no particular order."""
    name = lake.spec.name
    events = [event for record in ops.read_records(lake) for event in run_events(record)]
    for journal in read_rollbacks(lake):
        events.extend(rollback_events(name, journal.to_dict()))
    for record in ops.read_maintenance(lake):
        events.extend(maintenance_event(name, record))
    for alert in ops.read_alerts(lake):
        events.extend(alert_event(name, alert))
    for refusal in ops.read_refusals(lake):
        events.extend(refusal_event(name, refusal))
    return events


def sync(lake: Lake) -> int:
    """Append the pipeline's events the event log does not hold yet (each exactly once), except
    those older than ``retention.records`` (which ``maintain`` deletes); how many went in."""
    cutoff = now_s() - records_ms(lake.spec.retention) / 1000
    fresh = [event for event in events_of(lake) if event.at >= cutoff]
    return event_log.append_missing(lake.events, lake.spec.name, fresh)


def maintain(lake: Lake, now_ms: int, dry_run: bool) -> dict[str, int]:
    """The event log's part of ``maintain``: the pipeline's events older than
    ``retention.records`` deleted, then the table's small files compacted and the files no
    version needs for a week vacuumed (a dry run counts what would be deleted and changes
    nothing)."""
    cutoff = now_ms / 1000 - records_ms(lake.spec.retention) / 1000
    deleted = event_log.delete_before(lake.events, lake.spec.name, cutoff, dry_run)
    done = {"events_deleted": deleted, "files_compacted": 0, "files_vacuumed": 0}
    if not dry_run:
        done |= event_log.compact(lake.events)
    return done


def maintain_line(done: dict[str, int]) -> str:
    return (
        f"{done['events_deleted']} events past retention.records deleted, "
        f"{done['files_compacted']} files compacted, {done['files_vacuumed']} vacuumed"
    )
