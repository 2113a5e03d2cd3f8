"""``lakehouse status``: what each hop has processed, from checkpoints, Delta logs and run
records read as plain files (no JVM)."""

from __future__ import annotations

import time

from spark_jobs.control import source_switch, topics
from spark_jobs.control.hop_state import HopState
from spark_jobs.control.rollback import lineage
from spark_jobs.control.rollback.journals import read_rollbacks
from spark_jobs.control.suites import page_rendered
from spark_jobs.logs import checkpoint_log, delta_log, file_source_log
from spark_jobs.logs.file_source_log import landing_files
from spark_jobs.logs.ops import read_maintenance, read_records
from spark_jobs.model.errors import CodeChanged
from spark_jobs.model.lake import Lake
from spark_jobs.model.times import iso


def processed_files(state: HopState) -> set[str]:
    """Landing files the ingest ``hop``'s stream has already taken into a batch (its source log)."""
    entries = file_source_log.file_source_entries(state.checkpoint)
    return {file_source_log.listed_path(entry["path"]) for entry in entries}


def new_landing_files(state: HopState, files: list[str] | None = None) -> list[str]:
    """The files of the ingest ``hop``'s landing folder (``files``, if listed already) its stream
    has not taken yet."""
    lake, hop = state.lake, state.hop
    processed = processed_files(state)
    return [
        path
        for path in (landing_files(lake, hop) if files is None else files)
        if path not in processed
    ]


def late_rows(state: HopState, records: list[dict]) -> int:
    """Rows the hop's batches dropped as later than the allowed lateness, in the batches its
    history still holds (:func:`held_late_rows` of its records and rollbacks)."""
    lake, hop = state.lake, state.hop
    cuts = [
        (journal.created_at or 0, step.target_batch)
        for journal in read_rollbacks(lake)
        if journal.finished
        for step in journal.plan.hops
        if step.hop == hop.name
    ]
    return held_late_rows(records, cuts)


def held_late_rows(records: list[dict], cuts: list[tuple[float, int]]) -> int:
    """The late rows of ``records`` (run records, each with its batches' ``progress``) that no
    rollback undid: a rollback (``cuts``: when it was planned, the batch it took the hop back to)
    later than a run takes out that run's batches past its target; their replay counts again,
    as it drops them again."""
    total = 0
    for record in records:
        targets = [target for at, target in cuts if at > (record.get("started_at") or 0)]
        if not targets:
            total += int(record.get("rows_dropped_late") or 0)
            continue
        total += sum(
            int(entry.get("rows_dropped_late") or 0)
            for entry in record.get("progress") or []
            if entry.get("batch_id", 0) <= min(targets)
        )
    return total


def hop_status(lake: Lake, hop_name: str, detail: bool = False) -> dict:
    """One hop's summary; with ``detail``, every batch, the rollback horizon and
    the lineage below.
    """
    hop = lake.spec.hop(hop_name)
    checkpoint = lake.checkpoint(hop)
    offsets = checkpoint_log.offset_batch_ids(checkpoint)
    commits = checkpoint_log.commit_batch_ids(checkpoint)
    records = read_records(lake, hop.name)
    last = records[-1] if records else None
    tables = {table: delta_log.table_version(table) for table in lake.tables_of(hop)}
    extra = {}
    if detail:
        state = HopState(lake, hop)
        infos = lineage.hop_batches(state)
        lineage.link_downstream(state, infos)
        horizon = lineage.horizon(state, infos)
        extra = {
            "batch_log": [info.to_dict() for info in infos],
            "rollback_horizon": horizon,
            "rollback_window": _window(infos, horizon, lake.spec.retention.get("rollback")),
            "min_batches_to_retain": lake.spec.min_batches_to_retain,
            "feeds": [below.name for below in lake.spec.feeds(hop.name)],
        }
    return extra | {
        "hop": hop.name,
        "kind": hop.kind,
        "checkpoint": checkpoint,
        "query_id": checkpoint_log.query_id(checkpoint),
        "batches": len(commits),
        "last_batch": offsets[-1] if offsets else None,
        "last_committed_batch": commits[-1] if commits else None,
        "pending_batch": checkpoint_log.planned_batch(checkpoint),
        "table_versions": tables,
        "runs": len(records),
        # Events later than the allowed lateness the watermark dropped, in the batches the
        # hop still holds.
        "rows_dropped_late": late_rows(HopState(lake, hop), records),
        # Rows an ingest hop kept with fields its schema does not have (``_rescued``): schema drift.
        **(
            {"rows_rescued": sum(int(record.get("rows_rescued") or 0) for record in records)}
            if hop.ingests
            else {}
        ),
        # Rows a changes hop deleted from its table (keys deleted, history versions replaced).
        **(
            {"rows_deleted": sum(int(record.get("rows_deleted") or 0) for record in records)}
            if hop.changes is not None
            else {}
        ),
        "last_run": None
        if last is None
        else {
            key: last.get(key)
            for key in (
                "run_id",
                "mode",
                "status",
                "batch_ids",
                "rows_in",
                "rows_out",
                "rows_quarantined",
                "rows_dropped_late",
                "rows_rescued",
                "rows_skipped",
                "rows_deleted",
                "live_keys",
                "duration_s",
                "error",
                "quality",
            )
        },
    }


def pipeline_status(lake: Lake, hop: str | None = None) -> dict:
    listed = {spec.name: landing_files(lake, spec) for spec in lake.spec.hops if spec.reads_landing}
    detail = bool(hop and hop != "all")
    hops = [hop] if detail else list(lake.spec.hop_names)
    return {
        "pipeline": lake.spec.name,
        "lakehouse_home": lake.home,
        # Every landing folder together (a pipeline with several sources has one per ingest hop).
        "landing": {
            "files": sum(map(len, listed.values())),
            "new_files": sum(
                len(new_landing_files(HopState(lake, lake.spec.hop(name)), files))
                for name, files in listed.items()
            ),
        },
        **({"topics": _topics(lake)} if any(spec.reads_topic for spec in lake.spec.hops) else {}),
        "hops": [hop_status(lake, name, detail) for name in hops],
        "last_maintenance": last_maintenance(lake),
    }


def last_maintenance(lake: Lake) -> dict | None:
    """The newest ``lakehouse maintain`` of the pipeline: when, how long, and its totals."""
    records = read_maintenance(lake)
    if not records:
        return None
    last = records[-1]
    return {
        "maintenance_id": last["maintenance_id"],
        "at": iso(int(last["started_at"] * 1000)),
        "duration_s": last.get("duration_s"),
        "totals": last.get("totals") or {},
        "count": len(records),
    }


def _topics(lake: Lake) -> dict[str, dict]:
    """Per topic-fed hop: its topic and the records it has not read (or why the
    broker cannot say).
    """
    found = {}
    for hop in lake.spec.hops:
        if hop.reads_topic:
            try:
                found[hop.name] = {
                    "topic": hop.kafka.topics_read,
                    "unread": sum(topics.unread(HopState(lake, hop)).values()),
                }
            except topics.TopicError as error:
                found[hop.name] = {"topic": hop.kafka.topics_read, "error": str(error)}
    return found


def format_status(status: dict) -> str:
    lines = [f"pipeline {status['pipeline']}  (LAKEHOUSE_HOME={status['lakehouse_home']})"]
    if status["landing"]["files"] or not status.get("topics"):
        lines.append(
            f"landing: {status['landing']['files']} files, "
            f"{status['landing']['new_files']} not yet ingested"
        )
    for hop, topic in (status.get("topics") or {}).items():
        said = (
            topic["error"]
            if "error" in topic
            else f"{topic['unread']} records not yet read by {hop}"
        )
        lines.append(f"topic {topic['topic']}: {said}")
    # the widest hop name, shop's included
    width = max([8, *(len(hop["hop"]) + 2 for hop in status["hops"])])
    lines.append(
        f"{'hop':<{width}}{'batches':>8}{'last':>6}{'pending':>9}{'runs':>6}  "
        "table versions / last run"
    )
    for hop in status["hops"]:
        versions = ", ".join(
            f"{table.rsplit('/', 2)[-2]}/{table.rsplit('/', 1)[-1]}@{version}"
            for table, version in hop["table_versions"].items()
        )
        last_batch = "-" if hop["last_batch"] is None else hop["last_batch"]
        pending = "-" if hop["pending_batch"] is None else hop["pending_batch"]
        lines.append(
            f"{hop['hop']:<{width}}{hop['batches']:>8}{last_batch:>6}{pending:>9}{hop['runs']:>6} "
            f" {versions}"
        )
        lines.extend(_last_run_lines(hop))
        if "batch_log" in hop:
            lines.extend(_format_batches(hop))
    return "\n".join(lines + _maintenance_lines(status.get("last_maintenance")))


def _last_run_lines(hop: dict) -> list[str]:
    """What the hop's last run did, under its row of the status."""
    run = hop["last_run"]
    if not run:
        return []
    lines = [
        f"{'':<8}last run {run['run_id']} ({run['mode']}, {run['status']}): batches "
        f"{run['batch_ids']}, rows in {run['rows_in']}, out {run['rows_out']}, quarantined "
        f"{run['rows_quarantined']}, late dropped {run['rows_dropped_late']}, {run['duration_s']} s"
    ]
    if run.get("rows_rescued"):
        lines.append(
            f"{'':<8}{run['rows_rescued']} rows of the last run have fields the schema does not "
            f"({hop['rows_rescued']} in all runs): see their _rescued column"
        )
    if run.get("rows_skipped"):
        lines.append(
            f"{'':<8}{run['rows_skipped']} records of the last run skipped: Debezium tombstones "
            "(a delete's companion for log compaction), in no table"
        )
    if run.get("rows_deleted") is not None:
        lines.append(
            f"{'':<8}{run['rows_deleted']} rows deleted by the last run ({hop['rows_deleted']} in "
            "all runs): keys deleted and history versions replaced"
        )
    if run.get("live_keys") is not None:
        lines.append(
            f"{'':<8}{run['live_keys']} live keys after the last run (a type 2 "
            "history's open versions)"
        )
    if hop.get("rows_dropped_late"):
        lines.append(
            f"{'':<8}{hop['rows_dropped_late']} rows dropped as later than the allowed lateness in "
            f"the batches the hop holds (a rollback takes the undone batches' out)"
        )
    gate = run.get("quality")
    if gate:
        rules = gate.get("failed") or gate.get("warned") or []
        lines.append(
            f"{'':<8}quality gate {gate['gate']} on {gate.get('rows') or 0} rows"
            + (
                f" ({'failed' if gate.get('failed') else 'warned'}: {', '.join(rules)})"
                if rules
                else ""
            )
            + (f"; data docs {gate['data_docs']}" if page_rendered(gate.get("data_docs")) else "")
        )
    return lines


def _maintenance_lines(done: dict | None) -> list[str]:
    if not done:
        return []
    totals = done["totals"]
    return [
        f"last maintenance {done['maintenance_id']} at {done['at']} ({done['duration_s']} s): "
        f"files {totals.get('files_before')} -> {totals.get('files_after')}, "
        f"{totals.get('files_vacuumed')} vacuumed, stored {totals.get('stored_before')} -> "
        f"{totals.get('stored_after')} bytes"
        + (
            f", {totals['state_files_deleted']} state files deleted"
            if totals.get("state_files_deleted")
            else ""
        )
        + (
            f", {totals['landing_pruned']} landing files pruned"
            if totals.get("landing_pruned")
            else ""
        )
        + (f", {totals['records_pruned']} records pruned" if totals.get("records_pruned") else "")
    ]


def _window(infos: list, horizon: int | None, declared: str | None) -> dict:
    """How far back a rollback reaches now: the oldest batch it can go back to, and since when the
    batches it can undo were committed (``since`` None: all of them, from the hop's first)."""
    committed = {info.batch_id: info.committed_at for info in infos if info.committed}
    return {
        "batch": horizon,
        "since": committed.get(horizon) if horizon is not None and horizon >= 0 else None,
        "undoable_batches": sum(
            1 for batch_id in committed if horizon is not None and batch_id > horizon
        ),
        "declared": declared,
    }


def window_line(state: HopState) -> str:
    """How far back a rollback of ``hop`` reaches now, as a refusal names it."""
    lake, hop = state.lake, state.hop
    infos = lineage.hop_batches(state)
    window = _window(infos, lineage.horizon(state, infos), lake.spec.retention.get("rollback"))
    return (
        f"{hop.name}'s {_window_text({'rollback_window': window})} (`lakehouse status "
        f"{lake.spec.name} --hop {hop.name}`)"
    )


def _window_text(hop: dict) -> str:
    window = hop["rollback_window"]
    if window["batch"] is None:
        reach = "rollback reaches nothing yet"
    elif window["batch"] == -1:
        reach = (
            f"rollback reaches back to before batch 0 (all {window['undoable_batches']} batches)"
        )
    else:
        reach = (
            f"rollback reaches back to batch {window['batch']}, committed at {window['since']} "
            f"({window['undoable_batches']} batches after it)"
        )
    return reach + (f"; the spec asks for {window['declared']}" if window["declared"] else "")


def _format_batches(hop: dict) -> list[str]:
    lines = [
        "",
        f"{hop['hop']} batches ({_window_text(hop)}; the checkpoint keeps "
        f"{hop['min_batches_to_retain']} batches; feeds {', '.join(hop['feeds']) or 'nothing'})",
        f"{'batch':>6}  {'state':<10}{'rows':>8}{'files':>7}  {'source range':<28}{'watermark':<21}"
        f"{'committed at':<21}{'version':>8}  read by",
    ]
    for info in hop["batch_log"]:
        watermark = "-"
        if info["watermark_ms"]:
            watermark = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(info["watermark_ms"] / 1000))
        lines.append(
            f"{info['batch_id']:>6}  {'committed' if info['committed'] else 'pending':<10}"
            f"{'-' if info['rows'] is None else info['rows']:>8}{len(info['files']) or '-':>7}  "
            f"{_source_range(info):<28}{watermark:<21}{info['committed_at'] or '-':<21}"
            f"{'-' if info['table_version'] is None else info['table_version']:>8}  "
            + (", ".join(f"{name} {batch}" for name, batch in info["read_by"].items()) or "-")
        )
    return lines


def _source_range(info: dict) -> str:
    end = info["source_end"] or {}
    if "logOffset" in end:
        start = int((info["source_start"] or {}).get("logOffset", -1))
        return (
            f"file log {start + 1}..{end['logOffset']}"
            if int(end["logOffset"]) > start
            else "no new data"
        )
    if "reservoirVersion" in end:
        first = checkpoint_log.delta_position(info["source_start"])
        last = checkpoint_log.delta_position(end)
        if first == last:
            return "no new data"
        return f"upstream v{first[0] + 1 if first[1] else first[0]}..v{last[0]}"
    return "-"


def pending_work(lake: Lake, strict: bool = True) -> dict[str, str | None]:
    """Per hop, why it has work to do (or None): the stream DAG's "new data?" check, no JVM.

    Bronze has work when a landing file is not in its source log, or its topic has records past
    the offsets its last batch logged (:mod:`spark_jobs.control.topics`); a Delta-fed hop when its
    upstream table has commits past the last offset it read that its stream takes rows from
    (:func:`_upstream_news`); any hop with an offset that was never committed has a batch to
    finish. A broker that cannot answer raises :class:`~spark_jobs.control.topics.TopicError`,
    and a hop whose source changed since its checkpoint began :class:`CodeChanged`
    (:mod:`spark_jobs.control.source_switch`), unless not ``strict`` (the Lakehouse page): then
    the message is the reason.
    """
    pending: dict[str, str | None] = {}
    for hop in lake.spec.hops:
        state = HopState(lake, hop)
        checkpoint = state.checkpoint
        planned = checkpoint_log.planned_batch(checkpoint)
        # the run refuses: the check says why first
        if switch := source_switch.refusal(state):
            if strict:
                raise CodeChanged(switch, hop.name)
            pending[hop.name] = switch
        elif planned is not None:
            pending[hop.name] = f"batch {planned} was planned but not committed"
        elif hop.reads_landing:
            new = new_landing_files(state)
            pending[hop.name] = f"{len(new)} new landing files" if new else None
        elif hop.reads_topic:
            try:
                pending[hop.name] = topics.news(state)
            except topics.TopicError as error:
                if strict:
                    raise
                pending[hop.name] = str(error)
        else:
            pending[hop.name] = _upstream_news(state, checkpoint)
    return pending


def _upstream_news(state: HopState, checkpoint: str) -> str | None:
    hop = state.hop
    unread = {
        upstream: versions
        for upstream in hop.upstreams
        if (versions := unread_upstream_versions(state, upstream))
    }
    if not unread:
        return None
    never = not checkpoint_log.offset_batch_ids(checkpoint)
    reasons = []
    for name, versions in unread.items():
        label = f"{name}'s" if len(hop.upstreams) > 1 else "upstream"  # a join names which upstream
        reasons.append(
            f"{label} table at version {versions[-1]}, never read"
            if never
            else (
                f"{label} version{'s' if len(versions) > 1 else ''} "
                f"{_ranges(versions)} not read yet"
            )
        )
    return "; ".join(reasons)


def unread_upstream_versions(state: HopState, upstream: str | None = None) -> list[int]:
    """The versions of ``upstream``'s table (the Delta-fed ``hop``'s only upstream by default) its
    stream has yet to take rows from: the stream DAG's "new data?" check and the Lakehouse
    page's backlog.

    A stream of a changes hop's change data feed takes rows from every commit that changes
    data. Any other stream reads with ``skipChangeCommits``, so only commits that add and remove
    nothing bring rows; below an ingest hop it also leaves out a backfill's rows
    (``streamed_rows``), so a backfill's commits there bring none either (the hop's own backfill
    writes them). After a backfill, the stream DAG then skips the Spark jobs that would read
    nothing. A version read only in part (a snapshot read over several batches) is unread; a
    stream that never ran has every version to read.
    """
    lake, hop = state.lake, state.hop
    name = upstream or hop.upstream
    if name is None:
        return []
    table = lake.table(lake.spec.hop(name))
    version = delta_log.table_version(table)
    if version is None:
        return []
    checkpoint = state.checkpoint
    offsets = checkpoint_log.offset_batch_ids(checkpoint)
    if not offsets:
        return list(range(version + 1))
    source = lineage.upstream_offset(
        state, name, checkpoint_log.read_offsets(checkpoint, offsets[-1]).sources
    )
    read_to, complete = checkpoint_log.delta_position(source)
    if lake.spec.hop(name).changes is not None:
        # a change data feed: every commit that inserts, updates or deletes a row
        later = lineage.commits(table, after=read_to)
        return ([] if complete else [read_to]) + [c.version for c in later if c.changes_data]
    backfills_bring_none = lake.spec.hop(name).ingests
    return ([] if complete else [read_to]) + [
        commit.version
        for commit in lineage.commits(table, after=read_to)
        if commit.appends_only
        and not (
            backfills_bring_none and commit.app_id is None and commit.operation != lineage.RESTORE
        )
    ]


def stream_lag(state: HopState) -> str | None:
    """Why a backfill of Delta-fed ``hop`` must wait for the hop's stream, or None.

    Rows a stream wrote upstream reach the hop's stream later; if a backfill rewrote the
    hop's range first, the stream would then add those rows a second time. So a backfill
    waits until the hop's stream has read every streamed upstream commit (a backfill's or a
    RESTORE's commits do not count: the stream does not take their rows); a join's, of each
    of its upstreams.
    """
    lake, hop = state.lake, state.hop
    if not hop.upstreams:
        return None
    checkpoint = state.checkpoint
    planned = checkpoint_log.planned_batch(checkpoint)
    if planned is not None:
        return f"{hop.name}'s stream has batch {planned} planned but not committed"
    offsets = checkpoint_log.offset_batch_ids(checkpoint)
    sources = checkpoint_log.read_offsets(checkpoint, offsets[-1]).sources if offsets else []
    lags = []
    for name in hop.upstreams:
        version, complete = checkpoint_log.delta_position(
            lineage.upstream_offset(state, name, sources)
        )
        first_unread = version + 1 if complete else version
        unread = [
            commit.version
            for commit in lineage.effective_commits(lake.table(lake.spec.hop(name)))
            if commit.version >= first_unread and commit.app_id is not None and commit.appends_only
        ]
        if unread:
            lags.append(f"{name} version{'s' if len(unread) > 1 else ''} {_ranges(unread)}")
    return f"{hop.name}'s stream has not read {', '.join(lags)} yet" if lags else None


def _ranges(versions: list[int]) -> str:
    return f"{versions[0]}..{versions[-1]}" if len(versions) > 1 else str(versions[0])
