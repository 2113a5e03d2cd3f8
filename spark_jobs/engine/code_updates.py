"""A pipeline's code changed since its checkpoints ran: does each hop's streaming query still
fit the state it kept (docs/guides/code-updates.md)? Compared before any query of a run starts."""

from __future__ import annotations

from spark_jobs.control import fingerprint as fingerprints
from spark_jobs.control.hop_state import HopState
from spark_jobs.model.errors import CodeChanged


def plan_text(frame) -> str:
    """Spark's text of ``frame``'s analysed logical plan (analysis only, no job)."""
    return frame._jdf.queryExecution().analyzed().toString()


def code_update(state: HopState, frame, code_hash: str) -> tuple[str, fingerprints.Fingerprint]:
    """How ``frame`` (the hop's streaming query, not started) differs from what its checkpoint
    was run with, and its fingerprint; :class:`CodeChanged` naming the fix when the checkpoint's
    state cannot follow it."""
    hop = state.hop
    new = fingerprints.of_plan(plan_text(frame), hop, code_hash)
    old = fingerprints.recorded(state)
    change = fingerprints.change(old, new)
    if change == "incompatible":
        raise CodeChanged(fingerprints.refusal(state, old, new), hop.name)
    return change, new
