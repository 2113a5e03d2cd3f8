"""What ``lakehouse maintain`` prunes besides tables' files, planned and done without a JVM
(docs/guides/maintenance.md): landing files past ``retention.landing``, and records past
``retention.records``.

A landing file goes when every hop reading its folder has committed it in a batch no rollback inside
the window replays (at or before the hop's
:func:`~spark_jobs.control.removable.table_files.window_targets`), and its modification time is
older than ``retention.landing``. The file source's log keeps its entry, so a restart neither reads
it again nor misses it. A backfill of the ingest hop reads every landing file: over event times the
pruned files held, it would replace their rows with nothing, so the pruned span is recorded first
(``_ops/landing/<pipeline>/<hop>.json``) and such a backfill is refused
(:func:`backfill_refusal`)."""

from __future__ import annotations

from dataclasses import dataclass

from spark_jobs.control.hop_state import HopState
from spark_jobs.control.removable.table_files import window_targets
from spark_jobs.logs import file_source_log
from spark_jobs.logs.fs import filesystem, listing, read_json, write_json
from spark_jobs.logs.ops import read_records
from spark_jobs.model.lake import Lake
from spark_jobs.model.retention import records_ms
from spark_jobs.model.spec import HopSpec
from spark_jobs.model.times import duration_ms, epoch_seconds, iso


@dataclass(frozen=True)
class LandingPlan:
    """The landing files of one folder that may go: ``files`` (as listed), read by ``hops`` in
    batches up to ``through_batch`` each; moved under ``archive`` (None: deleted)."""

    hops: tuple[str, ...]
    folder: str
    archive: str | None
    files: tuple[str, ...]
    through_batch: dict[str, int]


def _expired(
    state: HopState, now_ms: int, keep_ms: int, target: int | None
) -> tuple[set[str], int]:
    """The files ``hop`` read in batches no rollback in the window replays (at or before
    ``target``), modified before ``now_ms - keep_ms``; and the last such batch (-1: none)."""
    if target is None or target < 0:
        return set(), -1
    entries = file_source_log.file_source_entries(state.checkpoint)
    files = {
        file_source_log.listed_path(entry["path"])
        for entry in entries
        if int(entry["batchId"]) <= target
        and int(entry.get("timestamp") or now_ms) < now_ms - keep_ms
    }
    return files, target


def landing_plan(
    lake: Lake, hops: tuple[HopSpec, ...], now_ms: int, infos_of, targets=None
) -> list[LandingPlan]:
    """Per landing folder an ingest hop of ``hops`` reads: the files that may go (none without
    ``retention.landing``). Every hop reading the folder must be done with a file."""
    declared = lake.spec.retention.get("landing")
    if declared is None:
        return []
    keep_ms = duration_ms(str(declared))
    archive = lake.spec.retention.get("expired_landing", "archive") == "archive"
    folders: dict[str, list[HopSpec]] = {}
    for hop in lake.spec.hops:
        if hop.reads_landing:
            folders.setdefault(lake.landing_of(hop), []).append(hop)
    plans = []
    targets = targets or window_targets(lake, now_ms, infos_of)
    for folder, readers in folders.items():
        if not any(reader in hops for reader in readers):
            continue
        expired, through = None, {}
        for reader in readers:
            files, through[reader.name] = _expired(
                HopState(lake, reader), now_ms, keep_ms, targets[reader.name]
            )
            expired = files if expired is None else expired & files
        present = set(file_source_log.landing_files(lake, readers[0]))
        plans.append(
            LandingPlan(
                tuple(reader.name for reader in readers),
                folder,
                lake.archive_of(readers[0]) if archive else None,
                tuple(sorted((expired or set()) & present)),
                through,
            )
        )
    return plans


def horizons_folder(lake: Lake) -> str:
    return lake.path(f"_ops/landing/{lake.spec.name}")


def pruned_span(lake: Lake, hop: str) -> dict | None:
    """What retention has pruned of ``hop``'s landing files so far: ``files``, ``first_ms`` and
    ``last_ms`` (the event times their rows span), ``archive`` (None: deleted)."""
    return read_json(f"{horizons_folder(lake)}/{hop}.json")


def prune_landing(
    lake: Lake, plan: LandingPlan, span: tuple[int | None, int | None], dry_run: bool
) -> dict:
    """Move (or delete) the plan's files; first widen each reading hop's recorded pruned span by
    ``span`` (the event times of their rows), so a crash in between refuses too much, never too
    little. One entry for the maintenance record."""
    fs = filesystem(plan.folder)
    size = sum(int(fs.size(path) or 0) for path in plan.files)
    done = {
        "landing": plan.folder,
        "hops": list(plan.hops),
        "archive": plan.archive,
        "files": len(plan.files),
        "bytes": size,
        "first_ms": span[0],
        "last_ms": span[1],
        "through_batch": plan.through_batch,
    }
    verb = (
        ("would archive" if plan.archive else "would delete")
        if dry_run
        else ("archived" if plan.archive else "deleted")
    )
    done["pruned"] = f"{verb} {len(plan.files)} landing files ({size} bytes)" + (
        f" to {plan.archive}" if plan.archive and plan.files else ""
    )
    if dry_run or not plan.files:
        return done
    for hop in plan.hops:
        before = pruned_span(lake, hop) or {}
        firsts = [value for value in (before.get("first_ms"), span[0]) if value is not None]
        lasts = [value for value in (before.get("last_ms"), span[1]) if value is not None]
        write_json(
            horizons_folder(lake),
            f"{hop}.json",
            {
                "hop": hop,
                "landing": plan.folder,
                "archive": plan.archive,
                "files": int(before.get("files", 0)) + len(plan.files),
                "first_ms": min(firsts, default=None),
                "last_ms": max(lasts, default=None),
            },
        )
    for path in plan.files:
        if plan.archive:
            target = plan.archive + path[len(plan.folder) :]
            fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
            fs.mv(path, target)
        else:
            fs.rm(path)
    return done


def backfill_refusal(lake: Lake, hops, start_ms: int, end_ms: int) -> str | None:
    """Why a backfill of ``[start_ms, end_ms)`` would lose rows: an ingest hop of ``hops`` whose
    landing files with events in the range were deleted by retention (None: it would not; a
    backfill reads archived files where they were moved)."""
    for hop in hops:
        span = pruned_span(lake, hop.name) if hop.reads_landing else None
        if (
            not span
            or span.get("archive")
            or span.get("last_ms") is None
            or span["last_ms"] < start_ms
            or span["first_ms"] >= end_ms
        ):
            continue
        return (
            f"{hop.name}'s landing files with events from {iso(span['first_ms'])} to "
            f"{iso(span['last_ms'])} were deleted by retention.landing (expired_landing: delete): "
            "a backfill over them would replace their rows with nothing. Backfill from "
            f"{iso(span['last_ms'] + 1)} on"
        )
    return None


# The records ``retention.records`` bounds: (Lake property or ``_ops`` folder, the time field).
_RECORDS = (
    ("runs", "started_at"),
    ("rollbacks", "created_at"),
    ("maintenance", "started_at"),
    ("alerts", "at"),
    ("refusals", "at"),
)


def prune_records(lake: Lake, now_ms: int, dry_run: bool) -> dict[str, int]:
    """Delete the records older than ``retention.records`` (every hop's newest run record and every
    backfill's stay, and quality results go with the run records they belong to); how many of each
    kind went."""
    cutoff = (now_ms - records_ms(lake.spec.retention)) / 1000
    counts: dict[str, int] = {}
    # oldest first: the last wins
    newest = {record.get("hop"): record.get("run_id") for record in read_records(lake)}
    for kind, field in _RECORDS:
        folder = getattr(lake, kind)
        fs = filesystem(folder)
        gone = []
        for path in listing(fs, folder):
            document = (read_json(path) if path.endswith(".json") else None) or {}
            when = epoch_seconds(document.get(field))
            if when is None or when >= cutoff or not _finished(kind, document, newest):
                continue
            gone.append(path)
            if kind == "runs":
                gone.extend(_quality_files(lake, document))
        counts[kind] = sum(1 for path in gone if path.startswith(folder))
        if not dry_run:
            for path in gone:
                filesystem(path).rm(path)
    return counts


def _finished(kind: str, document: dict, newest: dict[str, str]) -> bool:
    """Whether a record may go by age: not a hop's newest run record, not a backfill's (a rollback
    past it must know to run it again), not an unfinished rollback."""
    if kind == "runs":
        return (
            newest.get(document.get("hop")) != document.get("run_id")
            and document.get("mode") != "backfill"
        )
    return kind != "rollbacks" or document.get("status") == "succeeded"


def _quality_files(lake: Lake, record: dict) -> list[str]:
    """The quality gate's files of one run record (summary, GX result, Data Docs
    page), where present.
    """
    from spark_jobs.control.suites import results_dir

    folder = results_dir(lake)
    fs = filesystem(folder)
    stem = f"{folder}/{record.get('run_id')}.{record.get('hop')}"
    return [
        path for path in (f"{stem}.json", f"{stem}.result.json", f"{stem}.html") if fs.exists(path)
    ]
