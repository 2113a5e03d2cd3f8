"""The service's commands: what the ``lakehouse`` CLI, Airflow's task callables, the tests and
the benchmarks call (re-exported by :mod:`spark_jobs.service`). Each function takes plain values,
checks them (a :class:`UsageError` naming the fix), holds the pipeline's lock where it writes, and
returns a dataclass; nothing here parses argv or prints results (progress goes to ``progress``,
stderr by default).

Spark is started only by the functions that need it (``run``, ``backfill``, ``quality``, and
``rollback`` when a table must be restored), inside the call.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from contextlib import contextmanager

from spark_jobs.control.hop_state import HopState
from spark_jobs.control.rollback.plans import Request
from spark_jobs.model.calls import QUALITY_MODES
from spark_jobs.model.errors import UsageError
from spark_jobs.model.lake import Lake
from spark_jobs.model.records import new_run_id
from spark_jobs.model.times import iso
from spark_jobs.results import MaintainResult, RollbackResult, RunResult, ValidateResult

Progress = Callable[[str], None]


def stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def open_lake(pipeline: str) -> Lake:
    """The lake of the pipeline called ``pipeline`` (a :class:`UsageError` naming
    the known ones).
    """
    return Lake.named(pipeline)


# -- checks shared by the writers ------------------------------------------------------------------


def checked_run_id(run_id: str | None) -> str:
    """``run_id`` when it is safe in file names, a new one when None."""
    if run_id is None:
        return new_run_id()
    if not re.fullmatch(r"[A-Za-z0-9_.:+-]{1,200}", run_id) or run_id.startswith("."):
        raise UsageError(f"--run-id {run_id!r} has characters other than letters, digits and _.:+-")
    return run_id


def _check_quality_mode(mode: str) -> None:
    if mode not in QUALITY_MODES:
        raise UsageError(f"quality mode {mode!r} is not one of {', '.join(QUALITY_MODES)}")


@contextmanager
def _writer(lake: Lake, action: str, run_id: str, wait_s: float, progress: Progress, ready=None):
    """Hold the pipeline's lock, refusing while a rollback is unfinished; gives the lock's fence."""
    from spark_jobs.control.coordination.lock import pipeline_lock
    from spark_jobs.control.rollback.execute import refuse_if_pending

    with pipeline_lock(lake, action, run_id, wait_s, ready, progress) as fence:
        refuse_if_pending(lake)
        yield fence


def _session(lake: Lake, action: str):
    from spark_jobs.engine.pipeline_run import session

    return session(lake, action)


# -- the operations --------------------------------------------------------------------------------


def generate(
    pipeline: str,
    events: int,
    files: int = 1,
    seed: int | None = None,
    start_ms: int | None = None,
    bad_fraction: float = 0.0,
    late_fraction: float = 0.0,
):
    """Write sample events to the pipeline's landing folder
    (:class:`~spark_jobs.control.writers.samples.GenerateResult`).
    """
    from spark_jobs.control.writers.samples import generate as write_events

    if events < 0 or files < 1:
        raise UsageError("--events must be >= 0 and --files >= 1")
    for flag, value in (("--bad-fraction", bad_fraction), ("--late-fraction", late_fraction)):
        if not 0 <= value <= 1:
            raise UsageError(f"{flag} {value} is outside 0..1")
    return write_events(
        open_lake(pipeline), events, files, seed, start_ms, bad_fraction, late_fraction
    )


def setup() -> dict:
    """Resolve the JVM jars into the cache and build the drivers' class-data archive (each a
    no-op when done; no archive with ``LAKEHOUSE_JVM_SHARING=off``): what a fresh install needs
    before its first Spark job."""
    from spark_jobs.engine.jars import resolve_jars
    from spark_jobs.engine.jvm import sharing
    from spark_jobs.engine.jvm_archive import build_archive
    from spark_jobs.model.settings import jars_dir

    jars = resolve_jars()
    archive = build_archive() if sharing() else None
    return {
        "jars_dir": str(jars_dir()),
        "jars": [jar.name for jar in jars],
        "jvm_archive": str(archive) if archive else None,
    }


def new(name: str, fmt: str = "json"):
    """Write a runnable skeleton pipeline ``name``
    (:class:`~spark_jobs.control.writers.skeleton.NewPipeline`): a pipeline folder of its own (spec,
    code, sample data, suites, a test) in the pipelines folder, its sample landing as ``fmt``
    (``json`` or ``csv``)."""
    from spark_jobs.control.writers.skeleton import new_pipeline

    return new_pipeline(name, fmt)


def run(
    pipeline: str,
    hop: str = "all",
    *,
    run_id: str | None = None,
    max_files_per_trigger: int | None = None,
    quality: str = "gate",
    wait_s: float = 0.0,
    continuous: bool = False,
    trigger_interval: str = "10 seconds",
    progress: Progress = stderr,
) -> RunResult:
    """Process what is new: each hop run-once (``availableNow``) then its gate, or always-on with
    ``continuous`` until SIGINT/SIGTERM."""
    lake = open_lake(pipeline)
    return _run(
        lake,
        lake.spec.select_hops(hop),
        run_id=run_id,
        max_files_per_trigger=max_files_per_trigger,
        quality=quality,
        wait_s=wait_s,
        continuous=continuous,
        trigger_interval=trigger_interval,
        progress=progress,
    )


def _run(
    lake: Lake,
    hops: tuple,
    *,
    run_id: str | None,
    max_files_per_trigger: int | None = None,
    quality: str = "gate",
    wait_s: float = 0.0,
    continuous: bool = False,
    trigger_interval: str = "10 seconds",
    progress: Progress = stderr,
    first: Callable[[], None] | None = None,
) -> RunResult:
    """The hops run under the pipeline's lock (:func:`spark_jobs.engine.pipeline_run.run_hops`);
    ``first`` is called once it is held, before anything else."""
    from spark_jobs.engine.pipeline_run import run_hops

    run_id = checked_run_id(run_id)
    _check_quality_mode(quality)
    if max_files_per_trigger is not None and max_files_per_trigger < 1:
        raise UsageError("--max-files-per-trigger must be >= 1")
    with _writer(lake, "run", run_id, wait_s, progress) as fence:
        if first is not None:
            first()
        return run_hops(
            lake,
            hops,
            run_id,
            quality,
            progress,
            fence,
            max_files_per_trigger=max_files_per_trigger,
            continuous=continuous,
            trigger_interval=trigger_interval,
        )


def refresh(
    pipeline: str,
    hop: str,
    *,
    from_ms: int | None = None,
    from_text: str | None = None,
    dry_run: bool = False,
    quality: str = "gate",
    wait_s: float = 0.0,
    progress: Progress = stderr,
) -> tuple[RollbackResult, RunResult | None]:
    """Recompute ``hop`` and every hop below it with the code as it is now: a rollback of them to
    the start (or to the batches committed by ``from_ms``), then a run of those hops. From a point,
    a hop whose new code changed what its state was built by has its state rebuilt there with the
    new code first (:mod:`spark_jobs.control.rollback.rebuild`). ``dry_run``: the plan only."""
    from spark_jobs.control.rollback import execute, rebuild

    lake = open_lake(pipeline)
    target = lake.spec.hop(hop)
    hops = tuple(
        each for each in lake.spec.hops if each == target or each in lake.spec.downstream_of(hop)
    )
    rebuilt: list[str] = []
    if from_ms is not None:
        from spark_jobs.engine.pipeline_run import refresh_rebuilds

        rebuilt = refresh_rebuilds(lake, hops, progress)
        rebuild.refuse_unrebuildable(lake, rebuilt, from_text or iso(from_ms))
    # Planned afresh: the new code recomputes whatever the hops read now.
    undone = rollback(
        pipeline,
        hop,
        to_batch=-1 if from_ms is None else None,
        to_time_ms=from_ms,
        to_time_text=from_text,
        replan=True,
        dry_run=dry_run,
        wait_s=wait_s,
        progress=progress,
    )
    rebuild.note_rebuilds(lake, rebuilt, undone.plan)
    if dry_run:
        return undone, None
    return undone, _run(
        lake,
        hops,
        run_id=None,
        quality=quality,
        wait_s=wait_s,
        progress=progress,
        # under the run's lock: no other writer between the swap and the run
        first=lambda: execute.restart_rebuilt(lake, rebuilt),
    )


def backfill(
    pipeline: str,
    start_ms: int,
    end_ms: int,
    hop: str = "all",
    *,
    run_id: str | None = None,
    quality: str = "gate",
    wait_s: float = 0.0,
    progress: Progress = stderr,
) -> RunResult:
    """Recompute ``[start_ms, end_ms)`` in batch mode with the same transforms; waits (up to
    ``wait_s``) while a hop's stream has not read what is upstream of it."""
    from spark_jobs.control.removable.expired import backfill_refusal
    from spark_jobs.control.status import stream_lag
    from spark_jobs.engine.pipeline_run import backfill_hops

    lake = open_lake(pipeline)
    hops = lake.spec.select_hops(hop)
    if start_ms >= end_ms:
        raise UsageError(
            f"--start {iso(start_ms)} is not before --end {iso(end_ms)}: the range is [start, end)"
        )
    if refused := backfill_refusal(lake, hops, start_ms, end_ms):
        raise UsageError(refused)
    run_id = checked_run_id(run_id)
    _check_quality_mode(quality)

    def streams_caught_up() -> str | None:
        lagging = {each.name: lag for each in hops if (lag := stream_lag(HopState(lake, each)))}
        if not lagging:
            return None
        runs = "; ".join(f"`lakehouse run {lake.spec.name} --hop {name}`" for name in lagging)
        return "; ".join(lagging.values()) + f" (the stream's next run reads them: {runs})"

    with _writer(lake, "backfill", run_id, wait_s, progress, streams_caught_up) as fence:
        return backfill_hops(lake, hops, start_ms, end_ms, run_id, quality, progress, fence)


def status(pipeline: str, hop: str | None = None) -> dict:
    """Batches, runs and table versions of every hop (or one), read from the logs without a JVM."""
    from spark_jobs.control.status import pipeline_status

    lake = open_lake(pipeline)
    if hop and hop != "all":
        lake.spec.hop(hop)
    return pipeline_status(lake, hop)


def rollback(
    pipeline: str,
    hop: str,
    *,
    to_batch: int | None = None,
    to_run: str | None = None,
    to_time_ms: int | None = None,
    to_time_text: str | None = None,
    cascade: bool = True,
    replan: bool = False,
    exact: bool = False,
    dry_run: bool = False,
    wait_s: float = 0.0,
    progress: Progress = stderr,
) -> RollbackResult:
    """Undo the hop's batches after a target (and the hops below that read them, with ``cascade``);
    the next run replays from the batch after each target. An unfinished rollback of the same
    request is finished; a refused plan raises :class:`RollbackRefused` and changes nothing."""
    from spark_jobs.control.coordination.lock import pipeline_lock
    from spark_jobs.control.rollback import execute as rollbacks
    from spark_jobs.engine.pipeline_run import Restorer

    lake = open_lake(pipeline)
    lake.spec.hop(hop)
    request = Request(hop, to_batch, to_run, to_time_ms, to_time_text, cascade, replan, exact)
    if dry_run:
        return RollbackResult(rollbacks.planned(lake, request), executed=False)
    rollbacks.refuse_another_pending(lake, request)  # before waiting for the lock
    with pipeline_lock(lake, "rollback", wait_s=wait_s) as fence:
        journal, plan = rollbacks.resumed_or_planned(lake, request, progress)
        if plan.nothing_to_do:
            return RollbackResult(plan, executed=False)
        progress(plan.text())
        restore = Restorer(lake, sum(len(each.tables) for each in plan.hops), progress)
        done = rollbacks.execute(restore, lake, plan, journal, progress, fence)
    return RollbackResult(plan, executed=True, journal=done, resumed=journal is not None)


def maintain(
    pipeline: str,
    hop: str = "all",
    *,
    dry_run: bool = False,
    wait_s: float = 0.0,
    progress: Progress = stderr,
) -> MaintainResult:
    """Compact each table's small files and VACUUM what no rollback in the window and no stream
    reading the table still needs (:mod:`spark_jobs.control.removable.table_files`), then prune
    expired landing files and records (:mod:`spark_jobs.control.removable.expired`), under the
    pipeline's lock."""
    from spark_jobs.engine.maintenance import maintain_lake
    from spark_jobs.model.records import MaintenanceRecord

    lake = open_lake(pipeline)
    record = MaintenanceRecord(lake.spec.name, dry_run=dry_run)
    hops = lake.spec.select_hops(hop)
    with _writer(lake, "maintain", record.maintenance_id, wait_s, progress):
        maintain_lake(None if dry_run else _session(lake, "maintain"), lake, hops, record, progress)
    return MaintainResult(record)


def quality(pipeline: str, hop: str, run: str | None = None) -> dict:
    """Check the hop's suite on the rows one succeeded run wrote (default: its
    last); the summary.
    """
    from spark_jobs.control.suites import run_to_check
    from spark_jobs.engine import quality as gates

    lake = open_lake(pipeline)
    spec_hop = lake.spec.hop(hop)
    record = run_to_check(lake, spec_hop, run)
    return gates.check(_session(lake, "quality"), lake, spec_hop, record, data_docs=True)


def quarantine(pipeline: str, hop: str | None = None, run: str | None = None) -> dict:
    """What the quarantine of each hop that has one holds (or of ``hop``; of one ``run``'s writes,
    if given): counts by reason and file, samples, and the backfills that ingest
    fixed files again."""
    from spark_jobs.control.quarantine import report

    return report(open_lake(pipeline), hop, run)


def validate(pipeline: str, hop: str | None = None, repair: bool = False) -> ValidateResult:
    """Find damaged or inconsistent checkpoint files (and with ``repair``, make the repairs that
    cannot lose or double data, under the pipeline's lock)."""
    from spark_jobs.control.validate import validate as find

    lake = open_lake(pipeline)
    if hop and hop != "all":
        lake.spec.hop(hop)
    if not repair:
        return ValidateResult(lake.spec.name, find(lake, hop))
    from spark_jobs.control.coordination.lock import pipeline_lock

    with pipeline_lock(lake, "checkpoint repair"):
        return ValidateResult(lake.spec.name, find(lake, hop, do_repair=True))
