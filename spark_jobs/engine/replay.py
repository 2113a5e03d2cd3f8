"""A hop run's exact replay: the batches a rollback undid and kept (:mod:`spark_jobs.control.rollback.replays`),
put back one at a time and run with ``Trigger.Once``, which runs a logged, uncommitted batch with
its logged source range and watermark and stops right after it."""

from __future__ import annotations

from spark_jobs.control.rollback import replays
from spark_jobs.engine.progress import first_line
from spark_jobs.model.errors import RunFailed


def replay_logged(run) -> None:
    """Run again, in order, the hop's kept batches (none: nothing to do); then mark them replayed."""
    logged = replays.pending(run.lake, run.hop, run.progress)
    upstream_commits: dict = {}
    for batch_id, text in logged:
        replays.put_back(run.lake, run.hop, batch_id, text, upstream_commits)
        run.progress(f"[{run.hop.name}] batch {batch_id} again, as it was logged")
        query = run.start_stream({"once": True})
        while not query.awaitTermination(1):
            run.note_progress(query)
        run.note_progress(query)
        if query.exception() is not None:
            raise RunFailed(f"{run.hop.name} failed replaying batch {batch_id}: {first_line(query.exception())}")
    if logged:
        replays.done(run.lake, run.hop)
