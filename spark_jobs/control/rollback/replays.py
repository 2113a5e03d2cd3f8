"""Exact replays: the batches a rollback undid, run again as their offsets logged them.

Spark runs a batch whose ``offsets/N`` is in the checkpoint but not its ``commits/N`` with the
logged source range, watermark and timestamp, and ``Trigger.Once`` stops right after it
(``tests/spark/test_replay_facts.py``). So a rollback whose plan says ``replay: exact`` keeps
each undone batch's offsets file in ``_ops/replays/<pipeline>/<hop>.json`` (and, for a hop that
reads landing files, the file source log entries it cuts: Spark takes a logged batch's files
from that log, not from a listing); the hop's next run puts them back one at a time, runs each
once, and only then reads what is new. Late rows are dropped as the original run dropped them.

Below a hop that replays exactly (a cascade), the upstream's replay writes each undone batch
again in one commit, as the original batch did (each names its stream and batch id, Delta's
idempotent-write transaction), so a kept offset into that table moves onto the replay's commits: up
to the replay of the last undone batch it read, or, for a batch that ended part-way through a commit
(``--max-files-per-trigger``), to the same place in the replay's commit once the run has checked
that it holds the same files. A kept batch that read a snapshot or another writer's commit, or is
below a hop that plans afresh, plans afresh too (:func:`why_afresh` says why).

A kept batch is replayed only while it still reads what it read (:func:`_not_replayable`); otherwise
the file goes and the run plans afresh, as a rollback with ``--replan`` does, and says why.
"""

from __future__ import annotations

from spark_jobs.control.hop_state import HopState
from spark_jobs.control.rollback import lineage
from spark_jobs.control.rollback.journals import read_rollbacks
from spark_jobs.control.rollback.plans import HopStep, Replay, Request
from spark_jobs.logs import checkpoint_log, delta_log, file_source_log
from spark_jobs.logs.fs import filesystem, read_json, write_json, write_text
from spark_jobs.model.errors import RunFailed, UsageError
from spark_jobs.model.lake import Lake


def why_afresh(
    state: HopState, step: HopStep, request: Request, planned: list[HopStep]
) -> str | None:
    """Why a plan's undone batches cannot run again as their offsets logged them, or None: they
    can. They can for a hop back to a batch it keeps, fed by tables that this rollback leaves as
    they are or whose hops replay exactly (``planned``: the steps of the hops above) in a way its
    offsets can follow."""
    if not step.undone:
        return None
    if request.replan:
        return "--replan"
    if step.target_batch < 0:
        return "it starts over (back to before its first batch)"
    if step.skip_versions:
        return "it goes on past an earlier RESTORE above"
    logged = [
        checkpoint_log.read_offsets(step.checkpoint, batch_id).sources for batch_id in step.undone
    ]
    return _follow_all(state, step, planned, logged)


def _follow_all(
    state: HopState, step: HopStep, planned: list[HopStep], logged: list[list]
) -> str | None:
    above = {each.hop: each for each in planned}
    for upstream in step.restored_upstreams:
        if above.get(upstream) is None or above[upstream].replay != Replay.EXACT:
            return f"{upstream} above runs its undone batches afresh"
        why = _followable(state, logged, above[upstream])
        if why:
            return why
    return None


def _followable(state: HopState, logged: list[list], upstream: HopStep) -> str | None:
    """Why the batches to replay (``logged``: their source offsets) cannot follow ``upstream``'s
    replay, or None: they read its table by its commits (not a snapshot), whole versions
    or part of one the upstream's replay writes again, and every commit with data past the
    version it is restored to, up to what they read, is one the upstream's replay writes again
    (:func:`writer`)."""
    lake = state.lake
    table = lake.table(lake.spec.hop(upstream.hop))
    cut = next((each.restore_to for each in upstream.tables if each.table == table), None)
    if cut is None:
        return f"{upstream.hop}'s table is not restored"
    read = -1
    for sources in logged:
        source = lineage.upstream_offset(state, upstream.hop, sources)
        version, whole = checkpoint_log.delta_position(source)
        if (source or {}).get("isStartingVersion"):
            return f"they read {upstream.hop}'s table as a snapshot"
        if not whole and version <= cut:
            return (
                f"they read part of version {version} of {upstream.hop}'s table, "
                "which the rollback keeps"
            )
        read = max(read, version)
    if any(
        commit.app_id != writer(upstream)
        for commit in lineage.commits(table, cut)
        if commit.version <= read and commit.changes_data
    ):
        return (
            f"they read commits of {upstream.hop}'s table that its replay does not "
            "write again (a backfill's)"
        )
    return None


def writer(step: HopStep) -> str | None:
    """The query id whose commits the step's replay writes again: the one it replaces, or, when it
    carries an earlier rollback's kept batches, the one that rollback replaced."""
    return step.writer_query_id or step.old_query_id


def _path(state: HopState) -> str:
    lake, hop = state.lake, state.hop
    return f"{lake.replays}/{hop.name}.json"


def keep(state: HopState, step: HopStep, rollback_id: str, follows: dict | None = None) -> None:
    """Keep the offsets files of the hop's batches after ``target`` (before the rollback drops
    them); a second call of the same rollback (finishing a crashed one) keeps what the first kept.
    ``follows``: ``{upstream: {"old": query id, "new": query id, "target": batch}}`` of the restored
    upstreams whose replays these batches follow. The step's ``carried_replay``: the batches an
    earlier rollback kept (not replayed yet), kept after this one's (:func:`carry_or_drop`). The
    target's offsets as logged are kept too (``target_text``: the rollback moves them past the
    restores above), and the query id whose commits the replay writes again (``writer``)."""
    lake, hop = state.lake, state.hop
    kept = read_json(_path(state))
    if kept and kept.get("rollback_id") == rollback_id:
        return
    target, carried = step.target_batch, step.carried_replay
    earlier = kept if carried else None
    if carried and kept_batches(state) != list(carried):
        raise UsageError(
            f"{hop.name}: the batches an earlier rollback kept for its next run changed since this "
            "rollback was planned: plan it again"
        )
    checkpoint = state.checkpoint
    fs = filesystem(checkpoint)
    logged = {}
    for batch_id in checkpoint_log.offset_batch_ids(checkpoint):
        if batch_id > target:
            with fs.open(checkpoint_log.batch_file(checkpoint, "offsets", batch_id), "r") as handle:
                logged[str(batch_id)] = handle.read()
    if earlier:
        # as logged, not as moved
        if earlier.get("target_text") and str(earlier["target"]) in logged:
            logged[str(earlier["target"])] = earlier["target_text"]
        logged.update(earlier["batches"])
    kept = {
        "rollback_id": rollback_id,
        "query_id": step.new_query_id,
        "target": target,
        "batches": logged,
        "follows": follows or {},
        "writer": writer(step),
    }
    if target >= 0:
        with fs.open(checkpoint_log.batch_file(checkpoint, "offsets", target), "r") as handle:
            kept["target_text"] = handle.read()
    if hop.reads_landing:  # the files each undone batch read: the log entries the rollback cuts
        cut = checkpoint_log.file_log_offset(checkpoint, target)
        kept["source_log"] = [
            entry
            for entry in file_source_log.file_source_entries(checkpoint)
            if int(entry["batchId"]) > cut
        ] + ((earlier or {}).get("source_log") or [])
    write_json(lake.replays, f"{hop.name}.json", kept)


def kept_batches(state: HopState) -> list[int]:
    """The batches an earlier rollback kept for the hop's next run to replay, not replayed yet."""
    kept = read_json(_path(state))
    return (
        []
        if not kept or kept.get("replayed")
        else sorted(int(batch_id) for batch_id in kept["batches"])
    )


def carry_or_drop(
    state: HopState, step: HopStep, planned: list[HopStep], replan: bool = False
) -> HopStep:
    """The replay an earlier rollback kept for the hop (its next run has not come yet), against a
    new step of the hop. A step that goes back to a batch it keeps (not before the first,
    no ``--replan``), right before the kept ones, carries them after its own undone ones
    (``carried_replay``): nothing ran since, so they follow on from the last batch it undoes, and
    the next run replays both as logged, the upstreams it restores first (:func:`_carried_follows`).
    Any other step drops them (``dropped_replay``), and plans its own undone batches afresh too."""
    lake, hop = state.lake, state.hop
    earlier = kept_batches(state)
    if not earlier:
        return step
    kept = read_json(_path(state)) or {}
    last = step.undone[-1] if step.undone else step.target_batch
    if (
        not (replan or step.skip_versions or step.target_batch < 0)
        and earlier[0] == last + 1
        and kept.get("query_id") == step.old_query_id
        and _carried_follows(state, step, planned, kept)
    ):
        step.carried_replay, step.replay, step.afresh_because = earlier, Replay.EXACT, ""
        step.writer_query_id = kept.get("writer") or _replaced_by(
            lake, kept["rollback_id"], hop.name
        )
    else:
        step.dropped_replay, step.replay = earlier, Replay.AFRESH
    return step


def _carried_follows(state: HopState, step: HopStep, planned: list[HopStep], kept: dict) -> bool:
    """Whether the step's undone batches and the kept ones can follow the upstreams it restores
    (``planned``: the steps above) as :func:`_followable` says: each commit they read past the
    restore, whole or in part, is one an upstream's replay writes again. Kept batches that follow
    upstreams' replays (a cascade) need the same upstreams restored by steps that carry those very
    replays (the commits the kept offsets name are the ones those replays write again); kept batches
    that follow none need what they read still in the tables (no RESTORE since has undone it)."""
    lake = state.lake
    follows = kept.get("follows") or {}
    if follows and set(follows) != set(step.restored_upstreams):
        return False
    if not step.restored_upstreams:
        return True
    above = {each.hop: each for each in planned}
    for upstream, ids in follows.items():
        theirs = read_json(_path(HopState(lake, lake.spec.hop(upstream)))) or {}
        if not above[upstream].carried_replay or (theirs.get("query_id"), theirs.get("target")) != (
            ids["new"],
            ids["target"],
        ):
            return False
    # its target's offsets moved: as logged is gone
    if follows and step.undone and "target_text" not in kept:
        return False
    texts = {str(batch_id): None for batch_id in step.undone} | kept["batches"]
    if step.undone and kept.get("target_text"):
        texts[str(kept["target"])] = kept["target_text"]
    logged = [
        checkpoint_log.read_offsets(step.checkpoint, int(batch_id)).sources
        if text is None
        else checkpoint_log.text_sources(text)
        for batch_id, text in texts.items()
    ]
    if not follows and not all(
        _still_there(state, upstream, logged) for upstream in step.restored_upstreams
    ):
        return False
    return _follow_all(state, step, planned, logged) is None


def _still_there(state: HopState, upstream: str, logged: list[list]) -> bool:
    """Whether no RESTORE or emptying of ``upstream``'s table has undone what the batches read."""
    lake = state.lake
    read = max(
        checkpoint_log.delta_position(lineage.upstream_offset(state, upstream, sources))[0]
        for sources in logged
    )
    return not lineage.undone_after(lake.table(lake.spec.hop(upstream)), -1, read)


def _replaced_by(lake: Lake, rollback_id: str, hop_name: str) -> str | None:
    """The query id the rollback ``rollback_id`` replaced at the hop (kept files that
    name no writer).
    """
    journal = next((each for each in read_rollbacks(lake) if each.rollback_id == rollback_id), None)
    step = journal.plan.step(hop_name) if journal else None
    return step.old_query_id if step else None


def _reads_kept_versions(
    state: HopState, text: str, before: list[dict | None], followed: set[str]
) -> bool:
    """Whether no upstream version the logged batch reads (after what ``before``, the offsets of the
    batch before it, had read) has been undone since by a RESTORE or an emptying, but those of the
    ``followed`` upstreams, whose replays write them again. (A version undone before the batch
    read past it, by a RESTORE the batch's range spans, is read as the original run read it.)"""
    lake, hop = state.lake, state.hop
    sources = checkpoint_log.text_sources(text)
    for upstream in [name for name in hop.upstreams if name not in followed]:
        offset = lineage.upstream_offset(state, upstream, sources)
        if offset is None:
            return False
        end = checkpoint_log.delta_position(offset)[0]
        start, whole = checkpoint_log.delta_position(
            lineage.upstream_offset(state, upstream, before)
        )
        table = lake.table(lake.spec.hop(upstream))
        if lineage.undone_after(table, start if whole else start - 1, end):
            return False
    return True


def to_replay(state: HopState, say=None) -> list[tuple[int, str]]:
    """The hop's kept batches still to replay, in order, as (batch id, offsets file text); an
    empty list (and the file gone) when there are none or they no longer read what they read
    (then ``say``, if given, is told why the run plans them afresh)."""
    hop = state.hop
    kept = read_json(_path(state))
    if not kept or kept.get("replayed"):
        return []
    checkpoint = state.checkpoint
    committed = checkpoint_log.commit_batch_ids(checkpoint)
    last = committed[-1] if committed else -1
    logged = sorted(
        (int(batch_id), text) for batch_id, text in kept["batches"].items() if int(batch_id) > last
    )
    why = _not_replayable(state, kept, last, logged)
    if why:
        forget(state)
        if logged and say is not None:
            say(
                f"[{hop.name}] batches {logged[0][0]}..{logged[-1][0]} run afresh, "
                f"not as logged: {why}"
            )
        return []
    return logged


def _not_replayable(
    state: HopState, kept: dict, last: int, logged: list[tuple[int, str]]
) -> str | None:
    """Why the kept batches no longer read what they read, or None: they can run as logged."""
    lake = state.lake
    checkpoint = state.checkpoint
    follows = kept.get("follows") or {}
    # A batch planned but not committed is the first kept one put back by a replay killed since.
    if (
        checkpoint_log.query_id(checkpoint) != kept["query_id"]
        or not logged
        or logged[0][0] != last + 1
        or checkpoint_log.planned_batch(checkpoint) not in (None, last + 1)
    ):
        return "the hop's checkpoint changed since the rollback kept them"
    for upstream, ids in follows.items():
        if not _replayed_by(lake, upstream, ids, kept["rollback_id"]):
            return f"{upstream} did not replay the batches they read"
    if not all(
        _reads_kept_versions(state, text, before, set(follows))
        for (_batch_id, text), before in zip(logged, _sources_before(checkpoint, last, logged))
    ):
        return "a rollback since undid upstream data they read"
    if not _landing_kept(state, kept.get("source_log") or []):
        return "a landing file they read is gone"
    for upstream, ids in follows.items():
        if not _same_files(state, upstream, ids, logged):
            return f"{upstream}'s replay wrote a commit they read part of as other files"
    return None


def _sources_before(
    checkpoint: str, last: int, logged: list[tuple[int, str]]
) -> list[list[dict | None]]:
    """The source offsets each logged batch starts from: the last committed batch's, then each
    logged batch's before it (none before the first batch)."""
    first = checkpoint_log.read_offsets(checkpoint, last).sources if last >= 0 else []
    return [first, *(checkpoint_log.text_sources(text) for _batch_id, text in logged[:-1])]


def _landing_kept(state: HopState, entries: list[dict]) -> bool:
    """Whether every landing file the kept batches read is still in the landing folder."""
    lake, hop = state.lake, state.hop
    if not entries:
        return True
    present = set(file_source_log.landing_files(lake, hop))
    return all(file_source_log.listed_path(entry["path"]) in present for entry in entries)


# Lineage columns that differ between two writes of the same rows (the time each was written).
_WRITE_TIME = ("_ingest_time",)


def _same_files(state: HopState, upstream: str, ids: dict, logged: list[tuple[int, str]]) -> bool:
    """Whether each upstream version that a kept batch read part of (``--max-files-per-trigger``),
    the upstream's replay wrote again file for file: the same number of files, in the same order,
    each with the same rows by its statistics. A Delta offset into a version names a file by its
    place among the commit's files, so only then does the kept offset read the same rows on the
    replay. (The same batch of the same code writes the same partitions; a replay on other
    resources may not: then the run plans afresh.)"""
    lake = state.lake
    table, old, new = _replay_commits(lake, upstream, ids, {})
    batch_at = {version: batch_id for batch_id, version in old.items()}
    for _batch_id, text in logged:
        source = lineage.upstream_offset(state, upstream, checkpoint_log.text_sources(text))
        version, whole = checkpoint_log.delta_position(source)
        if whole or version not in batch_at:
            continue
        written = new.get(batch_at[version])
        if written is None or delta_log.data_files(
            table, version, _WRITE_TIME
        ) != delta_log.data_files(table, written, _WRITE_TIME):
            return False
    return True


def _replayed_by(lake: Lake, upstream: str, ids: dict, rollback_id: str) -> bool:
    """Whether ``upstream`` replayed exactly the batches the hop's kept ones follow (``ids``: the
    query id its replay writes under and the batch it went back to), refused (exit 2) while it has
    yet to: its replay comes first. A later rollback may carry the upstream's kept batches without
    going further back, so its replay is matched by what it writes, not by the rollback. False
    when it planned them afresh instead."""
    kept = read_json(_path(HopState(lake, lake.spec.hop(upstream))))
    if not kept or (kept.get("query_id"), kept.get("target")) != (
        ids.get("new"),
        ids.get("target"),
    ):
        return False
    if not kept.get("replayed"):
        raise UsageError(
            f"{upstream} has yet to replay the batches rollback {rollback_id} undid, which the "
            f"hops below it replay after it: run {upstream} first (or the whole pipeline)"
        )
    return True


def put_back(state: HopState, batch_id: int, text: str, cache: dict | None = None) -> None:
    """Write the kept ``offsets/<batch_id>`` into the checkpoint: the next start runs it again.
    Its offsets into the upstreams it follows move onto their replays' commits (``cache``: those
    tables' commits, read once for all the batches a replay puts back; the upstreams do not move
    meanwhile)."""
    lake = state.lake
    checkpoint = state.checkpoint
    kept = read_json(_path(state)) or {}
    if kept.get("source_log") is not None:  # the batch's files, in the log before its offsets
        _put_back_files(state, batch_id, text, kept["source_log"])
    write_text(checkpoint_log.batch_file(checkpoint, "offsets", batch_id), text)
    follows = kept.get("follows") or {}
    if not follows:
        return
    offsets = checkpoint_log.read_offsets(checkpoint, batch_id)
    previous = checkpoint_log.read_offsets(checkpoint, batch_id - 1).sources
    moved = list(offsets.sources)
    for upstream, ids in follows.items():
        index = lineage.upstream_index(state, upstream, offsets.sources)
        moved[index] = _followed(
            lake,
            upstream,
            ids,
            offsets.sources[index],
            previous[index],
            {} if cache is None else cache,
        )
    checkpoint_log.write_offsets(
        checkpoint,
        checkpoint_log.BatchOffsets(batch_id, offsets.watermark_ms, offsets.timestamp_ms, moved),
    )


def _put_back_files(state: HopState, batch_id: int, text: str, entries: list[dict]) -> None:
    """The file source log's batches that the logged batch read (after the batch before's), from
    the kept entries: Spark reads the batch's files from them, not from a listing."""
    lake = state.lake
    checkpoint = state.checkpoint
    start = checkpoint_log.file_log_offset(checkpoint, batch_id - 1)
    end = int(checkpoint_log.text_sources(text)[0]["logOffset"])
    for log_batch in range(start + 1, end + 1):
        file_source_log.put_back_entries(
            checkpoint,
            log_batch,
            [entry for entry in entries if int(entry["batchId"]) == log_batch],
            lake.spec.source_log_compact_interval,
        )


def _followed(
    lake: Lake, upstream: str, ids: dict, source: dict, previous: dict, cache: dict
) -> dict:
    """``source``, an offset into ``upstream``'s table as the original run logged it, on the
    upstream's replay: read up to the replay's commit of the last undone batch it read (the
    batch before's offset when it read none)."""
    _table, old, new = _replay_commits(lake, upstream, ids, cache)
    version, whole = checkpoint_log.delta_position(source)
    if not whole:  # part of a batch's commit: the same files of its replay's (:func:`_same_files`)
        batch_id = next((batch_id for batch_id, at in old.items() if at == version), None)
        if batch_id not in new:
            raise RunFailed(
                f"{upstream}'s replay did not write its batch {batch_id} again: roll "
                "back again with --replan"
            )
        return {**source, "reservoirVersion": new[batch_id]}
    read = [batch_id for batch_id, at in old.items() if at <= version and batch_id > ids["target"]]
    if not read:
        return previous
    if max(read) not in new:
        raise RunFailed(
            f"{upstream}'s replay did not write its batch {max(read)} again: roll "
            "back again with --replan"
        )
    return checkpoint_log.delta_offset_after(source, new[max(read)])


def _replay_commits(
    lake: Lake, upstream: str, ids: dict, cache: dict
) -> tuple[str, dict[int, int], dict[int, int]]:
    """``upstream``'s table, and the versions of the commits its stream wrote per batch id: the
    original query's (``ids["old"]``) and its replay's (``ids["new"]``). ``cache``: commits read."""
    table = lake.table(lake.spec.hop(upstream))
    if table not in cache:
        cache[table] = lineage.commits(table)
    written = cache[table]
    old = {
        c.batch_id: c.version for c in written if c.app_id == ids["old"] and c.batch_id is not None
    }
    new = {
        c.batch_id: c.version for c in written if c.app_id == ids["new"] and c.batch_id is not None
    }
    return table, old, new


def done(state: HopState) -> None:
    """The hop replayed its kept batches: the hops below that follow them may map
    onto its commits.
    """
    lake, hop = state.lake, state.hop
    kept = read_json(_path(state))
    if kept:
        write_json(lake.replays, f"{hop.name}.json", {**kept, "batches": {}, "replayed": True})


def forget(state: HopState) -> None:
    path = _path(state)
    fs = filesystem(path)
    if fs.exists(path):
        fs.rm(path)
