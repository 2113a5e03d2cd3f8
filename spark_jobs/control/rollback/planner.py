"""Plan a rollback of a pipeline to a chosen micro-batch, across hops (docs/concepts/rollback.md).

:func:`plan` reads plain files only (checkpoints, Delta logs, run records) and changes
nothing: which batches each hop undoes, the version each table returns to, what will be read
again, and what lies beyond retention, as a :class:`~spark_jobs.control.rollback.plans.Plan`;
:mod:`spark_jobs.control.rollback.execute` carries a plan out. Why each step
(docs/concepts/checkpoints.md): RESTORE does not bring back Delta's ``txn`` marker, so replayed
batches would be skipped under the old query id: each rolled-back checkpoint gets a new one. RESTORE
also leaves the undone commits in the log and adds a commit of its own, so a hop reading that table
moves its source offset past the restore. A hop below is rolled back to the last batch that read
nothing undone; when its batches straddle the cut, the hop above is taken back further to a batch
boundary the one below shares (or, failing that, the hop below starts over from the restored table's
snapshot), so no data is read twice or skipped.
"""

from __future__ import annotations

import time
import uuid

from spark_jobs.control import source_switch, topics
from spark_jobs.control.hop_state import HopState
from spark_jobs.control.join_repairs import backfilled, widened
from spark_jobs.control.rollback import lineage, replays
from spark_jobs.control.rollback.plans import (
    Backfill,
    HopStep,
    Plan,
    Replay,
    Request,
    TableAction,
    TableStep,
)
from spark_jobs.control.status import window_line
from spark_jobs.logs import checkpoint_log, delta_log, file_source_log, state_store
from spark_jobs.logs.ops import read_records
from spark_jobs.model.errors import UsageError
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import HopSpec
from spark_jobs.model.times import iso, merged_spans, parse_time

# -- targets ------------------------------------------------------------------------------------


def resolve_target(
    state: HopState, to_batch: int | None, to_run: str | None, to_time: int | None
) -> int:
    """The batch id the hop rolls back to (the last one kept; -1: none)."""
    lake, hop = state.lake, state.hop
    checkpoint = state.checkpoint
    committed = checkpoint_log.commit_batch_ids(checkpoint)
    if to_batch is not None:
        if to_batch < -1:
            raise UsageError(
                f"--to-batch {to_batch} is not a batch id: use -1 (before the first batch) or more"
            )
        return to_batch
    if to_run is not None:
        records = [record for record in read_records(lake) if record.get("run_id") == to_run]
        if not records:
            recent = sorted({record["run_id"] for record in read_records(lake)})[-5:]
            raise UsageError(
                f"unknown run id {to_run!r} for pipeline {lake.spec.name}: recent runs are "
                f"{', '.join(recent) or 'none'} (see lakehouse status)"
            )
        mine = [
            record
            for record in records
            if record.get("hop") == hop.name and record.get("batch_ids")
        ]
        if not mine:
            return committed[-1] if committed else -1  # the run wrote no batch in this hop
        record = mine[0]
        if record.get("query_id") == checkpoint_log.query_id(checkpoint):
            return min(record["batch_ids"]) - 1
        # A rollback since then gave the checkpoint a new query id, and batch ids were used again
        # by the replay: "this run and everything after it" is every batch committed since it began.
        to_time = int(record["started_at"] * 1000) - 1
    fs = checkpoint_log.filesystem(checkpoint)
    target = -1
    for batch_id in committed:
        stamp = int(
            fs.modified(checkpoint_log.batch_file(checkpoint, "commits", batch_id)).timestamp()
            * 1000
        )
        if stamp <= to_time:
            target = batch_id
    return target


# -- planning -----------------------------------------------------------------------------------


class _HopView(HopState):
    """What planning needs of one hop, read once: its state, query ids and read positions."""

    def __init__(self, lake: Lake, hop: HopSpec):
        super().__init__(lake, hop)
        self.ids = lineage.query_ids(self)
        self._positions: dict[tuple[int, str], tuple[int, bool]] = {}
        self._same: dict[int, tuple[int, int]] = {}

    def position(self, batch_id: int, upstream: str | None = None) -> tuple[int, bool]:
        """How far this (Delta-fed) hop had read ``upstream``'s table (its only upstream's by
        default) after ``batch_id``."""
        name = upstream or self.hop.upstream
        if batch_id < 0:
            return -1, True
        if (batch_id, name) not in self._positions:
            sources = checkpoint_log.read_offsets(self.checkpoint, batch_id).sources
            self._positions[(batch_id, name)] = checkpoint_log.delta_position(
                lineage.upstream_offset(self, name, sources)
            )
        return self._positions[(batch_id, name)]

    def last_clean_batch(self, cut: int, upstream: str | None = None) -> int:
        """The last committed batch that read nothing of ``upstream``'s table past
        version ``cut``.
        """
        kept = -1
        for batch_id in self.committed:
            if self.position(batch_id, upstream)[0] > cut:
                break
            kept = batch_id
        return kept

    def cut(self, batch_id: int) -> int | None:
        return lineage.cut_version(self.table, self.ids, batch_id)

    def same_rows(self, cut: int) -> tuple[int, int]:
        """The versions of this hop's table that hold the rows of ``cut``
        (:func:`lineage.same_rows`).
        """
        if cut not in self._same:
            self._same[cut] = lineage.same_rows(self.table, cut)
        return self._same[cut]

    def read_up_to(self, batch_id: int, upstream: "_HopView", cut: int) -> bool:
        """Whether this hop, after ``batch_id``, had read ``upstream``'s table exactly up to the
        rows of version ``cut``: all of a version that holds them, no more, no less."""
        version, complete = self.position(batch_id, upstream.hop.name)
        low, high = upstream.same_rows(cut)
        return complete and low <= version <= high


def _targets(
    views: list[_HopView], requested: int, notes: list[str], bounds: dict[str, int]
) -> dict[str, int]:
    """Each hop's target batch, consistent along every edge of the graph below the first view
    (see the module doc); ``views`` are in the spec's order, so a hop's upstreams come first. A
    join below is constrained by each of its upstreams that rolls back. ``bounds``: the highest
    target a hop may have (-1 for one that must start over)."""
    never = 1 << 62
    targets = {views[0].hop.name: min(requested, bounds.get(views[0].hop.name, never))}
    by_name = {view.hop.name: view for view in views}
    changed = True
    while changed:
        changed = False
        for down in views[1:]:
            ups = [
                by_name[name] for name in down.hop.upstreams if name in targets and name in by_name
            ]
            cuts = [(up, up.cut(targets[up.hop.name])) for up in ups]
            # None: the hop above keeps every version
            cuts = [(up, cut) for up, cut in cuts if cut is not None]
            if not cuts:
                targets.pop(down.hop.name, None)
                continue
            # A batch that read past the cut only into commits of no rows (a no-data
            # batch's) is clean.
            target = min(
                [down.last_clean_batch(up.same_rows(cut)[1], up.hop.name) for up, cut in cuts]
                + [targets.get(down.hop.name, never), bounds.get(down.hop.name, never)]
            )
            straddled = next(
                (
                    (up, cut)
                    for up, cut in cuts
                    if target != -1 and not down.read_up_to(target, up, cut)
                ),
                None,
            )
            if straddled is None:
                targets[down.hop.name] = target
                continue
            # Straddle: `down` read up to `position`, short of `cut`. Take `up` back to the batch
            # whose cut is exactly that position, if there is one; else `down` starts over.
            up, cut = straddled
            position = down.position(target, up.hop.name)
            earlier = [b for b in up.committed if b < targets[up.hop.name]] + [-1]
            match = next(
                (
                    b
                    for b in sorted(earlier, reverse=True)
                    if position[1] and up.cut(b) is not None and up.cut(b) == position[0]
                ),
                None,
            )
            if match is not None:
                notes.append(
                    f"{up.hop.name}: back to batch {match} instead of {targets[up.hop.name]}, "
                    f"because {down.hop.name} batch {target + 1} read {up.hop.name}'s "
                    "table across that point"
                )
                targets[up.hop.name] = match
                targets[down.hop.name] = target
            else:
                notes.append(
                    f"{down.hop.name}: starts over from {up.hop.name}'s restored table, because "
                    f"its batches do not end where {up.hop.name}'s do"
                )
                targets[down.hop.name] = -1
            changed = True
            break
    return targets


def plan(lake: Lake, request: Request) -> Plan:
    """The rollback plan of ``request``; reads files only and changes nothing."""
    head = lake.spec.hop(request.hop)
    requested = resolve_target(
        HopState(lake, head), request.to_batch, request.to_run, request.to_time
    )
    below = list(lake.spec.downstream_of(head.name))
    views = {hop.name: _HopView(lake, hop) for hop in [head, *below]}
    chain = [views[head.name]] + ([views[hop.name] for hop in below] if request.cascade else [])
    targets, skips, notes = _consistent_targets(lake, chain, requested)
    refused: list[str] = []
    for feed in lake.spec.feeds(head.name) if not request.cascade else ():
        _check_no_cascade(views[head.name], views[feed.name], targets, refused)
    hops = []
    for name, target in targets.items():
        view = views[name]
        undone = [batch_id for batch_id in view.offsets if batch_id > target]
        # only a start over
        switch = source_switch.rollback_problems(view, target, request.replan)
        problems = (
            []
            if not undone
            else switch
            if switch is not None
            # a topic's broker must hold the records too
            else (
                lineage.reach_problems(view, target)
                + topics.replay_problems(view, target, request.replan)
            )
        )
        # beyond retention: say why and how far back it does reach; plan nothing for the hop
        if problems:
            refused.extend([*problems, window_line(view)])
            hops.append(HopStep(name, target, undone, refused=problems))
            continue
        step = _hop_step(lake, view, target, _restored_upstreams(view.hop, views, targets))
        step.skip_versions = skips.get(name, {})
        step.rebackfill = _rebackfill(view, step)
        step.afresh_because = replays.why_afresh(view, step, request, hops) or ""
        step.replay = Replay.AFRESH if step.afresh_because or not step.undone else Replay.EXACT
        if step.undone or step.tables or step.restored_upstreams or step.skip_versions:
            hops.append(replays.carry_or_drop(view, step, hops, request.replan))
    backfills = _backfills(lake, hops)
    if request.to_run is not None:
        notes.extend(_repairs_kept(lake, [view.hop for view in chain], request.to_run, hops))
    if backfills:
        commands = "; ".join(f"`{each.command_line(lake.spec.name)}`" for each in backfills)
        notes.append(
            "after the next run, backfill again, in this order, what this rollback undoes and the "
            f"stream will not bring back: {commands}"
        )
    refused.extend(why for step in hops if request.exact and (why := step.not_as_logged()))
    rollback_id = (
        "rb-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:6]
    )
    return Plan(rollback_id, lake.spec.name, request, requested, hops, notes, refused, backfills)


def plan_request(
    lake: Lake,
    hop_name: str,
    *,
    to_batch: int | None = None,
    to_run: str | None = None,
    to_time: str | None = None,
    cascade: bool = True,
    replan: bool = False,
    exact: bool = False,
) -> Plan:
    """:func:`plan` from one target as a person gives it (``to_time`` as ISO-8601 text), as the
    rollback DAG and the Lakehouse page take it; a :class:`UsageError` unless
    exactly one is given."""
    given = {
        key: value
        for key, value in (("to_batch", to_batch), ("to_run", to_run), ("to_time", to_time))
        if value not in (None, "")
    }
    ms = parse_time(given["to_time"], "to_time") if "to_time" in given else None
    return plan(
        lake,
        Request(
            hop_name,
            given.get("to_batch"),
            given.get("to_run"),
            ms,
            given.get("to_time"),
            cascade,
            replan,
            exact,
        ),
    )


def _consistent_targets(
    lake: Lake, chain: list[_HopView], requested: int
) -> tuple[dict, dict, list[str]]:
    """The targets (:func:`_targets`), then each hop's history check against the upstreams this
    rollback does not restore (for the head, all of them; below it, a join's other upstreams):
    a hop that must start over is bounded to -1 and the targets are worked out again.
    Returns the targets, the versions to skip to (``{hop: {upstream: version}}``) and the notes."""
    bounds: dict[str, int] = {}
    reset_notes: list[str] = []
    by_name = {view.hop.name: view for view in chain}
    while True:
        notes: list[str] = []
        targets = _targets(chain, requested, notes, bounds)
        skips: dict[str, dict[str, int]] = {}
        resets = []
        for view in chain:
            target = targets.get(view.hop.name)
            if target is None or target < 0 or view.hop.ingests:
                continue
            restored = _restored_upstreams(view.hop, by_name, targets)
            unrestored = [upstream for upstream in view.hop.upstreams if upstream not in restored]
            found, said = _history_check(lake, view, target, unrestored)
            if found is None:
                resets.append(view.hop.name)
                reset_notes.extend(said)
            else:
                notes.extend(said)
                if found:
                    skips[view.hop.name] = found
        if not resets:
            return targets, skips, reset_notes + notes
        bounds.update({name: -1 for name in resets})


def _restored_upstreams(
    hop: HopSpec, views: dict[str, _HopView], targets: dict[str, int]
) -> list[str]:
    """The upstreams of ``hop`` whose tables this rollback restores (a target with a cut)."""
    return [
        upstream
        for upstream in hop.upstreams
        if upstream in targets and views[upstream].cut(targets[upstream]) is not None
    ]


def _history_check(
    lake: Lake, view: _HopView, target: int, upstreams: list[str]
) -> tuple[dict | None, list[str]]:
    """A Delta-fed hop rolled back to a batch that read an upstream table up to version p must
    not re-read upstream appends that an earlier RESTORE undid after p, nor skip rows the table
    still holds: jump past that RESTORE only when the batch read all of p and no kept append
    lies in between, else start over (:func:`lineage.replay_from`). Returns the version to jump
    past per upstream (of ``upstreams``), or None when the hop must start over; and the notes."""
    if target not in view.offsets:
        return {}, []  # (a target whose offsets are gone is beyond retention: the plan refuses it)
    jumps, notes = {}, []
    for upstream in upstreams:
        version, complete = view.position(target, upstream)
        verdict, restore = lineage.replay_from(
            lake.table(lake.spec.hop(upstream)), version, complete
        )
        if verdict == "reset":
            why = (
                "batch {0} read only part of version {1}"
                if not complete
                else (
                    "appends it still holds lie between version {1}, where batch "
                    "{0} stopped, and them"
                )
            ).format(target, version)
            return None, [
                f"{view.hop.name}: starts over from {upstream}'s table: an earlier rollback undid "
                f"appends there, and {why}"
            ]
        if verdict == "jump":
            notes.append(
                f"{view.hop.name}: goes on after {upstream}'s version {restore} (a RESTORE), "
                "skipping appends it undid"
            )
            jumps[upstream] = restore
    return jumps, notes


def _rebackfill(state: HopState, step: HopStep) -> list[list[str]]:
    """The ranges to backfill again at ``hop`` after the replay: rows that a backfill wrote and
    that the hop's stream will not write again.

    - The hop's RESTORE undoes its own backfill commits after the version it returns to (a start
      over that empties a table whose log's start is gone: every one before that start too): its
      stream only replays batches (a hop fed by landing files re-reads every file, so only
      Delta-fed hops lose them).
    - A hop that starts over from an ingest hop's snapshot skips that table's backfilled rows
      (its stream reads streamed rows only), so it owes every backfill of the ingest hop. A join
      owes the range widened by its ``within``: a backfilled row pairs with rows up to that far
      away in event time, outside the range (shop's model, seed 42: payments of 06:00..08:00
      backfilled, their orders of 05:xx were never joined again).
    """
    lake, hop = state.lake, state.hop
    if hop.ingests:
        return []
    ranges, main = set(), state.table
    undone = {
        int(commit.split()[0])
        for table in step.tables
        if table.table == main
        for commit in table.other_writers_undone
    }
    start = (
        delta_log.versions(main)[0]
        if any(t.table == main and t.restore_to < 0 for t in step.tables)
        else 0
    )
    for record in read_records(lake, hop.name):
        after = ((record.get("tables") or {}).get(main) or {}).get("version_after")
        if (span := backfilled(record)) and (
            after in undone or after is not None and after < start
        ):
            ranges.add(span)
    for upstream in map(lake.spec.hop, hop.upstreams):
        if step.target_batch == -1 and step.undone and upstream.ingests:
            ranges.update(
                widened(span, hop.within_ms)
                for record in read_records(lake, upstream.name)
                if (span := backfilled(record))
            )
    return [[iso(start), iso(end)] for start, end in sorted(ranges)]


def _repairs_kept(lake: Lake, hops: list[HopSpec], run_id: str, steps: list[HopStep]) -> list[str]:
    """Notes on the repairs run ``run_id`` made (:mod:`spark_jobs.control.join_repairs`) at ``hops``
    that the plan's ``steps`` leave in place: a rollback undoes stream batches, and a restore
    past a repair would backfill it again from the same upstream rows (:func:`_rebackfill`), so
    only fixing those rows (or the code) and backfilling changes what it wrote."""
    restored = {
        step.hop: {table.table: table.restore_to for table in step.tables} for step in steps
    }
    notes = []
    for hop in hops:
        main = lake.table(hop)
        for record in read_records(lake, hop.name):
            after = ((record.get("tables") or {}).get(main) or {}).get("version_after")
            cut = restored.get(hop.name, {}).get(main)
            if (
                record.get("repair")
                and str(record.get("run_id", "")).startswith(f"{run_id}.repair-")
                and backfilled(record)
                and after is not None
                and (cut is None or cut >= after)
            ):
                notes.append(
                    f"{hop.name}: the run's repair {record['run_id']} ({record['range_start']} .. "
                    f"{record['range_end']}) stays: it recomputed rows from the tables above; fix "
                    f"them (or the code), then `lakehouse backfill {lake.spec.name} --hop "
                    f"{hop.name} --start {record['range_start']} --end {record['range_end']}`"
                )
    return notes


def _backfills(lake: Lake, steps: list[HopStep]) -> list[Backfill]:
    """The backfills to run after the replay, in the spec's order: each step's ``rebackfill`` ranges
    at its hop and at every hop below it, overlapping or touching ranges of one hop merged (a
    backfill is idempotent, so one over the union does what the parts would)."""
    owed: dict[str, list[tuple[int, int]]] = {}
    for step in steps:
        for hop in (step.hop, *(below.name for below in lake.spec.downstream_of(step.hop))):
            owed.setdefault(hop, []).extend(
                (parse_time(start, "start"), parse_time(end, "end"))
                for start, end in step.rebackfill
            )
    return [
        Backfill(hop, iso(start), iso(end))
        for hop in lake.spec.hop_names
        for start, end in merged_spans(owed.get(hop, []))
    ]


def _check_no_cascade(
    up: _HopView, down: _HopView, targets: dict[str, int], refused: list[str]
) -> None:
    cut = up.cut(targets[up.hop.name])
    if cut is None or not down.committed:
        return
    clean = down.last_clean_batch(up.same_rows(cut)[1], up.hop.name)
    if clean < down.committed[-1]:
        refused.append(
            f"--no-cascade: {down.hop.name} batches {clean + 1}..{down.committed[-1]} read "
            f"{up.hop.name} data being undone; roll back with cascade"
        )
    elif not down.read_up_to(clean, up, cut):
        refused.append(
            f"--no-cascade: {down.hop.name} has not read {up.hop.name} up to version {cut}; "
            "run it first or roll back with cascade"
        )
    else:
        # nothing undone below; only its offset moves past the restore
        targets[down.hop.name] = clean


def _hop_step(lake: Lake, view: _HopView, target: int, restored: list[str]) -> HopStep:
    """One hop's part of the plan; ``restored``: its upstreams this rollback restores."""
    hop = view.hop
    undone = [batch_id for batch_id in view.offsets if batch_id > target]
    tables = []
    for table in lake.tables_of(hop):
        cut = lineage.cut_version(table, view.ids, target)
        if cut is None:
            continue
        others = [
            c
            for c in lineage.effective_commits(table)
            if c.version > cut and c.app_id not in view.ids and c.operation != lineage.CREATE_TABLE
        ]
        tables.append(
            TableStep(
                table,
                lineage.table_label(table),
                delta_log.table_version(table),
                cut,
                TableAction.RESTORE if cut >= 0 else TableAction.EMPTY,
                [f"{c.version} {c.operation}" for c in others],
            )
        )
    query_id = checkpoint_log.query_id(view.checkpoint)
    step = HopStep(
        hop.name,
        target,
        undone,
        tables,
        kind=hop.kind,
        checkpoint=view.checkpoint,
        last_batch=view.offsets[-1] if view.offsets else None,
        old_query_id=query_id,
        new_query_id=str(uuid.uuid4()) if undone else query_id,
        # The hop keeps batches that read an upstream table up to the version it returns to:
        # its next batch must start after that table's restore commit, not re-read the undone ones.
        skip_upstream_restore=bool(restored) and target >= 0,
        restored_upstreams=list(restored) if target >= 0 else [],
        state_version=target + 1 if state_store.state_files(view.checkpoint) else None,
    )
    # its checkpoint logged another source's offsets
    if hop.reads_landing and source_switch.switched(HopState(lake, hop)):
        step.source_log_cut, step.reread_files, step.reread = (
            -1,
            [],
            "every landing file (the hop starts over)",
        )
    elif hop.reads_landing:
        cut = checkpoint_log.file_log_offset(view.checkpoint, target) if target >= 0 else -1
        entries = file_source_log.file_source_entries(view.checkpoint)
        files = sorted(
            {
                file_source_log.listed_path(entry["path"])
                for entry in entries
                if int(entry["batchId"]) > cut
            }
        )
        step.source_log_cut, step.reread_files, step.reread = (
            cut,
            files,
            f"{len(files)} landing files",
        )
    elif hop.reads_topic and undone:
        step.reread = topics.reread(hop, target)
    elif undone:
        step.reread = "; ".join(
            _reread(view, target, upstream, upstream in restored) for upstream in hop.upstreams
        )
    return step


def _reread(view: _HopView, target: int, upstream: str, restored: bool) -> str:
    if restored:
        return (
            f"what {upstream} writes after its restore"
            if target >= 0
            else f"{upstream}'s restored table from its snapshot"
        )
    if target < 0:
        return f"{upstream} table from its current snapshot"
    version, complete = view.position(target, upstream)
    return f"{upstream} table from version {version + 1 if complete else version}"
