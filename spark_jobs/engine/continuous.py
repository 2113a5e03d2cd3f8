"""Always-on runs: every hop as a query with a processing-time trigger, until stopped."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

from spark_jobs.engine.progress import Progress, first_line, stderr_progress, unfenced
from spark_jobs.engine.runner import HopRun
from spark_jobs.model.errors import RunFailed
from spark_jobs.model.lake import Lake
from spark_jobs.model.records import RunRecord
from spark_jobs.model.spec import HopSpec


def query_failure(hop: str, query) -> str | None:
    """Why an always-on ``query`` that the session did not stop is no longer running, else None:
    its exception, or that it stopped with none (stopped from elsewhere, or its thread ended in an
    error raised while Spark handled another, as a StackOverflowError once did)."""
    active = query.isActive  # read first: Spark sets the exception before the query turns inactive
    if query.exception() is not None:
        return f"{hop} failed: {first_line(query.exception())}"
    if active:
        return None
    return (
        f"{hop}'s query stopped without an error to show (the driver's log may say why); "
        "run again to go on from its checkpoint"
    )


def run_continuous(
    spark,
    lake: Lake,
    hops: tuple[HopSpec, ...],
    run_id: str,
    trigger_interval: str,
    stop: threading.Event | None = None,
    progress: Progress = stderr_progress,
    fence: Callable[[], None] = unfenced,
) -> list[RunRecord]:
    """Run the hops as always-on queries with a processing-time trigger until stopped.

    A hop whose upstream table does not exist yet starts once it does. SIGINT/SIGTERM or
    ``stop`` end all queries; each hop's record is written then.
    """
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
    runs = [HopRun(spark, lake, hop, run_id, "continuous", progress, fence) for hop in hops]
    queries: dict[str, object] = {}
    try:
        while not stop.is_set():
            for run in runs:
                if run.hop.name not in queries and not run.upstream_missing():
                    progress(f"[{run.hop.name}] always-on, trigger every {trigger_interval}")
                    run.refuse_damaged_checkpoint()
                    run.replay_logged()
                    queries[run.hop.name] = run.start_stream({"processingTime": trigger_interval})
            for run in runs:
                query = queries.get(run.hop.name)
                if query is not None:
                    run.note_progress(query)
                    if (failure := query_failure(run.hop.name, query)) is not None:
                        raise RunFailed(failure)
            stop.wait(1)
    finally:
        for query in queries.values():
            query.stop()
    return [run.close("succeeded" if run.hop.name in queries else "skipped") for run in runs]
