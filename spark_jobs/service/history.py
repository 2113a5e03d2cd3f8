"""What happened, queryable: the lake's event log (docs/guides/event-log.md), read and kept in
step with the ``_ops`` records without a JVM. The CLI's ``events``, the commands (which sync
after they write records) and the Lakehouse page come here."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from spark_jobs.logs.event_log import LEVELS, Filter
from spark_jobs.model.errors import LakehouseError, RunFailed, UsageError
from spark_jobs.model.lake import Lake
from spark_jobs.model.origin import current, given
from spark_jobs.model.spec import list_specs
from spark_jobs.model.times import iso, now_s

EVENT_TYPES = (
    "run_started",
    "batch",
    "run_finished",
    "gate",
    "rollback_started",
    "rollback_finished",
    "maintenance",
    "freshness_alert",
    "refused",
)


def sync_events(lake: Lake) -> int:
    """Append the pipeline's events the event log does not hold yet; how many."""
    from spark_jobs.control.events import sync

    return sync(lake)


def events(
    pipeline: str | None = None,
    *,
    hop: str | None = None,
    event_types: tuple[str, ...] = (),
    level: str | None = None,
    since_s: float | None = None,
    until_s: float | None = None,
    run_id: str | None = None,
    after_sequence: int | None = None,
    sync: bool = True,
) -> list[dict]:
    """The events of one pipeline (or of every pipeline of the lake) that match, oldest first;
    with ``sync``, the pipelines' latest records are appended first."""
    from spark_jobs.logs.event_log import read

    unknown = sorted(set(event_types) - set(EVENT_TYPES))
    if unknown:
        raise UsageError(
            f"--type {', '.join(unknown)} is not an event type: use one of {', '.join(EVENT_TYPES)}"
        )
    if level is not None and level.upper() not in LEVELS:
        raise UsageError(f"--level {level!r} is not one of {', '.join(LEVELS)}")
    if hop is not None and pipeline is None:
        raise UsageError("--hop needs a pipeline: `lakehouse events PIPELINE --hop HOP`")
    lakes = [Lake.named(pipeline)] if pipeline else [Lake.open(spec) for spec in list_specs()]
    if hop is not None:
        lakes[0].spec.hop(hop)
    if sync:
        for lake in lakes:
            sync_events(lake)
    if not lakes:
        return []
    where = Filter(
        pipeline,
        hop,
        tuple(event_types),
        level.upper() if level else None,
        since_s,
        until_s,
        run_id,
        after_sequence,
    )
    return read(lakes[0].events, where)


def events_text(found: list[dict]) -> str:
    """Events as lines: time, level, pipeline, type, message."""
    if not found:
        return "no events"
    return "\n".join(
        f"{iso(int(event['timestamp'] * 1000))}  {event['level']:<5}  {event['pipeline']}  "
        f"#{event['sequence']:<5} {event['event_type']:<17} {event['message']}"
        for event in found
    )


@contextmanager
def recorded(
    pipeline: str,
    command: str,
    hop: str | None = None,
    run_id: str | None = None,
    dry_run: bool = False,
):
    """Around a writing command: its origin names the command; a refusal (a problem the user can
    fix, not a failed run) is kept as a record; the event log is synced after it, whatever
    happened (a sync that fails warns and changes nothing else). A dry run changes nothing: no
    record, no sync."""
    with given(current(command)):
        if dry_run:
            yield
            return
        try:
            yield
        except RunFailed:
            raise
        except LakehouseError as error:
            _keep_refusal(pipeline, hop, run_id, error)
            raise
        finally:
            sync_quietly(pipeline)


def _lake_of(pipeline: str) -> Lake | None:
    try:
        return Lake.named(pipeline)
    except LakehouseError:  # no such pipeline: nothing to keep
        return None


def _keep_refusal(pipeline: str, hop: str | None, run_id: str | None, error: Exception) -> None:
    from spark_jobs.logs.ops import write_refusal

    lake = _lake_of(pipeline)
    if lake is None:
        return
    at = now_s()
    write_refusal(
        lake,
        {
            "refusal_id": f"{iso(int(at * 1000)).replace(':', '')}-{uuid.uuid4().hex[:6]}",
            "pipeline": pipeline,
            "hop": hop if hop != "all" else None,
            "run_id": run_id,
            "at": at,
            "error": type(error).__name__,
            "message": str(error),
            "origin": current(),
        },
    )


def sync_quietly(pipeline: str) -> None:
    lake = _lake_of(pipeline)
    if lake is None:
        return
    try:
        sync_events(lake)
    except Exception as error:  # noqa: BLE001 - the event log never fails a command
        print(f"warning: the event log was not updated ({error})", file=sys.stderr)


def follow_events(pipeline: str | None, interval_s: float = 2.0, **filters) -> Iterator[list[dict]]:
    """The matching events, then every ``interval_s`` the ones that arrived since (each list may
    be empty), without end."""
    import time

    seen: set[str] = set()
    while True:
        found = [event for event in events(pipeline, **filters) if event["event_id"] not in seen]
        seen.update(event["event_id"] for event in found)
        yield found
        time.sleep(interval_s)
