"""A file source's log in a checkpoint: ``sources/<i>/N`` lists the files batch N read, and
every ``compact_interval`` batches a ``N.compact`` file holds all entries up to N. Reading its
entries, and cutting it back to a rollback's target (docs/concepts/checkpoints.md)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from spark_jobs.logs.checkpoint_log import numbered, read_log_file, remove, write_log_file
from spark_jobs.logs.fs import filesystem, listing

if TYPE_CHECKING:
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.spec import HopSpec


def file_source_log(checkpoint: str, source: int = 0) -> dict[int, tuple[str, bool]]:
    """``{log batch id: (path, is_compact)}`` of a file source's log."""
    fs = filesystem(checkpoint)
    folder = f"{checkpoint}/sources/{source}"
    found = {number: (path, False) for number, path in numbered(fs, folder).items()}
    found.update(
        {number: (path, True) for number, path in numbered(fs, folder, ".compact").items()}
    )
    return found


def truncate_file_source(
    checkpoint: str, last_log_batch: int, compact_interval: int, source: int = 0
) -> list[str]:
    """Make a file source's log end at ``last_log_batch`` (-1: empty); return what changed.

    Entries carry their ``batchId``, so a compact file past the cut is split: the files Spark
    needs to read the log up to the cut (the newest compaction batch at or before it, then one
    plain file per later batch) are written from the kept entries when missing, and only then
    is everything past the cut removed, so a crash at any point leaves a readable log.
    """
    fs = filesystem(checkpoint)
    folder = f"{checkpoint}/sources/{source}"
    changed = []
    if last_log_batch >= 0:
        kept = [
            entry
            for entry in file_source_entries(checkpoint, source)
            if int(entry["batchId"]) <= last_log_batch
        ]
        present = file_source_log(checkpoint, source)
        compaction = [b for b in range(last_log_batch + 1) if (b + 1) % compact_interval == 0]
        base = compaction[-1] if compaction else -1
        if base >= 0 and not (base in present and present[base][1]):
            write_log_file(
                fs,
                f"{folder}/{base}.compact",
                "v1",
                [
                    json.dumps(entry, separators=(",", ":"))
                    for entry in kept
                    if int(entry["batchId"]) <= base
                ],
            )
            changed.append(f"sources/{source}/{base}.compact (rewritten)")
        for number in range(base + 1, last_log_batch + 1):
            if number not in present or present[number][1]:
                write_log_file(
                    fs,
                    f"{folder}/{number}",
                    "v1",
                    [
                        json.dumps(entry, separators=(",", ":"))
                        for entry in kept
                        if int(entry["batchId"]) == number
                    ],
                )
                changed.append(f"sources/{source}/{number} (rewritten)")
    for number, (path, compact) in sorted(
        file_source_log(checkpoint, source).items(), reverse=True
    ):
        if number > last_log_batch:
            remove(fs, path)
            changed.append(f"sources/{source}/{number}{'.compact' if compact else ''}")
    return changed


def put_back_entries(
    checkpoint: str, log_batch: int, entries: list[dict], compact_interval: int, source: int = 0
) -> None:
    """Write ``log_batch``'s entries back at the end of a file source's log (cut before it), as
    Spark wrote them: a plain ``N``, or at a compaction batch ``N.compact`` with every entry up
    to it. Writing the same batch again writes the same file."""
    fs = filesystem(checkpoint)
    folder = f"{checkpoint}/sources/{source}"
    if (log_batch + 1) % compact_interval == 0:
        earlier = [
            entry
            for entry in file_source_entries(checkpoint, source)
            if int(entry["batchId"]) < log_batch
        ]
        path, lines = f"{folder}/{log_batch}.compact", [*earlier, *entries]
    else:
        path, lines = f"{folder}/{log_batch}", entries
    write_log_file(fs, path, "v1", [json.dumps(entry, separators=(",", ":")) for entry in lines])


def file_source_entries(checkpoint: str, source: int = 0) -> list[dict]:
    """Every ``{path, timestamp, batchId}`` entry of a file source's log, oldest first.

    The newest ``.compact`` file holds all entries up to its number; later plain files add
    one batch each.
    """
    fs = filesystem(checkpoint)
    folder = f"{checkpoint}/sources/{source}"
    compacts = numbered(fs, folder, ".compact")
    plain = numbered(fs, folder)
    newest_compact = max(compacts) if compacts else -1
    files = ([compacts[newest_compact]] if compacts else []) + [
        plain[number] for number in sorted(plain) if number > newest_compact
    ]
    entries = []
    for path in files:
        _version, lines = read_log_file(fs, path)
        entries.extend(json.loads(line) for line in lines if line.strip())
    return entries


def listed_path(uri: str) -> str:
    """A source-log path as :func:`spark_jobs.logs.fs.filesystem` lists it: ``file:///a%20b/x``
    as ``/a b/x``, ``s3a://bucket/a%20b`` as ``bucket/a b`` (Spark records URIs, escaped; fsspec
    lists plain paths, and s3fs's have no scheme)."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return unquote(parsed.path)
    if parsed.scheme in ("s3", "s3a"):
        return unquote(parsed.netloc + parsed.path)
    return uri


def landing_files(lake: Lake, hop: HopSpec) -> list[str]:
    """The files of the ingest ``hop``'s landing folder Spark would read: everything but names
    starting with ``.`` or ``_``."""
    folder = lake.landing_of(hop)
    fs = filesystem(folder)
    found = []
    for path in listing(fs, folder):
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if not name.startswith((".", "_")) and fs.isfile(path):
            found.append(listed_path(path))
    return sorted(found)


def missing_landing(
    lake: Lake, hop: HopSpec, after_batch: int, present: set[str] | None = None
) -> list[tuple[int, str]]:
    """``(batch, file)`` of each landing file the ingest ``hop``'s batches after ``after_batch``
    read that is no longer in its landing folder (``present``, if listed already): a replay of
    those batches would not find it."""
    if not hop.reads_landing:
        return []
    present = set(landing_files(lake, hop)) if present is None else present
    entries = file_source_entries(lake.checkpoint(hop))
    return sorted(
        {
            (int(entry["batchId"]), path)
            for entry in entries
            if int(entry["batchId"]) > after_batch
            and (path := listed_path(entry["path"])) not in present
        }
    )
