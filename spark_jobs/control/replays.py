"""Exact replays: the batches a rollback undid, run again as their offsets logged them.

Spark runs a batch whose ``offsets/N`` is in the checkpoint but not its ``commits/N`` with the
logged source range, watermark and timestamp, and ``Trigger.Once`` stops right after it
(``tests/spark/test_replay_facts.py``). So before it drops them, a rollback whose plan says
``replay: exact`` keeps each undone batch's offsets file in ``_ops/replays/<pipeline>/<hop>.json``;
the hop's next run puts them back one at a time, runs each once, and only then reads what is new.
Late rows are dropped as the original run dropped them.

A kept batch is replayed only while it still reads what it read: the checkpoint still has the
query id the rollback gave it and has committed every batch before it, and no version of an
upstream table it read has been undone since (a later rollback above). Otherwise the file goes
and the run plans afresh, as a rollback with ``--replan`` does.
"""

from __future__ import annotations

from spark_jobs.control import batches
from spark_jobs.logs import checkpoint_log
from spark_jobs.logs.fs import filesystem, read_json, write_json, write_text
from spark_jobs.model.lake import Lake
from spark_jobs.model.plans import HopStep, Request
from spark_jobs.model.spec import HopSpec


def exact_possible(hop: HopSpec, step: HopStep, request: Request) -> bool:
    """Whether a plan's undone batches can run again as their offsets logged them: a hop fed by
    tables that this rollback leaves as they are, back to a batch it keeps. A hop fed by landing
    files (its file source log is cut) and a hop whose upstream this rollback restores (the logged
    versions are undone) plan afresh, as every hop does with ``--replan``."""
    return (not request.replan and bool(step.undone) and not hop.reads_landing and step.target_batch >= 0
            and not step.restored_upstreams and not step.skip_versions and not step.skip_upstream_restore)


def _path(lake: Lake, hop: HopSpec) -> str:
    return f"{lake.replays}/{hop.name}.json"


def keep(lake: Lake, hop: HopSpec, rollback_id: str, query_id: str, target: int) -> None:
    """Keep the offsets files of the hop's batches after ``target`` (before the rollback drops
    them); a second call of the same rollback (finishing a crashed one) keeps what the first kept."""
    kept = read_json(_path(lake, hop))
    if kept and kept.get("rollback_id") == rollback_id:
        return
    checkpoint = lake.checkpoint(hop)
    fs = filesystem(checkpoint)
    logged = {}
    for batch_id in checkpoint_log.offset_batch_ids(checkpoint):
        if batch_id > target:
            with fs.open(checkpoint_log.batch_file(checkpoint, "offsets", batch_id), "r") as handle:
                logged[str(batch_id)] = handle.read()
    write_json(lake.replays, f"{hop.name}.json", {"rollback_id": rollback_id, "query_id": query_id, "target": target,
                                                   "batches": logged})


def _reads_kept_versions(lake: Lake, hop: HopSpec, text: str) -> bool:
    """Whether every upstream version the logged batch reads is still in its table (none undone)."""
    sources = checkpoint_log.offsets_sources(text.splitlines()[2:])  # after the version line and the header
    for upstream in hop.upstreams:
        offset = batches.upstream_offset(lake, hop, upstream, sources)
        if offset is None:
            return False
        version = checkpoint_log.delta_position(offset)[0]
        table = lake.table(lake.spec.hop(upstream))
        kept = {commit.version for commit in batches.effective_commits(table)}
        if any(commit.version <= version and commit.appends_only and commit.version not in kept
               for commit in batches.commits(table)):
            return False
    return True


def pending(lake: Lake, hop: HopSpec) -> list[tuple[int, str]]:
    """The hop's kept batches still to replay, in order, as (batch id, offsets file text); an
    empty list (and the file gone) when there are none or they no longer read what they read."""
    kept = read_json(_path(lake, hop))
    if not kept:
        return []
    checkpoint = lake.checkpoint(hop)
    committed = checkpoint_log.commit_batch_ids(checkpoint)
    last = committed[-1] if committed else -1
    logged = sorted((int(batch_id), text) for batch_id, text in kept["batches"].items() if int(batch_id) > last)
    usable = (checkpoint_log.query_id(checkpoint) == kept["query_id"] and logged and logged[0][0] == last + 1
              and checkpoint_log.planned_batch(checkpoint) is None
              and all(_reads_kept_versions(lake, hop, text) for _batch_id, text in logged))
    if not usable:
        forget(lake, hop)
        return []
    return logged


def put_back(lake: Lake, hop: HopSpec, batch_id: int, text: str) -> None:
    """Write the kept ``offsets/<batch_id>`` into the checkpoint: the next start runs it again."""
    write_text(checkpoint_log.batch_file(lake.checkpoint(hop), "offsets", batch_id), text)


def forget(lake: Lake, hop: HopSpec) -> None:
    path = _path(lake, hop)
    fs = filesystem(path)
    if fs.exists(path):
        fs.rm(path)
