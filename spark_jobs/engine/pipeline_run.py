"""A pipeline's run, in order, on Spark: what the service's ``run``, ``backfill``, ``refresh`` and
``rollback`` do once their arguments are checked and the pipeline's lock is held.

- :func:`run_hops`: the checks before Spark (each hop's checkpoint written by the source it reads,
  everything a stream reads next still there), the session, the code-change check before any
  query starts, then each hop run-once and its gate (or every hop always-on), and after each hop
  the ranges it owes a join (:func:`repair`);
- :func:`backfill_hops`: each hop over a range in batch mode, then its gate;
- :func:`refresh_rebuilds`: which hops a refresh from a point rebuilds the state of;
- :class:`Restorer`: a rollback's table steps, Spark started at the first one.

A gate in ``gate`` mode that fails stops the hops below it (:func:`hops_gated`).
"""

from __future__ import annotations

from collections.abc import Callable

from spark_jobs.control.hop_state import HopState
from spark_jobs.engine.progress import Progress
from spark_jobs.engine.runner import HopRun
from spark_jobs.model.lake import Lake
from spark_jobs.model.records import RunRecord
from spark_jobs.model.spec import HopSpec
from spark_jobs.model.times import iso
from spark_jobs.results import GateFailure, RunResult


def session(lake: Lake, action: str):
    """The pipeline's SparkSession for ``action`` (one per process: later calls get the same)."""
    from spark_jobs.engine.session import build_session

    return build_session(f"lakehouse-{lake.spec.name}-{action}", lake.spec.shuffle_partitions)


def gate(
    spark, lake: Lake, hop: HopSpec, record: RunRecord, mode: str, progress: Progress
) -> dict | None:
    """Check the hop's suite on what the run wrote (unless mode ``off``) and keep
    it in the record.
    """
    if mode == "off" or record.status not in ("succeeded", "skipped"):
        return None
    from spark_jobs.control.suites import format_summary
    from spark_jobs.engine import quality
    from spark_jobs.logs.ops import write_record

    summary = quality.check(spark, lake, hop, record.to_dict())
    if summary is None:
        return None
    record.quality = {
        key: summary.get(key)
        for key in ("gate", "failed", "warned", "rows", "seconds", "data_docs")
    }
    write_record(lake, record)
    progress(format_summary(summary))
    return summary


def hops_gated(
    spark,
    lake: Lake,
    hops,
    mode: str,
    progress: Progress,
    run_hop: Callable[[HopSpec], RunRecord],
    after: Callable[[HopSpec], dict | None] | None = None,
) -> tuple[list, GateFailure | None]:
    """Run each hop (``run_hop(hop)`` gives its record) then its gate, then ``after(hop)`` (which
    gives the summary of a gate of its own that failed, if any); stop below a failed gate in
    ``gate`` mode."""
    records = []
    for hop in hops:
        records.append(run_hop(hop))
        summary = gate(spark, lake, hop, records[-1], mode, progress)
        stopped = summary and summary["gate"] == "failed" and mode == "gate"
        if not stopped and after is not None and records[-1].status == "succeeded":
            summary = after(hop) or summary
        if summary and summary["gate"] == "failed" and mode == "gate":
            return records, GateFailure(hop.name, summary)
    return records, None


def repair(
    spark, lake: Lake, hop: HopSpec, run_id: str, mode: str, progress: Progress, fence
) -> dict | None:
    """After the hop's stream, the backfills it owes (:mod:`spark_jobs.control.join_repairs`), each
    gated like a backfill; the summary of a gate that failed, if one did."""
    from spark_jobs.control.join_repairs import owed

    for number, (start_ms, end_ms) in enumerate(owed(HopState(lake, hop)), 1):
        progress(
            f"[{hop.name}] repair: recomputing {iso(start_ms)} .. {iso(end_ms)}, where a backfill "
            "above wrote rows this hop's stream does not read"
        )
        run = HopRun(spark, lake, hop, f"{run_id}.repair-{number}", "backfill", progress, fence)
        run.record.repair = True
        summary = gate(spark, lake, hop, run.backfill(start_ms, end_ms), mode, progress)
        if summary and summary["gate"] == "failed":
            return summary
    return None


def run_hops(
    lake: Lake,
    hops: tuple,
    run_id: str,
    quality: str,
    progress: Progress,
    fence,
    *,
    max_files_per_trigger: int | None = None,
    continuous: bool = False,
    trigger_interval: str = "10 seconds",
) -> RunResult:
    """Process what is new at each hop (the caller holds the pipeline's lock and
    gives its fence).
    """
    from spark_jobs.control.removable.table_files import check_readable
    from spark_jobs.control.source_switch import check_sources
    from spark_jobs.engine.continuous import run_continuous
    from spark_jobs.engine.preflight import check_code_updates

    # before Spark: each hop's checkpoint was written by the source it reads
    check_sources(lake, hops)
    check_readable(lake, hops)  # and what a stream must read next is all there
    spark = session(lake, "run")
    check_code_updates(spark, lake, hops, progress)  # before any query starts
    if continuous:
        records = run_continuous(
            spark, lake, hops, run_id, trigger_interval, progress=progress, fence=fence
        )
        # Once the streams stopped: the pairs a backfill before the session owes with the rows
        # the session streamed (a run-once run repairs after each hop's stream).
        for each in hops:
            summary = repair(spark, lake, each, run_id, quality, progress, fence)
            if summary and summary["gate"] == "failed" and quality == "gate":
                return RunResult(
                    run_id, "run", records, GateFailure(each.name, summary), lake.spec.name
                )
        return RunResult(run_id, "run", records, pipeline=lake.spec.name)
    records, failed = hops_gated(
        spark,
        lake,
        hops,
        quality,
        progress,
        lambda each: HopRun(
            spark, lake, each, run_id, "run-once", progress, fence, gated=quality != "off"
        ).run_once(max_files_per_trigger),
        lambda each: repair(spark, lake, each, run_id, quality, progress, fence),
    )
    return RunResult(run_id, "run", records, failed, lake.spec.name)


def backfill_hops(
    lake: Lake,
    hops: tuple,
    start_ms: int,
    end_ms: int,
    run_id: str,
    quality: str,
    progress: Progress,
    fence,
) -> RunResult:
    """Recompute ``[start_ms, end_ms)`` at each hop in batch mode, then its gate
    (under the lock).
    """
    spark = session(lake, "backfill")
    records, failed = hops_gated(
        spark,
        lake,
        hops,
        quality,
        progress,
        lambda each: HopRun(spark, lake, each, run_id, "backfill", progress, fence).backfill(
            start_ms, end_ms
        ),
    )
    return RunResult(run_id, "backfill", records, failed, lake.spec.name)


def refresh_rebuilds(lake: Lake, hops: tuple, progress: Progress) -> list[str]:
    """The hops of a refresh from a point whose new code their kept state cannot follow (their
    state is rebuilt at the point: :mod:`spark_jobs.control.rollback.rebuild`)."""
    from spark_jobs.engine.preflight import incompatible_updates

    return [
        error.hop for error in incompatible_updates(session(lake, "refresh"), lake, hops, progress)
    ]


class Restorer:
    """A rollback's ``restore`` of one table step
    (:func:`spark_jobs.control.rollback.execute.execute`): Spark starts at the first step, and says
    so (it takes a while on a cold machine)."""

    def __init__(self, lake: Lake, tables: int, progress: Progress):
        self.lake, self.tables, self.progress = lake, tables, progress
        self._session = None

    def __call__(self, step) -> int:
        from spark_jobs.control.rollback.restore import restore_table

        if self._session is None:
            self.progress(f"[rollback] starting Spark for {self.tables} table restores")
            self._session = session(self.lake, "rollback")
        return restore_table(self._session, step)
