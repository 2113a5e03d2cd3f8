"""``lakehouse checkpoint validate``: find what would make a restart fail, skip or redo data.

Each finding names the file, what Spark would do with it (docs/concepts/checkpoints.md) and
the fix: a rollback target, or a repair ``--repair`` makes because it cannot lose or double
data (an orphan ``.crc``, a damaged last commit whose batch then reruns idempotently, a damaged
planned-but-unwritten offset file, a lost ``metadata`` whose id the run records still have). Plain
files only, no JVM.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from spark_jobs.control.hop_state import HopState
from spark_jobs.control.rollback import lineage
from spark_jobs.control.rollback.journals import read_rollbacks
from spark_jobs.logs import checkpoint_log, file_source_log, state_store
from spark_jobs.logs.fs import filesystem
from spark_jobs.logs.ops import read_records
from spark_jobs.model.errors import CheckpointDamaged, DamagedLog
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import HopSpec


@dataclass
class Finding:
    hop: str
    kind: str
    path: str
    problem: str
    fix: str
    repair: str | None = None  # what --repair does; None: not safe to do automatically
    repaired: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def _rollback_fix(state: HopState, batch_id: int) -> str:
    lake, hop = state.lake, state.hop
    return f"lakehouse rollback {lake.spec.name} --hop {hop.name} --to-batch {batch_id}"


def _parse_all(fs, checkpoint: str, log: str) -> tuple[dict[int, str], dict[int, DamagedLog]]:
    paths = checkpoint_log.log_files(checkpoint, log)
    damaged = {}
    for number, path in paths.items():
        try:
            checkpoint_log.parse_log_file(fs, path)
        except DamagedLog as error:
            damaged[number] = error
    return paths, damaged


def validate_hop(state: HopState) -> list[Finding]:
    """Every problem in the hop's checkpoint Spark would fail on, skip data over or
    redo data over.
    """
    hop = state.hop
    checkpoint = state.checkpoint
    fs = filesystem(checkpoint)
    if not fs.exists(checkpoint):
        return []
    offsets, bad_offsets = _parse_all(fs, checkpoint, "offsets")
    commits, bad_commits = _parse_all(fs, checkpoint, "commits")
    last_good = max(
        (n for n in commits if n not in bad_commits and n in offsets and n not in bad_offsets),
        default=-1,
    )
    findings = _metadata_findings(hop, checkpoint, bool(offsets))
    findings += _damaged_findings(state, offsets, bad_offsets, commits, bad_commits, last_good)
    findings += _out_of_step_findings(state, checkpoint, offsets, commits, last_good)
    findings += _orphan_checksums(fs, hop, checkpoint)
    if hop.reads_landing:
        findings.extend(_file_source_findings(state, checkpoint, last_good))
    findings.extend(_state_findings(state, checkpoint, commits))
    return findings


def _metadata_findings(hop: HopSpec, checkpoint: str, has_offsets: bool) -> list[Finding]:
    metadata = f"{checkpoint}/metadata"
    fix = "restore the query id from the run records, rollback journals or table log"
    repair = "rewrite metadata with the hop's last query id"
    try:
        query = checkpoint_log.query_id(checkpoint)
    except (ValueError, KeyError):
        return [
            Finding(hop.name, "damaged-metadata", metadata, "metadata is not JSON", fix, repair)
        ]
    if query is None and has_offsets:
        return [
            Finding(
                hop.name,
                "missing-metadata",
                metadata,
                "metadata is missing (Spark: STREAMING_CHECKPOINT_MISSING_METADATA_FILE)",
                fix,
                repair,
            )
        ]
    return []


def _damaged_findings(
    state: HopState,
    offsets: dict,
    bad_offsets: dict,
    commits: dict,
    bad_commits: dict,
    last_good: int,
) -> list[Finding]:
    """Damaged log files; the last commit or last planned batch can be deleted and redone safely."""
    hop = state.hop
    last_offset, last_commit = max(offsets, default=-1), max(commits, default=-1)
    findings = []
    for log, paths, damaged in (
        ("offsets", offsets, bad_offsets),
        ("commits", commits, bad_commits),
    ):
        for number, error in sorted(damaged.items()):
            finding = Finding(
                hop.name,
                f"damaged-{log}",
                paths[number],
                error.reason,
                _rollback_fix(state, min(number - 1, last_good)),
            )
            if (
                log == "commits"
                and number == last_commit
                and number in offsets
                and number not in bad_offsets
            ):
                finding.repair = (
                    f"delete commits/{number}: batch {number} reruns with its offsets, idempotently"
                )
            if (
                log == "offsets"
                and number == last_offset
                and number not in commits
                and not _batch_wrote(state, number)
            ):
                finding.repair = (
                    f"delete offsets/{number}: batch {number} wrote nothing and is planned again"
                )
            if number < last_offset - 1 and number < last_commit - 1:
                finding.fix = (
                    "nothing for the next run; a rollback cannot go back to "
                    f"batch {number} or before"
                )
            findings.append(finding)
    return findings


def _out_of_step_findings(
    state: HopState, checkpoint: str, offsets: dict, commits: dict, last_good: int
) -> list[Finding]:
    """Commits out of step with offsets: lagging by more than one batch, or
    without their offsets.
    """
    hop = state.hop
    last_offset, last_commit = max(offsets, default=-1), max(commits, default=-1)
    findings = []
    if last_offset - last_commit > 1:
        findings.append(
            Finding(
                hop.name,
                "commits-lag",
                f"{checkpoint}/commits",
                f"commits end at {last_commit} but offsets at {last_offset}: Spark reruns only "
                f"batch {last_offset} and batches {last_commit + 1}..{last_offset - 1} are lost",
                _rollback_fix(state, last_commit),
            )
        )
    for number in sorted(set(commits) - set(offsets)):
        findings.append(
            Finding(
                hop.name,
                "commit-without-offsets",
                commits[number],
                f"commits/{number} has no offsets/{number} (Spark: CONCURRENT_STREAM_LOG_UPDATE)",
                _rollback_fix(state, min(number - 1, last_good)),
            )
        )
    return findings


def _orphan_checksums(fs, hop: HopSpec, checkpoint: str) -> list[Finding]:
    """A log file's checksum without the file: Spark refuses to write the file over it. Leftover
    checksums of temp files from a crashed write are harmless."""
    findings = []
    for path in fs.find(checkpoint):
        folder, name = path.rsplit("/", 1)
        orphan = (
            name.startswith(".")
            and name.endswith(".crc")
            and not fs.exists(f"{folder}/{name[1:-4]}")
        )
        if orphan and re.fullmatch(r"\.(\d+(\.\w+)?|metadata|schema)\.crc", name):
            findings.append(
                Finding(
                    hop.name,
                    "orphan-crc",
                    path,
                    "a checksum without its file (Spark: 'Multiple streaming queries are "
                    "concurrently using' the checkpoint)",
                    "delete it",
                    "delete the .crc file",
                )
            )
    return findings


def _batch_wrote(state: HopState, batch_id: int) -> bool:
    ids = lineage.query_ids(state)
    return any(batch_id in lineage.batch_versions(table, ids) for table in state.tables)


def _file_source_findings(state: HopState, checkpoint: str, last_good: int) -> list[Finding]:
    lake, hop = state.lake, state.hop
    fs = filesystem(checkpoint)
    log = file_source_log.file_source_log(checkpoint)
    # The offsets name the log batch each batch read up to: a log that ends before that (its last
    # file lost) would have Spark list those files as new and read them twice.
    read_through = _log_offset_reached(checkpoint)
    if not log and read_through < 0:
        return []
    findings = []
    interval = lake.spec.source_log_compact_interval
    latest = max([*log, read_through])
    compactions = [n for n in range(latest + 1) if (n + 1) % interval == 0]
    base = compactions[-1] if compactions else -1
    needed = ([base] if base >= 0 else []) + list(range(base + 1, latest + 1))
    for number in needed:
        compact = number == base
        if number not in log or log[number][1] != compact:
            name = f"{number}.compact" if compact else str(number)
            findings.append(
                Finding(
                    hop.name,
                    "missing-compact" if compact else "missing-source-log",
                    f"{checkpoint}/sources/0/{name}",
                    f"the file source log lacks {name}: Spark cannot list the files it has read",
                    _rollback_fix(state, _batch_before_log(checkpoint, number, last_good)),
                )
            )
    for number, (path, _compact) in sorted(log.items()):
        try:
            checkpoint_log.parse_log_file(fs, path, max_version=1)
        except DamagedLog as error:
            findings.append(
                Finding(
                    hop.name,
                    "damaged-source-log",
                    path,
                    error.reason,
                    _rollback_fix(state, _batch_before_log(checkpoint, number, last_good)),
                )
            )
    return findings


def _log_offset_reached(checkpoint: str) -> int:
    """The file source log batch the newest readable offsets name (-1: none); offsets only grow,
    so one file is read."""
    for batch_id in reversed(checkpoint_log.offset_batch_ids(checkpoint)):
        try:
            source = checkpoint_log.read_offsets(checkpoint, batch_id).sources[0] or {}
        except (ValueError, IndexError, DamagedLog):
            continue
        return int(source.get("logOffset", -1))
    return -1


def _batch_before_log(checkpoint: str, log_batch: int, last_good: int) -> int:
    """The last batch whose file source offset is before ``log_batch``."""
    kept = -1
    for batch_id in checkpoint_log.offset_batch_ids(checkpoint):
        try:
            source = checkpoint_log.read_offsets(checkpoint, batch_id).sources[0] or {}
        except (ValueError, IndexError):
            break
        if int(source.get("logOffset", -1)) >= log_batch or batch_id > last_good:
            break
        kept = batch_id
    return kept


def _state_findings(state: HopState, checkpoint: str, commits: dict[int, str]) -> list[Finding]:
    hop = state.hop
    stores = state_store.state_files(checkpoint)
    if not stores or not commits:
        return []
    last = max(commits)
    findings = []
    for partition, versions in sorted(stores.items()):
        if state_store.state_loadable(versions, last + 1):
            continue
        loadable = [
            n for n in sorted(commits, reverse=True) if state_store.state_loadable(versions, n + 1)
        ]
        target = loadable[0] if loadable else -1
        findings.append(
            Finding(
                hop.name,
                "missing-state",
                partition,
                f"state version {last + 1} (written by committed batch {last}) cannot be loaded",
                _rollback_fix(state, target),
            )
        )
    return findings


def repair(state: HopState, finding: Finding) -> None:
    """Make a safe repair (``finding.repair`` is set)."""
    hop = state.hop
    fs = filesystem(finding.path)
    checkpoint = state.checkpoint
    if finding.kind == "orphan-crc":
        fs.rm(finding.path)
    elif finding.kind in ("damaged-commits", "damaged-offsets"):
        checkpoint_log.remove(fs, finding.path)
    elif finding.kind in ("missing-metadata", "damaged-metadata"):
        query_id = last_query_id(state)
        if query_id is None:
            finding.problem += (
                "; not repaired: no run record, rollback journal or table commit names its query id"
            )
            finding.fix = (
                f"roll {hop.name} back to before its first batch: {_rollback_fix(state, -1)}"
            )
            return
        checkpoint_log.set_query_id(checkpoint, query_id)
    finding.repaired = True


def last_query_id(state: HopState) -> str | None:
    """The query id the hop's checkpoint had last: the latest of its run records and of the
    rollbacks that gave it a new one (a rollback after the last run did), else the ``txn`` of the
    last stream commit in its table."""
    lake, hop = state.lake, state.hop
    known = [
        (record.get("started_at") or 0, record["query_id"])
        for record in read_records(lake, hop.name)
        if record.get("query_id")
    ]
    known += [
        (journal.finished_at or 0, step.new_query_id)
        for journal in read_rollbacks(lake)
        if journal.finished
        for step in journal.plan.hops
        if step.hop == hop.name
    ]
    if known:
        return max(known, key=lambda pair: pair[0])[1]
    streamed = [commit for commit in lineage.commits(state.table) if commit.app_id is not None]
    return streamed[-1].app_id if streamed else None


def validate(lake: Lake, hop_name: str | None = None, do_repair: bool = False) -> list[Finding]:
    hops = lake.spec.select_hops(hop_name)
    findings = []
    for hop in hops:
        state = HopState(lake, hop)
        found = validate_hop(state)
        if do_repair:
            for finding in found:
                if finding.repair:
                    repair(state, finding)
        findings.extend(found)
    return findings


def format_findings(findings: list[Finding], pipeline: str) -> str:
    if not findings:
        return f"{pipeline}: checkpoints are consistent"
    lines = [f"{pipeline}: {len(findings)} problem(s)"]
    for finding in findings:
        state = (
            " [repaired]" if finding.repaired else (" [--repair can fix]" if finding.repair else "")
        )
        lines.append(f"  {finding.hop}: {finding.kind}{state}: {finding.path}: {finding.problem}")
        lines.append(f"      fix: {finding.repair if finding.repaired else finding.fix}")
    return "\n".join(lines)


def refuse_damaged(state: HopState, progress) -> None:
    """Before a run starts its query: Spark would fail, skip or redo data on a damaged checkpoint,
    so stop with the diagnosis (:class:`CheckpointDamaged`). First what a stopped run left is
    mended: a checkpoint a state rebuild was swapping in is swapped in, the files of a log write
    killed half-way are removed."""
    lake, hop = state.lake, state.hop
    checkpoint = state.checkpoint
    checkpoint_log.finish_restart(checkpoint)
    for leftover in checkpoint_log.drop_leftovers(checkpoint):
        progress(f"[{hop.name}] removed {leftover}: an interrupted write's")
    findings = validate_hop(state)
    if findings:
        first = findings[0]
        more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
        raise CheckpointDamaged(
            f"checkpoint of {hop.name} is damaged: {first.path}: {first.problem}{more}; fix: "
            f"{first.fix}; see `lakehouse checkpoint validate {lake.spec.name}`"
        )
