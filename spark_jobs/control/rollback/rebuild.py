"""A stateful hop's state rebuilt at a batch, for code its old state cannot follow
(``lakehouse refresh P --hop X --from T``).

After the rollback to the batch ``N`` committed by ``T``, the hop's checkpoint is replaced by a new
query's whose batch 0 is planned with batch ``N``'s offsets, watermark and confs
(:func:`spark_jobs.logs.checkpoint_log.restart_at`). Its next run runs batch 0 with the new code
over everything the hop's upstream tables held up to there, which fills the state stores as the
new code would have; that batch writes no row (:func:`state_only_batch`: the tables already hold
what batches up to ``N`` wrote, by the old code). The batches after it are the replay, written by
the new code. Hops that read landing files have no table snapshot to read from: refused.

The record of which batch fills state only is ``_ops/rebuilds/<pipeline>/<hop>.json``, tied to the
new query's id (a later rollback gives the hop another id, which ends it). It also names the query
ids the checkpoint had before: their batches come before the new batch 0, which stands for them when
a rollback plans (:class:`spark_jobs.control.rollback.lineage.Lineage`): a rollback to batch 0 or
later keeps them, one to the start undoes them too. Plain Python: no JVM here.
"""

from __future__ import annotations

import time
import uuid

from spark_jobs.control.hop_state import HopState
from spark_jobs.control.rollback.plans import Plan
from spark_jobs.logs import checkpoint_log
from spark_jobs.logs.fs import filesystem, read_json, write_json
from spark_jobs.model.errors import UsageError
from spark_jobs.model.lake import Lake


def _folder(lake: Lake) -> str:
    return lake.path(f"_ops/rebuilds/{lake.spec.name}")


def refusal(state: HopState, from_text: str) -> str | None:
    """Why ``hop``'s state cannot be rebuilt at a point, or None."""
    hop = state.hop
    if not hop.kind_of.state_rebuildable:
        return (
            f"--from {from_text}: hop {hop.name} reads landing files, whose stream keeps no "
            "snapshot to rebuild its state from: leave out --from to recompute it from the start"
        )
    return None


def refuse_unrebuildable(lake: Lake, names: list[str], from_text: str) -> None:
    """A :class:`UsageError` when a hop of ``names`` cannot have its state rebuilt at the point
    ``from_text`` (:func:`refusal`)."""
    for name in names:
        if reason := refusal(HopState(lake, lake.spec.hop(name)), from_text):
            raise UsageError(reason)


def note_rebuilds(lake: Lake, names: list[str], plan: Plan) -> None:
    """Say in ``plan``'s notes at which batch each hop of ``names`` has its state rebuilt."""
    targets = {step.hop: step.target_batch for step in plan.hops}
    for name in names:
        committed = checkpoint_log.commit_batch_ids(lake.checkpoint(lake.spec.hop(name)))
        batch = targets.get(name, (committed or [-1])[-1])
        if batch >= 0:
            plan.notes.append(
                f"{name}: its state is rebuilt at batch {batch} with the new code (the change "
                "is one the old state cannot follow), then the batches after it are replayed"
            )


def restart_at(state: HopState, batch_id: int, replaced: set[str]) -> str:
    """Replace ``hop``'s checkpoint by a new query's whose batch 0 rebuilds the state batch
    ``batch_id`` ended with, and record that batch 0 writes no row and stands for the batches
    of the query ids ``replaced`` (every id the checkpoint had); the new query id."""
    lake, hop = state.lake, state.hop
    new_id = str(uuid.uuid4())
    folder = _folder(lake)
    filesystem(folder).makedirs(folder, exist_ok=True)
    write_json(
        folder,
        f"{hop.name}.json",
        {
            "query_id": new_id,
            "batch_id": 0,
            "rebuilt_from_batch": batch_id,
            "replaced_query_ids": sorted(replaced),
            "at": time.time(),
        },
    )
    checkpoint_log.restart_at(state.checkpoint, batch_id, new_id)
    return new_id


def state_only_batch(state: HopState, query_id: str) -> int | None:
    """The batch of the query ``query_id`` that fills state only, if a rebuild planned one."""
    lake, hop = state.lake, state.hop
    document = read_json(f"{_folder(lake)}/{hop.name}.json")
    return document["batch_id"] if document and document.get("query_id") == query_id else None


def folded_ids(state: HopState) -> frozenset[str]:
    """The query ids whose batches a rebuild folded into its query's batch 0 (none without one)."""
    lake, hop = state.lake, state.hop
    document = read_json(f"{_folder(lake)}/{hop.name}.json")
    return frozenset(document.get("replaced_query_ids", ())) if document else frozenset()
