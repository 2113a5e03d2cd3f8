"""What ``lakehouse maintain`` may remove from each table, read from the logs without a JVM
(docs/guides/maintenance.md).

VACUUM deletes the data files no version from a given one on still uses. Which version that may
be is the oldest any reader of the table may still need:

- the hop's own rollback window: a rollback to its oldest reachable batch (the checkpoint's
  retained batches, and no older than the spec's ``retention.rollback`` says when it says)
  RESTOREs each of its tables to the version before the undone batches;
- every stream that reads the table (the hops below): each retained batch it may replay reads
  from the version its offsets logged, and its next batch from its last offsets.

:func:`vacuum` then deletes the files the log says no version from that one on uses. It does not
call Delta's VACUUM, whose bound is a time in whole hours (``RETAIN 0.16 HOURS`` is rounded to 0 and
deletes a file removed a second ago), not a version.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass

from spark_jobs.control.hop_state import HopState
from spark_jobs.control.rollback import lineage
from spark_jobs.logs import checkpoint_log, delta_log, state_store
from spark_jobs.logs.fs import filesystem, write_json
from spark_jobs.model.errors import DataGone
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import HopSpec
from spark_jobs.model.times import duration_ms, iso


@dataclass(frozen=True)
class TablePlan:
    """One table's maintenance: the files of ``keep_from`` and later versions stay (``held_by``
    says who needs ``keep_from``), from the version ``latest`` of the table."""

    hop: str
    table: str
    latest: int
    keep_from: int
    held_by: str
    # the commit time of keep_from (None: its commit is no longer in the log)
    keep_from_ms: int | None

    def to_dict(self) -> dict:
        return asdict(self)


def _committed_ms(text: str | None) -> int | None:
    if not text:
        return None
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp() * 1000)


def target_batch(state: HopState, infos: list[lineage.BatchInfo], now_ms: int) -> int | None:
    """The oldest batch a rollback of ``hop`` must still reach (-1: before its first; None:
    none, the hop has no batch a rollback can reach): its horizon now, or with a declared
    ``retention.rollback``, the last batch committed before the window began, if that is later."""
    lake = state.lake
    horizon = lineage.horizon(state, infos)
    declared = lake.spec.retention.get("rollback")
    if horizon is None or declared is None:
        return horizon
    start = now_ms - duration_ms(str(declared))
    # A batch whose commit time cannot be read counts as inside the window: kept, never cut.
    before = [
        info.batch_id
        for info in infos
        if info.committed and info.committed_at and _committed_ms(info.committed_at) < start
    ]
    return max(horizon, max(before, default=-1))


def window_targets(lake: Lake, now_ms: int, infos_of) -> dict[str, int | None]:
    """Per hop, the oldest batch a rollback inside the window may take it back to: its own
    :func:`target_batch`, or further back where the rollback of another hop to that hop's own
    target takes it (a hop below that read in one batch what the hop above wrote over days goes
    back to before that batch; a hop above goes back to a boundary it shares with the one below)."""
    from spark_jobs.control.rollback import planner
    from spark_jobs.control.rollback.plans import Request
    from spark_jobs.model.errors import UsageError

    own = {
        hop.name: target_batch(HopState(lake, hop), infos_of(hop), now_ms) for hop in lake.spec.hops
    }
    targets = dict(own)
    for name, target in own.items():
        if target is None or not lake.spec.downstream_of(name):
            continue
        try:
            cascade = planner.plan(lake, Request(name, to_batch=target))
        except UsageError:
            continue
        for step in cascade.hops:
            if targets.get(step.hop) is not None and step.target_batch < targets[step.hop]:
                targets[step.hop] = step.target_batch
    return targets


def _own_need(state: HopState, table: str, target: int | None, latest: int) -> tuple[int, str]:
    """The version a rollback of ``hop`` to ``target`` restores ``table`` to (``latest``: none)."""
    hop = state.hop
    if target is None:
        return latest, "nothing (no batch a rollback can reach)"
    ids = lineage.query_ids(state)
    # A rollback that undoes every commit of the hop empties the table (no old version read): the
    # oldest version needed is the one the first rollback inside the window that restores reads.
    for batch in [
        target,
        *(b for b in checkpoint_log.commit_batch_ids(state.checkpoint) if b > target),
    ]:
        cut = lineage.cut_version(table, ids, batch)
        if cut is None:
            break
        if cut >= 0:
            return _restored_from(
                table, cut
            ), f"{hop.name}'s rollback window (back to batch {batch})"
    return (
        latest,
        f"nothing ({hop.name}'s batches after {target} wrote no commit here, or "
        "a rollback empties it)",
    )


def _restored_from(table: str, version: int) -> int:
    """``version``, or when its commit is a RESTORE, the version it restored to (and so on): with
    the log cleaned up to a RESTORE, a rollback reads the version that RESTORE names
    (:func:`lineage.cut_version`), so that version's log and files must stay (shop's model with
    late events, seed 4: a log that began at a RESTORE to a version gone cut a hop's window)."""
    present = set(delta_log.versions(table))
    while (
        version in present
        and delta_log.commit_info(table, version).get("operation") == lineage.RESTORE
    ):
        version = lineage.restore_target(table, version)
    return version


def _reader_needs(state: HopState, targets: dict[str, int | None]) -> list[tuple[int, str]]:
    """Per stream reading ``hop``'s table, the oldest version a batch it may replay (or its next
    batch) reads from: the ``reservoirVersion`` of its offsets from the batch before its own oldest
    reachable batch on. A restarting stream asks its Delta source for its last logged batch again,
    from the offsets of the batch before it (Spark's ``getBatch`` on restart, committed or not), and
    the source refuses when that start version has left the log."""
    lake, hop = state.lake, state.hop
    needs = []
    for reader in lake.spec.feeds(hop.name):
        checkpoint = lake.checkpoint(reader)
        logged = checkpoint_log.offset_batch_ids(checkpoint)
        if not logged:
            continue
        target = targets[reader.name]
        kept = [batch_id for batch_id in logged if target is not None and batch_id >= target]
        first = logged.index(kept[0]) if kept else len(logged) - 1
        for batch_id in logged[max(first - 1, 0) :]:
            try:
                sources = checkpoint_log.read_offsets(checkpoint, batch_id).sources
            except (ValueError, IndexError):
                continue
            source = lineage.upstream_offset(HopState(lake, reader), hop.name, sources)
            if source and "reservoirVersion" in source:
                needs.append(
                    (
                        int(source["reservoirVersion"]),
                        f"{reader.name}'s stream (offsets of batch {batch_id})",
                    )
                )
    return needs


def plan(lake: Lake, hops: tuple[HopSpec, ...], now_ms: int, targets=None) -> list[TablePlan]:
    """Per table of ``hops`` that exists: the oldest version whose files stay, and who holds it
    (``targets``: :func:`window_targets`, if known already)."""
    cache: dict[str, list[lineage.BatchInfo]] = {}

    def infos_of(hop: HopSpec) -> list[lineage.BatchInfo]:
        if hop.name not in cache:
            cache[hop.name] = lineage.hop_batches(HopState(lake, hop))
        return cache[hop.name]

    plans = []
    targets = targets or window_targets(lake, now_ms, infos_of)
    for hop in hops:
        target = targets[hop.name]
        state = HopState(lake, hop)
        readers = _reader_needs(state, targets)
        for table in state.tables:
            present = delta_log.versions(table)
            if not present:
                continue
            latest = present[-1]
            needs = [
                _own_need(state, table, target, latest),
                (latest, "the current version"),
                *(readers if table == state.table else []),
            ]
            keep_from, held_by = min(needs, key=lambda need: need[0])
            keep_from = max(keep_from, present[0])
            stamp = (
                delta_log.commit_info(table, keep_from).get("timestamp")
                if keep_from in present
                else None
            )
            plans.append(
                TablePlan(
                    hop.name, table, latest, keep_from, held_by, int(stamp) if stamp else None
                )
            )
    return plans


def table_line(done: dict) -> str:
    """One table of a maintenance record, as ``maintain`` and ``status`` print it."""
    return (
        f"{done['hop']} {lineage.table_label(done['table'])}: {done['files_before']} files -> "
        f"{done['files_after']}; compaction: {done.get('compacted')}; vacuum: "
        f"{done.get('vacuumed')}; log: {done.get('log', '-')}; {describe_keep(done)}"
    )


def describe_keep(done: dict) -> str:
    """``keeps version 12 (committed ...) and later: held by gold's stream
    (offsets of batch 5)``.
    """
    when = f", committed {iso(done['keep_from_ms'])}" if done.get("keep_from_ms") else ""
    return f"keeps version {done['keep_from']}{when} and later: held by {done['held_by']}"


def stored_bytes(table: str) -> int:
    """Bytes under the table's folder: its current files, removed ones not yet
    vacuumed, and its log.
    """
    return int(filesystem(table).du(table))


def vacuum(step: TablePlan, dry_run: bool) -> dict:
    """Delete the files no version from ``step.keep_from`` on uses (:func:`delta_log.unused_files`)
    that are still there, and those no commit names that are older than ``keep_from``'s commit
    (:func:`delta_log.unnamed_files`), with their checksum files; count them and their bytes."""
    fs = filesystem(step.table)
    found = []
    for path in delta_log.unused_files(step.table, step.keep_from):
        full = delta_log.file_path(step.table, path)
        if full and fs.exists(full):
            found.append(full)
    unnamed = delta_log.unnamed_files(step.table, step.keep_from_ms) if step.keep_from_ms else []
    found += [path for path in unnamed if path not in found]
    size = sum(int(fs.size(path) or 0) for path in found)
    if not dry_run:
        for path in found:
            folder, name = path.rsplit("/", 1)
            # Hadoop's local file system writes one beside each file
            checksum = f"{folder}/.{name}.crc"
            fs.rm([path, checksum] if fs.exists(checksum) else [path])
    named_by_none = f", {len(unnamed)} of them named by no commit" if unnamed else ""
    return {
        "vacuumed": (
            f"{'would delete' if dry_run else 'deleted'} {len(found)} files ({size} "
            f"bytes){named_by_none}"
        ),
        "files_vacuumed": 0 if dry_run else len(found),
        "bytes_vacuumed": 0 if dry_run else size,
        "files_named_by_none": 0 if dry_run else len(unnamed),
    }


def _backfill_write(commit: lineage.TableCommit) -> bool:
    """A commit that added rows without a stream's ``txn``: a backfill's."""
    return commit.app_id is None and commit.operation == lineage.WRITE


def backfill_writes(table: str) -> bool:
    """Whether a backfill (a commit without a stream's ``txn``) ever added rows to ``table``. When
    the log's early commits are gone: what :func:`clean_log` recorded of them, else assume so."""
    found = lineage.commits(table)
    recent = any(map(_backfill_write, found))
    if not found or found[0].version == 0:
        return recent
    cleaned = delta_log.cleaned_record(table)
    return (
        recent
        or cleaned is None
        or cleaned.get("first_kept") != found[0].version
        or cleaned["backfill_writes"]
    )


def clean_log(step: TablePlan, dry_run: bool) -> dict:
    """Delete the table's log files older than its newest checkpoint at or before ``keep_from``
    (:func:`delta_log.log_files_before`): no version a rollback in the window restores, or a
    reader reads, is older. Delta's own clean-up does the same by time (30 days); this one by
    version, so a table's log holds the window, not a month of 30-minute commits."""
    base, old = delta_log.log_files_before(step.table, step.keep_from)
    if not dry_run and old:
        # First what the commits about to go said of backfills (a bronze stream compares its rows
        # with a backfill's only when one ever wrote), then the files.
        earlier = any(
            _backfill_write(commit)
            for commit in lineage.commits(step.table)
            if commit.version < base
        )
        # And the last batch of each stream whose commit, still in effect, goes: a rollback to
        # before it must restore a version that goes too (refused), not the first one left.
        chain = lineage.effective_commits(step.table)
        before = delta_log.cleaned_record(step.table) or {}
        # An earlier clean-up's batches count while the history still reaches back to them.
        reaches = bool(chain) and chain[0].version == before.get("first_kept")
        hidden = dict(before.get("hidden_batches") or {}) if reaches else {}
        for commit in chain:
            if commit.version < base and commit.app_id and commit.batch_id is not None:
                hidden[commit.app_id] = max(hidden.get(commit.app_id, -1), commit.batch_id)
        write_json(
            step.table,
            delta_log.CLEANED,
            {
                "first_kept": base,
                "hidden_batches": hidden,
                "backfill_writes": earlier or backfill_writes(step.table),
            },
        )
        filesystem(step.table).rm(old)
    said = (
        f"{'would delete' if dry_run else 'deleted'} {len(old)} files older than its "
        f"checkpoint at version {base}"
        if old
        else f"nothing older than a checkpoint at or before version {step.keep_from}"
    )
    return {"log": said, "log_files_deleted": 0 if dry_run else len(old)}


def stream_gap(state: HopState) -> str | None:
    """What the Delta-fed ``hop``'s next batch would read that is gone, or None: a version of an
    upstream's log past the one its last offsets name, or a file one of those versions added.
    (``maintain`` never removes these; Delta's log clean-up, a VACUUM or a hand can.)"""
    lake, hop = state.lake, state.hop
    checkpoint = state.checkpoint
    logged = checkpoint_log.offset_batch_ids(checkpoint)
    if not hop.upstreams or not logged:
        return None  # a first batch reads the upstream's snapshot as it is
    sources = checkpoint_log.read_offsets(checkpoint, logged[-1]).sources
    for name in hop.upstreams:
        source = lineage.upstream_offset(state, name, sources)
        if not source or source.get("isStartingVersion"):
            continue
        table = lake.table(lake.spec.hop(name))
        version, complete = checkpoint_log.delta_position(source)
        first = version + 1 if complete else version
        present = delta_log.versions(table)
        if present and first < present[0]:
            return (
                f"{name}'s versions {first}..{present[0] - 1} (its log starts at "
                f"version {present[0]})"
            )
        fs = filesystem(table)
        for commit in lineage.commits(table, after=first - 1):
            if not commit.appends_only:
                continue  # the stream skips commits that remove files
            for action in delta_log.read_commit(table, commit.version):
                path = action.get("add", {}).get("path")
                full = delta_log.file_path(table, path) if path else None
                if full and not fs.exists(full):
                    return f"data file {path} of {name}'s version {commit.version}"
    return None


def increment_gone(table: str, before: int | None, after: int | None) -> str | None:
    """What reading the change feed of ``table``'s versions ``(before, after]`` (a quality check
    of an old run) needs that is gone, or None: a version no longer in the log, or a file one of
    those commits wrote (its change-data files when it has any, else its added files)."""
    if after is None or after == before:
        return None
    present = set(delta_log.versions(table))
    fs = filesystem(table)
    for version in range((before if before is not None else -1) + 1, after + 1):
        if version not in present:
            return f"version {version} of {lineage.table_label(table)} (no longer in its log)"
        actions = delta_log.read_commit(table, version)
        kind = "cdc" if any("cdc" in action for action in actions) else "add"
        for action in actions:
            path = action.get(kind, {}).get("path")
            full = delta_log.file_path(table, path) if path else None
            if full and not fs.exists(full):
                return f"data file {path} of {lineage.table_label(table)}'s version {version}"
    return None


def check_readable(lake: Lake, hops) -> None:
    """Refuse a run, before it reads anything, when a hop's stream would find what it must read
    next gone (:func:`stream_gap`), naming the gap and the command that recovers."""
    for hop in hops:
        gap = stream_gap(HopState(lake, hop))
        if gap:
            raise DataGone(
                f"{hop.name}'s stream has yet to read {gap}, which is gone; nothing was read. "
                f"Recompute {hop.name} from its upstream's table as it is now: `lakehouse refresh "
                f"{lake.spec.name} --hop {hop.name}`"
            )


def prune_state(state: HopState, target: int | None, dry_run: bool) -> dict:
    """Delete the state store files of ``hop``'s checkpoint that no rollback inside the window
    (back to batch ``target``: state version ``target + 1``, and 1 for a window reaching before
    the first batch, which needs none) and no run from the latest batch on reads. Spark cleans
    them itself only when its maintenance task runs (every minute, in a live query): a run-once
    job often ends before it does."""
    hop = state.hop
    checkpoint = state.checkpoint
    committed = checkpoint_log.commit_batch_ids(checkpoint)
    if target is None or not committed:
        return {"hop": hop.name, "state_files": 0}
    old = state_store.state_before(checkpoint, min(max(target, 0), committed[-1]) + 1)
    fs = filesystem(checkpoint)
    if not dry_run:
        for path in old:
            folder, name = path.rstrip("/").rsplit("/", 1)
            fs.rm([path, f"{folder}/.{name}.crc"] if fs.exists(f"{folder}/.{name}.crc") else [path])
    return {
        "hop": hop.name,
        "state_files": len(old),
        "state": f"{'would delete' if dry_run else 'deleted'} "
        f"{len(old)} state files older than what a rollback to batch {target} loads",
    }
