"""Read a Structured Streaming checkpoint as plain files (CHECKPOINTS.md): no JVM.

``metadata`` holds the query id, ``offsets/N`` what batch N reads, ``commits/N`` that it
finished, ``sources/<i>/`` the file source's log of files per batch (compacted into
``N.compact`` files). Every file starts with a version line such as ``v1``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from urllib.parse import unquote, urlparse

from spark_jobs.lake import filesystem


@dataclass(frozen=True)
class BatchOffsets:
    """One ``offsets/N`` file: the batch's watermark, time and per-source offsets."""

    batch_id: int
    watermark_ms: int
    timestamp_ms: int
    sources: list[dict | None] = field(default_factory=list)


def _read_log_file(fs, path: str) -> tuple[str, list[str]]:
    with fs.open(path, "r") as handle:
        lines = handle.read().splitlines()
    if not lines:
        raise ValueError(f"{path} is empty")
    return lines[0], lines[1:]


def _numbered(fs, folder: str, suffix: str = "") -> dict[int, str]:
    """``{number: path}`` for the log files of a folder, skipping ``.crc`` and temp files."""
    if not fs.exists(folder):
        return {}
    found = {}
    for path in fs.ls(folder, detail=False):
        name = path.rstrip("/").rsplit("/", 1)[-1]
        stem = name[: -len(suffix)] if suffix and name.endswith(suffix) else name
        if stem.isdigit() and (not suffix or name.endswith(suffix)):
            found[int(stem)] = path
    return found


def query_id(checkpoint: str) -> str | None:
    """The query id in ``metadata``, or None before the first run."""
    fs = filesystem(checkpoint)
    path = f"{checkpoint}/metadata"
    if not fs.exists(path):
        return None
    with fs.open(path, "r") as handle:
        return json.loads(handle.readline())["id"]


def ensure_query_id(checkpoint: str) -> str:
    """The checkpoint's query id, writing ``metadata`` with a new one before the first run.

    Writing it ourselves lets writers use the id as their idempotence key from batch 0 on;
    Spark reads and keeps an existing ``metadata`` file (CHECKPOINTS.md).
    """
    existing = query_id(checkpoint)
    if existing:
        return existing
    fs = filesystem(checkpoint)
    fs.makedirs(checkpoint, exist_ok=True)
    new_id = str(uuid.uuid4())
    with fs.open(f"{checkpoint}/metadata", "w") as handle:
        handle.write(json.dumps({"id": new_id}) + "\n")
    return new_id


def offset_batch_ids(checkpoint: str) -> list[int]:
    return sorted(_numbered(filesystem(checkpoint), f"{checkpoint}/offsets"))


def commit_batch_ids(checkpoint: str) -> list[int]:
    return sorted(_numbered(filesystem(checkpoint), f"{checkpoint}/commits"))


def read_offsets(checkpoint: str, batch_id: int) -> BatchOffsets:
    """Parse ``offsets/<batch_id>`` (formats v1 and v2, see CHECKPOINTS.md)."""
    fs = filesystem(checkpoint)
    _version, lines = _read_log_file(fs, f"{checkpoint}/offsets/{batch_id}")
    header = json.loads(lines[0])
    sources: list[dict | None] = []
    for line in lines[1:]:
        text = line.split(":", 1)[1] if line[:1] not in "{-" and ":" in line else line
        sources.append(None if text.strip() == "-" else json.loads(text))
    return BatchOffsets(
        batch_id=batch_id,
        watermark_ms=int(header.get("batchWatermarkMs", 0)),
        timestamp_ms=int(header.get("batchTimestampMs", 0)),
        sources=sources,
    )


def file_source_entries(checkpoint: str, source: int = 0) -> list[dict]:
    """Every ``{path, timestamp, batchId}`` entry of a file source's log, oldest first.

    The newest ``.compact`` file holds all entries up to its number; later plain files add
    one batch each.
    """
    fs = filesystem(checkpoint)
    folder = f"{checkpoint}/sources/{source}"
    compacts = _numbered(fs, folder, ".compact")
    plain = _numbered(fs, folder)
    newest_compact = max(compacts) if compacts else -1
    files = ([compacts[newest_compact]] if compacts else []) + [
        plain[number] for number in sorted(plain) if number > newest_compact
    ]
    entries = []
    for path in files:
        _version, lines = _read_log_file(fs, path)
        entries.extend(json.loads(line) for line in lines if line.strip())
    return entries


def local_path(uri: str) -> str:
    """A source-log path (``file:///a%20b/x``) as the plain path the filesystem lists."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return unquote(parsed.path)
    return uri
