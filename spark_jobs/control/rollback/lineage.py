"""Each hop's micro-batches joined to the Delta versions they wrote and read
(docs/concepts/rollback.md).

Plain files only (no JVM): the checkpoint's logs say what each batch read, the tables'
``_delta_log`` says which commit each batch made (its ``txn``: appId = the checkpoint's query
id, version = the batch id), and a downstream hop's Delta source offsets say which upstream
versions its batches read. ``status`` shows this; rollback plans from it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field

from spark_jobs.control.hop_state import HopState
from spark_jobs.control.rollback.journals import read_rollbacks
from spark_jobs.control.rollback.rebuild import folded_ids
from spark_jobs.logs import checkpoint_log, delta_log, file_source_log, state_store
from spark_jobs.logs.fs import filesystem
from spark_jobs.logs.ops import read_records

# Delta's names (``commitInfo.operation``) of the operations the platform tells apart; a commit's
# operation may be any other of Delta's (``MERGE``, ``STREAMING UPDATE``, ``OPTIMIZE``, ...).
RESTORE, WRITE, DELETE, CREATE_TABLE = "RESTORE", "WRITE", "DELETE", "CREATE TABLE"


@dataclass(frozen=True)
class TableCommit:
    version: int
    operation: str  # Delta's name of it: RESTORE, WRITE, DELETE, CREATE_TABLE or another
    app_id: str | None
    batch_id: int | None
    timestamp_ms: int
    appends_only: bool = False  # what a stream reading with skipChangeCommits takes as new data
    empties: bool = False  # a DELETE of every row (how a rollback empties a hop that starts over)
    # It adds or removes rows (a no-data batch's empty commit, a compaction's rewrite do not).
    changes_data: bool = True


# ``DELETE FROM t`` without a condition: Delta logs its predicate as ``["true"]``.
_WHOLE_TABLE = (None, "", "[]", '["true"]', "true")


def commits(table: str, after: int = -1) -> list[TableCommit]:
    """Every commit still in the table's JSON log (past version ``after`` only), oldest first."""
    found = []
    for version in delta_log.versions(table):
        if version <= after:
            continue
        info, txn, adds, removes = {}, None, False, False
        for action in delta_log.read_commit(table, version):
            info = action.get("commitInfo", info)
            txn = action.get("txn", txn)
            adds = adds or bool(action.get("add", {}).get("dataChange"))
            removes = removes or bool(action.get("remove", {}).get("dataChange"))
        operation = info.get("operation", "")
        empties = (
            operation == DELETE
            and (info.get("operationParameters") or {}).get("predicate") in _WHOLE_TABLE
        )
        found.append(
            TableCommit(
                version,
                operation,
                (txn or {}).get("appId"),
                int(txn["version"]) if txn else None,
                int(info.get("timestamp") or 0),
                adds and not removes,
                empties,
                adds or removes,
            )
        )
    return found


def same_rows(table: str, version: int) -> tuple[int, int]:
    """The versions around ``version`` at which the table holds the same rows: the commits next to
    it that change no data (a stateful hop's no-data batch, which only advances its watermark,
    commits an empty batch). A stream that read up to any of them read the same rows, so a
    rollback to ``version`` need not undo its batch. Returns the lowest and the highest."""
    by_version = {commit.version: commit for commit in commits(table)}
    low = high = version
    while low in by_version and not by_version[low].changes_data:
        low -= 1
    while high + 1 in by_version and not by_version[high + 1].changes_data:
        high += 1
    return low, high


def effective_commits(table: str) -> list[TableCommit]:
    """The commits whose data is in the table now: a RESTORE to version v drops those after v,
    a DELETE of every row drops all before it (soak seed 1004: a hop emptied to start over and
    run again reuses batch ids under its new query id; the old ids' batches are gone)."""
    # Each commit points at the commit whose table it changed: the one before it, a RESTORE's
    # target (whose own table may predate an emptying), or none after an emptying.
    by_version: dict[int, TableCommit] = {}
    base_of: dict[int, int | None] = {}
    last = None
    for commit in commits(table):
        if commit.operation == RESTORE:
            target = restore_target(table, commit.version)
            last = target if target in by_version else None  # None: before the log's oldest version
        elif commit.empties:
            last = None
        by_version[commit.version], base_of[commit.version] = commit, last
        last = commit.version
    kept = []
    while last is not None:
        kept.append(by_version[last])
        last = base_of[last]
    return kept[::-1]


def undone_after(table: str, start: int, end: int) -> bool:
    """Whether a RESTORE or an emptying committed after version ``end`` undid a commit that
    appended data in ``(start, end]``."""
    found = commits(table)
    appended = [
        commit.version for commit in found if start < commit.version <= end and commit.appends_only
    ]
    for commit in found:
        if commit.version > end and (commit.operation == RESTORE or commit.empties):
            target = -1 if commit.empties else restore_target(table, commit.version)
            if any(version > target for version in appended):
                return True
    return False


def restore_target(table: str, version: int) -> int:
    """The version the RESTORE committed as ``version`` restored the table to."""
    parameters = delta_log.commit_info(table, version).get("operationParameters", {})
    if parameters.get("version") not in (None, "", "null"):
        return int(parameters["version"])
    stamp = parameters.get("timestamp")
    moment = (
        dt.datetime.fromisoformat(str(stamp).replace(" ", "T")).replace(tzinfo=dt.UTC).timestamp()
        * 1000
    )
    earlier = [
        c.version for c in commits(table) if c.timestamp_ms <= moment and c.version < version
    ]
    return max(earlier, default=-1)


def replay_from(table: str, version: int, complete: bool = True) -> tuple[str, int | None]:
    """Can a stream that has read ``table`` up to ``version`` go on from there?

    ``complete`` says whether it read all of ``version`` (:func:`checkpoint_log.delta_position`):
    a stream that started on the table's snapshot with ``maxFilesPerTrigger`` reads that
    snapshot over several batches, so a batch can end part-way through a version.

    ``("ok", None)``: yes, nothing after ``version`` was undone. ``("jump", r)``: appends after
    ``version`` were undone by a RESTORE and the stream had read everything the table still
    holds up to it, so it goes on after version ``r``. ``("reset", None)``: it has to start over
    from the table's snapshot, because a jump would skip rows the table still holds: the rest of
    a part-read version, or appends kept between ``version`` and the RESTORE (those before the
    RESTORE's own target), while going on in order would read the undone appends again.
    """
    later = [c for c in commits(table) if c.version > version]
    kept = {c.version for c in effective_commits(table)}
    undone = [c.version for c in later if c.appends_only and c.version not in kept]
    if not undone:
        return "ok", None
    restore = min(
        (c.version for c in later if c.operation == RESTORE and c.version > max(undone)),
        default=None,
    )
    skipped_but_kept = [
        c
        for c in later
        if c.appends_only and c.version in kept and restore is not None and c.version < restore
    ]
    if restore is None or skipped_but_kept or not complete:
        return "reset", None
    return "jump", restore


@dataclass(frozen=True)
class Lineage:
    """The query ids a hop's checkpoint has had: the current one and those rollbacks replaced
    (``ids``), and those a state rebuild replaced (``folded``,
    :mod:`spark_jobs.control.rollback.rebuild`): the rebuilt query's batch 0 stands for all of their
    batches, so theirs count as batch 0."""

    ids: frozenset[str]
    folded: frozenset[str] = frozenset()

    def __contains__(self, query_id: object) -> bool:
        return query_id in self.ids or query_id in self.folded

    def __iter__(self):
        return iter(self.ids | self.folded)

    def batch_of(self, commit: TableCommit) -> int | None:
        """The batch of this checkpoint that made ``commit`` (None: another writer's, or none)."""
        if commit.app_id not in self or commit.batch_id is None:
            return None
        return 0 if commit.app_id in self.folded else commit.batch_id


def query_ids(state: HopState) -> Lineage:
    """Ids the hop's checkpoint has had: the current one, those rollbacks replaced, and those
    a state rebuild folded into its batch 0."""
    lake, hop = state.lake, state.hop
    ids = {checkpoint_log.query_id(state.checkpoint)}
    for journal in read_rollbacks(lake):
        ids.update(step.old_query_id for step in journal.plan.hops if step.hop == hop.name)
    folded = folded_ids(state)
    return Lineage(frozenset(query for query in ids if query and query not in folded), folded)


def batch_versions(table: str, ids: Lineage) -> dict[int, int]:
    """``{batch id: table version}`` of the batches of this checkpoint still in the table."""
    return {
        batch: c.version for c in effective_commits(table) if (batch := ids.batch_of(c)) is not None
    }


def cut_version(table: str, ids: Lineage, after_batch: int) -> int | None:
    """The version the table returns to when batches after ``after_batch`` are undone: the one
    before their first commit (None: they wrote nothing there; one before the log when a commit
    of theirs may be gone: refused, outside the window); later commits by other writers (a
    backfill) are undone with them. Undoing every batch (a start over): -1, emptied, when that
    version is gone; the plan lists the backfills that went with it to run again."""
    chain = effective_commits(table)
    undone = [
        c.version for c in chain if (batch := ids.batch_of(c)) is not None and batch > after_batch
    ]
    cut = min(undone) - 1 if undone else None
    if (
        chain
        and chain[0].version > 0
        and not chain[0].empties
        and after_batch < _last_gone(table, chain, ids)
    ):
        cut = (
            chain[0].version - 1
            if chain[0].operation != RESTORE
            else restore_target(table, chain[0].version)
        )
    return (
        -1
        if after_batch < 0 and cut is not None and 0 <= cut < delta_log.versions(table)[0]
        else cut
    )


def _last_gone(table: str, chain: list[TableCommit], ids: Lineage) -> int:
    """The last batch whose commit may be among a history's commits the log no longer holds: past
    a RESTORE to a version gone, the one before the first batch seen; else the last the log's
    clean-up recorded (:func:`delta_log.hidden_transactions`)."""
    if chain[0].operation == RESTORE:
        seen = [batch for c in chain if (batch := ids.batch_of(c)) is not None]
        return min(seen) - 1 if seen else -1
    return max(
        (batch for app, batch in delta_log.hidden_transactions(table).items() if app in ids),
        default=-1,
    )


def table_label(table: str) -> str:
    """``bronze/ad_events`` for ``.../tables/bronze/ad_events``."""
    return "/".join(table.rstrip("/").rsplit("/", 2)[-2:])


def restore_problem(table: str, version: int) -> str | None:
    """Why ``RESTORE ... TO VERSION AS OF version`` would fail, or None.

    It needs the log from that version on and every data file the version used that later
    commits removed (VACUUM deletes those after the deleted-file retention).
    """
    if version < 0:
        return None
    present = delta_log.versions(table)
    if version not in present:
        oldest = present[0] if present else None
        return f"{table_label(table)} log starts at version {oldest}, not {version} (log retention)"
    fs = filesystem(table)
    added_later, removed_later = set(), set()
    for later in present[present.index(version) + 1 :]:
        for action in delta_log.read_commit(table, later):
            if "add" in action:
                added_later.add(action["add"]["path"])
            if "remove" in action:
                removed_later.add(action["remove"]["path"])
    for path in sorted(removed_later - added_later):
        full = delta_log.file_path(table, path)
        if full and not fs.exists(full):
            return (
                f"data file {path} of version {version} is gone (vacuumed: deleted-file retention)"
            )
    return None


@dataclass
class BatchInfo:
    """One micro-batch of a hop."""

    batch_id: int
    committed: bool
    source_start: dict | None
    source_end: dict | None
    files: list[str] = field(default_factory=list)
    rows: int | None = None
    watermark_ms: int | None = None
    committed_at: str | None = None
    table_version: int | None = None
    run_id: str | None = None
    read_by: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def _modified(fs, path: str) -> str | None:
    try:
        return fs.modified(path).astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    except (FileNotFoundError, NotImplementedError, AttributeError):
        return None


def hop_batches(state: HopState) -> list[BatchInfo]:
    """Every batch the hop's checkpoint still lists, oldest first."""
    hop = state.hop
    checkpoint = state.checkpoint
    fs = filesystem(checkpoint)
    offsets = checkpoint_log.offset_batch_ids(checkpoint)
    committed = set(checkpoint_log.commit_batch_ids(checkpoint))
    versions = batch_versions(state.table, query_ids(state))
    by_batch = _record_rows(state)
    entries_by_log: dict[int, list[str]] = {}
    if hop.reads_landing:
        for entry in file_source_log.file_source_entries(checkpoint):
            entries_by_log.setdefault(int(entry["batchId"]), []).append(
                file_source_log.listed_path(entry["path"])
            )
    found = []
    previous: dict | None = None
    for batch_id in offsets:
        try:
            source = checkpoint_log.read_offsets(checkpoint, batch_id).sources[0]
        except (ValueError, IndexError):
            source = None
        info = BatchInfo(
            batch_id, batch_id in committed, previous, source, table_version=versions.get(batch_id)
        )
        if hop.reads_landing and source is not None:
            end = int(source["logOffset"])
            # The offsets of the batch before may be past retention: then count this log entry only.
            start = int(previous["logOffset"]) if previous else (-1 if batch_id == 0 else end - 1)
            info.files = [
                path for log in range(start + 1, end + 1) for path in entries_by_log.get(log, [])
            ]
        if info.committed:
            try:
                info.watermark_ms = checkpoint_log.read_commit_watermark(checkpoint, batch_id)
            except ValueError:
                info.watermark_ms = None
            info.committed_at = _modified(
                fs, checkpoint_log.batch_file(checkpoint, "commits", batch_id)
            )
        info.rows, info.run_id = by_batch.get(batch_id, (None, None))
        found.append(info)
        previous = source
    return found


def upstream_index(state: HopState, upstream: str, sources: list) -> int | None:
    """Which of a batch's source offsets (``sources``) reads ``upstream``'s table: a
    single-upstream hop's only one; for a join, the Delta source whose ``reservoirId`` is that
    table's id, else the one at ``upstream``'s place in the spec's list (the join's order)."""
    lake, hop = state.lake, state.hop
    if len(hop.upstreams) > 1:
        table_id = delta_log.table_id(lake.table(lake.spec.hop(upstream)))
        for index, source in enumerate(sources):
            if table_id is not None and source and source.get("reservoirId") == table_id:
                return index
    index = hop.upstreams.index(upstream) if len(hop.upstreams) > 1 else 0
    return index if index < len(sources) else None


def upstream_offset(state: HopState, upstream: str, sources: list) -> dict | None:
    """The source offset that reads ``upstream``'s table (:func:`upstream_index`), or None."""
    index = upstream_index(state, upstream, sources)
    return None if index is None else sources[index]


def link_downstream(state: HopState, infos: list[BatchInfo]) -> None:
    """Fill ``read_by``: for each batch's table version, the batch of each hop
    below that read it.
    """
    lake, hop = state.lake, state.hop
    for below in lake.spec.feeds(hop.name):
        checkpoint = lake.checkpoint(below)
        ends = []
        for batch_id in checkpoint_log.offset_batch_ids(checkpoint):
            try:
                source = upstream_offset(
                    HopState(lake, below),
                    hop.name,
                    checkpoint_log.read_offsets(checkpoint, batch_id).sources,
                )
                ends.append((batch_id, checkpoint_log.delta_position(source)))
            except (ValueError, IndexError):
                continue
        for info in infos:
            if info.table_version is None:
                continue
            reader = next(
                (
                    batch_id
                    for batch_id, (version, _complete) in ends
                    if version >= info.table_version
                ),
                None,
            )
            if reader is not None:
                info.read_by[below.name] = reader


def _record_rows(state: HopState) -> dict[int, tuple[int, str]]:
    """Rows read per batch, from the newest run record of the current query id."""
    lake, hop = state.lake, state.hop
    current = checkpoint_log.query_id(state.checkpoint)
    rows: dict[int, tuple[int, str]] = {}
    for record in read_records(lake, hop.name):
        if record.get("query_id") != current:
            continue
        for progress in record.get("progress", []):
            rows[int(progress["batch_id"])] = (int(progress.get("rows") or 0), record["run_id"])
    return rows


def reach_problems(state: HopState, batch_id: int, landing: set[str] | None = None) -> list[str]:
    """Why the hop cannot be rolled back to ``batch_id`` (empty: it can), the rules of
    docs/concepts/checkpoints.md: ``offsets/N``, ``offsets/N-1``, ``commits/N`` and state
    version N+1 must exist, and each table restorable to the version before the undone batches
    (:func:`cut_version`)."""
    lake, hop = state.lake, state.hop
    checkpoint = state.checkpoint
    problems = []
    if batch_id >= 0:
        offsets = set(checkpoint_log.offset_batch_ids(checkpoint))
        commits_ = set(checkpoint_log.commit_batch_ids(checkpoint))
        needed = [("offsets", batch_id), ("commits", batch_id)] + (
            [("offsets", batch_id - 1)] if batch_id else []
        )
        for log, number in needed:
            if number not in (offsets if log == "offsets" else commits_):
                problems.append(
                    f"{hop.name} {log}/{number} is gone (minBatchesToRetain keeps the last "
                    f"{lake.spec.min_batches_to_retain} batches)"
                )
        for partition, versions in state_store.state_files(checkpoint).items():
            if not state_store.state_loadable(versions, batch_id + 1):
                problems.append(
                    f"{hop.name} state version {batch_id + 1} cannot be loaded from "
                    f"{partition[len(checkpoint) + 1 :]} (state files past retention)"
                )
                break
    gone = file_source_log.missing_landing(lake, hop, batch_id, landing)
    if gone:
        batch, path = gone[0]
        problems.append(
            f"{hop.name} batch {batch} read landing file {path}, which is gone"
            + (f" (and {len(gone) - 1} more)" if len(gone) > 1 else "")
            + ": a replay would not find it; put it back in the landing folder (retention.landing "
            "moves expired files to the lake's _archive/)"
        )
    ids = query_ids(state)
    for table in state.tables:
        cut = cut_version(table, ids, batch_id)
        problem = restore_problem(table, cut) if cut is not None else None
        if problem:
            problems.append(problem)
    return problems


def horizon(state: HopState, batches: list[BatchInfo] | None = None) -> int | None:
    """The oldest batch the hop can still be rolled back to (-1: to before its first batch)."""
    lake, hop = state.lake, state.hop
    committed = [
        info.batch_id
        for info in (batches if batches is not None else hop_batches(state))
        if info.committed
    ]
    # listed once, not per batch
    landing = set(file_source_log.landing_files(lake, hop)) if hop.reads_landing else None
    oldest = None
    for batch_id in sorted(committed, reverse=True) + [-1]:
        if reach_problems(state, batch_id, landing):
            break
        oldest = batch_id
    return oldest
