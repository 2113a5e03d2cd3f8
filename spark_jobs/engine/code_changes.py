"""A pipeline's code changed since its checkpoints ran: does each hop's streaming query still
fit the state it kept (docs/guides/code-updates.md)? Compared before any query of a run starts."""

from __future__ import annotations

from spark_jobs.control import fingerprint as fingerprints
from spark_jobs.engine.runner import HopRun, Progress, stderr_progress
from spark_jobs.model.errors import CodeChanged
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import HopSpec
from spark_jobs.pipelines import pipeline_code


def plan_text(frame) -> str:
    """Spark's text of ``frame``'s analysed logical plan (analysis only, no job)."""
    return frame._jdf.queryExecution().analyzed().toString()


def code_change(lake: Lake, hop: HopSpec, frame, code_hash: str) -> tuple[str, fingerprints.Fingerprint]:
    """How ``frame`` (the hop's streaming query, not started) differs from what its checkpoint
    was run with, and its fingerprint; :class:`CodeChanged` naming the fix when the checkpoint's
    state cannot follow it."""
    new = fingerprints.of_plan(plan_text(frame), hop, code_hash)
    old = fingerprints.recorded(lake, hop)
    change = fingerprints.change(old, new)
    if change == "incompatible":
        raise CodeChanged(fingerprints.refusal(lake, hop, old, new), hop.name)
    return change, new


def incompatible_changes(spark, lake: Lake, hops: tuple[HopSpec, ...],
                         progress: Progress = stderr_progress) -> list[CodeChanged]:
    """Before any query of a run starts: each hop whose checkpoint was run with other code (its
    recorded code hash differs) has its new query compared with the recorded one
    (:func:`code_change`); the refusals of the hops whose state cannot follow. Hops with the same
    code hash, or no committed batch, cost nothing here."""
    current = pipeline_code(lake.spec).code_hash(lake.spec)
    refused = []
    for hop in hops:
        old = fingerprints.recorded(lake, hop)
        if old is None or old.code == current:
            continue
        run = HopRun(spark, lake, hop, "code-check", "run-once", progress)
        if not run.upstream_missing():
            try:
                code_change(lake, hop, run.streaming_frame(), current)
            except CodeChanged as error:
                refused.append(error)
    return refused


def check_code_changes(spark, lake: Lake, hops: tuple[HopSpec, ...], progress: Progress = stderr_progress) -> None:
    """:class:`CodeChanged` for the first hop whose state cannot follow its new code."""
    refused = incompatible_changes(spark, lake, hops, progress)
    if refused:
        raise refused[0]
