"""Before any query of a run starts: does each hop's new query still fit the state its
checkpoint kept (:func:`~spark_jobs.engine.code_updates.code_update`), for every hop of the run."""

from __future__ import annotations

from spark_jobs.control import fingerprint as fingerprints
from spark_jobs.engine.code_updates import code_update
from spark_jobs.engine.progress import Progress, stderr_progress
from spark_jobs.engine.runner import HopRun
from spark_jobs.model.errors import CodeChanged
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import HopSpec
from spark_jobs.pipelines import pipeline_code


def incompatible_updates(
    spark, lake: Lake, hops: tuple[HopSpec, ...], progress: Progress = stderr_progress
) -> list[CodeChanged]:
    """Before any query of a run starts: each hop whose checkpoint was run with other code (its
    recorded code hash differs) has its new query compared with the recorded one
    (:func:`code_update`); the refusals of the hops whose state cannot follow. Hops with the same
    code hash, or no committed batch, cost nothing here."""
    current = pipeline_code(lake.spec).code_hash(lake.spec)
    refused = []
    for hop in hops:
        run = HopRun(spark, lake, hop, "code-check", "run-once", progress)
        old = fingerprints.recorded(run.state)
        if old is None or old.code == current:
            continue
        if not run.upstream_missing():
            try:
                code_update(run.state, run.streaming_frame(), current)
            except CodeChanged as error:
                refused.append(error)
    return refused


def check_code_updates(
    spark, lake: Lake, hops: tuple[HopSpec, ...], progress: Progress = stderr_progress
) -> None:
    """:class:`CodeChanged` for the first hop whose state cannot follow its new code."""
    refused = incompatible_updates(spark, lake, hops, progress)
    if refused:
        raise refused[0]
