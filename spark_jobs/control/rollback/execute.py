"""Carry out a rollback plan (:mod:`spark_jobs.control.rollback.planner`) and check it
(docs/concepts/rollback.md).

:func:`execute` works under the pipeline's lock, as a journal of steps in
``_ops/rollbacks/<pipeline>/<id>.json`` (also the audit record): every step can be repeated, so
running the same command again after a crash finishes the job. The checkpoint steps are plain
file edits; the table steps call the ``restore`` the caller passes (the engine's RESTORE), so
this module needs no JVM.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from spark_jobs.control.hop_state import HopState
from spark_jobs.control.rollback import lineage, planner, rebuild, replays
from spark_jobs.control.rollback.journals import read_rollbacks, write_journal
from spark_jobs.control.rollback.plans import (
    HopStep,
    Journal,
    JournalStatus,
    Plan,
    Replay,
    Request,
    TableStep,
)
from spark_jobs.logs import checkpoint_log, delta_log, file_source_log, state_store
from spark_jobs.logs.ops import read_records
from spark_jobs.model import settings
from spark_jobs.model.errors import RollbackRefused
from spark_jobs.model.lake import Lake
from spark_jobs.model.origin import current as current_origin
from spark_jobs.model.spec import HopSpec
from spark_jobs.model.times import now_s

Progress = Callable[[str], None]
# Restores (or empties) one table as its step says; returns the table's version after.
Restore = Callable[[TableStep], int]


def unfinished_journal(lake: Lake) -> Journal | None:
    """An unfinished rollback journal of the pipeline, if any."""
    unfinished = [journal for journal in read_rollbacks(lake) if not journal.finished]
    return unfinished[-1] if unfinished else None


def refuse_if_pending(lake: Lake) -> None:
    """Runs call this: a half-done rollback leaves checkpoints and tables out of step."""
    if journal := unfinished_journal(lake):
        raise _unfinished(lake, journal)


def _unfinished(lake: Lake, journal: Journal) -> RollbackRefused:
    return RollbackRefused(
        f"rollback {journal.rollback_id} of {lake.spec.name} is unfinished: "
        f"finish it with `{journal.plan.request.command_line(lake.spec.name)}`"
    )


def refuse_another_pending(lake: Lake, request: Request) -> Journal | None:
    """Refuse ``request`` while a rollback of another request is unfinished; the unfinished
    journal of the same request (running it finishes that one), if any."""
    journal = unfinished_journal(lake)
    if journal and not journal.plan.request.same_target(request):
        raise _unfinished(lake, journal)
    return journal


def planned(lake: Lake, request: Request) -> Plan:
    """What ``request`` would do, without the lock: the unfinished journal's plan when it is the
    same request, a new plan otherwise."""
    journal = refuse_another_pending(lake, request)
    return journal.plan if journal else planner.plan(lake, request)


def resumed_or_planned(
    lake: Lake, request: Request, progress: Progress = print
) -> tuple[Journal | None, Plan]:
    """Under the pipeline's lock: the unfinished journal of the same ``request`` with its plan (to
    finish it), or no journal and a new plan; a refused plan raises :class:`RollbackRefused` and
    changes nothing."""
    journal = refuse_another_pending(lake, request)
    if journal:
        progress(
            f"[rollback] finishing {journal.plan.rollback_id} ({len(journal.done)} steps were done)"
        )
        plan = journal.plan
    else:
        plan = planner.plan(lake, request)
    if plan.refused:
        raise RollbackRefused(f"rollback refused, nothing changed: {'; '.join(plan.refused)}", plan)
    return journal, plan


def restart_rebuilt(lake: Lake, names: list[str]) -> None:
    """After a refresh's rollback, under the run's lock: each hop of ``names`` restarted at its
    last committed batch with a new query, standing for every query id it had before
    (:func:`~spark_jobs.control.rollback.rebuild.restart_at`)."""
    for name in names:
        state = HopState(lake, lake.spec.hop(name))
        committed = checkpoint_log.commit_batch_ids(state.checkpoint)
        if committed:
            rebuild.restart_at(state, committed[-1], set(lineage.query_ids(state)))


def _crash_point(done: int) -> None:
    """Crash tests set LAKEHOUSE_ROLLBACK_CRASH_AFTER=k to die (no clean-up) after doing step k
    and before recording it, the worst moment: the re-run must redo it harmlessly."""
    if settings.ROLLBACK_CRASH_AFTER.value() == str(done):
        os._exit(97)


def execute(
    restore: Restore,
    lake: Lake,
    plan: Plan,
    journal: Journal | None = None,
    progress: Progress = print,
    fence: Callable[[], None] = lambda: None,
) -> Journal:
    """Carry out ``plan`` (or finish ``journal``'s); the caller holds the pipeline's lock and
    gives its ``fence``, checked before each step, and the ``restore`` of one table."""
    if plan.refused:
        raise RollbackRefused("; ".join(plan.refused))
    journal = journal or Journal(plan, created_at=now_s(), origin=current_origin())
    write_journal(lake, journal)
    for number, step in enumerate(journal.plan.steps()):
        if step in journal.done:
            continue
        began = time.time()
        fence()
        if step.action == "restore":
            journal.restored[step.table] = restore(journal.plan.table_step(step.hop, step.table))
        else:
            _rewind_checkpoint(lake, journal, step.hop)
        _crash_point(number)
        journal.done.append(step)
        write_journal(lake, journal)
        progress(f"[rollback] {step}: done in {time.time() - began:.1f} s")
    journal.status = JournalStatus.SUCCEEDED
    journal.finished_at = now_s()
    journal.duration_s = round(journal.finished_at - journal.created_at, 3)
    write_journal(lake, journal)
    return journal


def _rewind_checkpoint(lake: Lake, journal: Journal, hop_name: str) -> None:
    step = journal.plan.step(hop_name)
    hop = lake.spec.hop(hop_name)
    checkpoint, target = step.checkpoint, step.target_batch
    # the undone batches' offsets, for the next run to replay as logged
    if step.replay == Replay.EXACT:
        follows = {
            up: {
                "old": replays.writer(above),
                "new": above.new_query_id,
                "target": above.target_batch,
            }
            for up in step.restored_upstreams
            for above in [journal.plan.step(up)]
        }
        replays.keep(HopState(lake, hop), step, journal.rollback_id, follows)
    else:
        replays.forget(HopState(lake, hop))
    checkpoint_log.drop_batches_after(checkpoint, target)
    if target < 0 and hop.reads_topic:  # where the first batch began: the next one starts afresh
        checkpoint_log.drop_source_logs(checkpoint)
    if step.source_log_cut is not None:
        file_source_log.truncate_file_source(
            checkpoint, step.source_log_cut, lake.spec.source_log_compact_interval
        )
    if step.state_version is not None:
        state_store.drop_state_after(checkpoint, step.state_version)
    _move_past_restores(lake, journal, step, hop)
    if step.new_query_id != checkpoint_log.query_id(checkpoint):
        checkpoint_log.set_query_id(checkpoint, step.new_query_id)


def _move_past_restores(lake: Lake, journal: Journal, step: HopStep, hop: HopSpec) -> None:
    """Move the hop's source offset at its target past the RESTORE commits of its upstreams."""
    checkpoint, target = step.checkpoint, step.target_batch
    # Each upstream restored by this rollback, or by an earlier one past what the hop keeps,
    # moves the hop's source offset past that RESTORE commit (journals written before joins
    # name no upstream: the hop's only one).
    skips = dict(step.skip_versions)
    if step.skip_to_version is not None:
        skips[hop.upstreams[0]] = step.skip_to_version
    restored_upstreams = step.restored_upstreams or (
        list(hop.upstreams[:1]) if step.skip_upstream_restore else []
    )
    for upstream in restored_upstreams:
        version = journal.restored.get(lake.table(lake.spec.hop(upstream)))
        if version is not None:
            skips[upstream] = version
    if skips:
        offsets = checkpoint_log.read_offsets(checkpoint, target)
        moved = list(offsets.sources)
        for upstream, version in skips.items():
            index = lineage.upstream_index(HopState(lake, hop), upstream, offsets.sources)
            if index is not None:
                moved[index] = checkpoint_log.delta_offset_after(offsets.sources[index], version)
        checkpoint_log.write_offsets(
            checkpoint,
            checkpoint_log.BatchOffsets(target, offsets.watermark_ms, offsets.timestamp_ms, moved),
        )


def verify(lake: Lake, journal: Journal) -> list[str]:
    """What does not match a finished rollback (empty: all in place); no JVM."""
    problems = []
    if not journal.finished:
        problems.append(f"rollback {journal.rollback_id} is {journal.status}")
    for step in journal.plan.hops:
        offsets = checkpoint_log.offset_batch_ids(step.checkpoint)
        finished = journal.finished_at or 0
        replayed = any(
            (run.get("started_at") or 0) > finished for run in read_records(lake, step.hop)
        )
        if offsets and offsets[-1] > step.target_batch and not replayed:
            problems.append(
                f"{step.hop}: offsets reach batch {offsets[-1]}, past the "
                f"target {step.target_batch}"
            )
        if checkpoint_log.query_id(step.checkpoint) != step.new_query_id:
            problems.append(f"{step.hop}: query id is not the new one")
        for table in step.tables:
            restored = journal.restored.get(table.table)
            if restored is None or restored not in delta_log.versions(table.table):
                problems.append(f"{table.label}: no restore commit recorded")
    return problems
