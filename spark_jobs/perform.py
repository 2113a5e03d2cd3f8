"""Perform a :class:`~spark_jobs.model.calls.Call`: its service function, then what it prints and
its exit code. The ``lakehouse`` CLI and a DAG run's shared driver both come here, so a task's
log shows the same lines, JSON and exit code whichever way its command ran.

Errors a user can fix print one line (``error: ...``) and exit 2 (1 for a failed run); with
``as_json`` one JSON document goes to stdout and no progress; without it, progress lines go to
stderr, each with the seconds since the command began.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

from spark_jobs import service
from spark_jobs.model.calls import (
    BackfillCall,
    Call,
    MaintainCall,
    RefreshCall,
    RollbackCall,
    RunCall,
)
from spark_jobs.model.errors import LakehouseError, RollbackRefused
from spark_jobs.model.times import parse_time
from spark_jobs.results import RunResult


def emit(as_json: bool, document: dict, text: str) -> None:
    """The command's result: ``document`` as JSON, or ``text``."""
    print(json.dumps(document, indent=2, default=str) if as_json else text)


def progress(as_json: bool) -> Callable[[str], None]:
    """A long command's progress on stderr, each line with the seconds since the command began;
    nothing under ``--json`` (the document on stdout says it all)."""
    if as_json:
        return lambda _message: None
    began = time.monotonic()
    return lambda message: print(
        f"{time.monotonic() - began:7.1f}s {message}", file=sys.stderr, flush=True
    )


def answered(command: Callable[[], int]) -> int:
    """``command``'s exit code; a problem the user can fix as its one ``error:`` line on stderr
    and its exit code (2 for bad usage)."""
    try:
        return command()
    except LakehouseError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code


def perform(call: Call, as_json: bool = False) -> int:
    """Run ``call`` through the service and print its result; its exit code. The command's
    records name it and where it came from; a refusal is kept; the event log is synced after it
    (:func:`spark_jobs.service.recorded`).

    :raises LakehouseError: a problem the user can fix (see :func:`answered`).
    """
    kinds: dict[type[Call], Callable[[Call, bool], int]] = {
        RunCall: _run,
        BackfillCall: _backfill,
        RollbackCall: _rollback,
        RefreshCall: _refresh,
        MaintainCall: _maintain,
    }
    with service.recorded(
        call.pipeline,
        call.COMMAND,
        getattr(call, "hop", None),
        getattr(call, "run_id", None),
        dry_run=getattr(call, "dry_run", False),
    ):
        return kinds[type(call)](call, as_json)


def summary_line(record) -> str:
    """One hop's run record as a line."""
    return (
        f"{record.hop:<7} {record.status:<10} batches {record.batch_ids or '-'}  rows in "
        f"{record.rows_in:,}  out {record.rows_out:,}  quarantined {record.rows_quarantined:,}  "
        f"late dropped {record.rows_dropped_late:,}  "
        + (f"rescued {record.rows_rescued:,}  " if record.rows_rescued else "")
        + (f"skipped {record.rows_skipped:,}  " if record.rows_skipped else "")
        + (f"deleted {record.rows_deleted:,}  " if record.rows_deleted is not None else "")
        + (f"live keys {record.live_keys:,}  " if record.live_keys is not None else "")
        + f"{record.duration_s} s"
    )


def _emit_run(as_json: bool, result: RunResult) -> int:
    emit(
        as_json,
        result.to_dict(),
        f"{result.action} {result.run_id}\n" + "\n".join(map(summary_line, result.records)),
    )
    result.raise_for_gate()
    return 0


def _run(call: RunCall, as_json: bool) -> int:
    interval = {"trigger_interval": call.trigger_interval} if call.trigger_interval else {}
    return _emit_run(
        as_json,
        service.run(
            call.pipeline,
            call.hop,
            run_id=call.run_id,
            max_files_per_trigger=call.max_files_per_trigger,
            quality=call.quality,
            wait_s=call.wait_s,
            continuous=call.continuous,
            progress=progress(as_json),
            **interval,
        ),
    )


def _backfill(call: BackfillCall, as_json: bool) -> int:
    start, end = parse_time(call.start, "--start"), parse_time(call.end, "--end")
    return _emit_run(
        as_json,
        service.backfill(
            call.pipeline,
            start,
            end,
            call.hop,
            run_id=call.run_id,
            quality=call.quality,
            wait_s=call.wait_s,
            progress=progress(as_json),
        ),
    )


def _rollback(call: RollbackCall, as_json: bool) -> int:
    target = {
        "to_batch": call.to_batch,
        "to_run": call.to_run,
        "cascade": call.cascade,
        "replan": call.replan,
        "exact": call.exact,
        "to_time_text": call.to_time,
        "to_time_ms": parse_time(call.to_time, "--to-time") if call.to_time else None,
    }
    try:
        result = service.rollback(
            call.pipeline,
            call.hop,
            dry_run=call.dry_run,
            wait_s=call.wait_s,
            progress=progress(as_json),
            **target,
        )
    except RollbackRefused as refused:
        if refused.plan is not None:
            emit(as_json, {"plan": refused.plan.to_dict(), "executed": False}, refused.plan.text())
        raise
    text = result.plan.text()
    if call.dry_run:
        return _dry_run(as_json, result)
    if result.executed:
        text += (
            f"\nrolled back in {result.journal.duration_s} s; audit record in "
            f"{service.open_lake(call.pipeline).rollbacks}; the next run replays from the "
            "batch after each target"
        )
    emit(as_json, result.to_dict(), text)
    return 0


def _dry_run(as_json: bool, result) -> int:
    """A dry run's plan and what it changed (nothing); exit 2 when the plan is refused."""
    emit(as_json, result.to_dict(), result.plan.text() + "\ndry run: nothing changed")
    return 2 if result.plan.refused else 0


def _refresh(call: RefreshCall, as_json: bool) -> int:
    from_ms = parse_time(call.from_time, "--from") if call.from_time else None
    undone, ran = service.refresh(
        call.pipeline,
        call.hop,
        from_ms=from_ms,
        from_text=call.from_time,
        dry_run=call.dry_run,
        quality=call.quality,
        wait_s=call.wait_s,
        progress=progress(as_json),
    )
    text = undone.plan.text()
    if ran is None:
        return _dry_run(as_json, undone)
    document = {**undone.to_dict(), "run": ran.to_dict()}
    emit(
        as_json,
        document,
        text
        + f"\nrecomputed with the code as it is now: {ran.action} {ran.run_id}\n"
        + "\n".join(map(summary_line, ran.records)),
    )
    ran.raise_for_gate()
    return 0


def _maintain(call: MaintainCall, as_json: bool) -> int:
    result = service.maintain(
        call.pipeline,
        call.hop,
        dry_run=call.dry_run,
        wait_s=call.wait_s,
        progress=progress(as_json),
    )
    emit(as_json, result.to_dict(), result.text())
    return 0
