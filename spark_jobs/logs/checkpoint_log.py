"""Read and rewrite a Structured Streaming checkpoint as plain files
(docs/concepts/checkpoints.md): no JVM.

``metadata`` holds the query id, ``offsets/N`` what batch N reads, ``commits/N`` that it finished,
``sources/<i>/`` the file source's log of files per batch (:mod:`spark_jobs.logs.file_source_log`),
``state/<op>/<partition>/`` the state store's versions (:mod:`spark_jobs.logs.state_store`). Every
log file starts with a version line such as ``v1``; on a local or Hadoop filesystem each file has a
hidden ``.<name>.crc`` sibling, which must go whenever the file is rewritten or removed. Paths are
local paths or URIs (fsspec).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field

from spark_jobs.logs.fs import filesystem, listing, remove_tree, write_text
from spark_jobs.model.errors import DamagedLog


@dataclass(frozen=True)
class BatchOffsets:
    """One ``offsets/N`` file: the batch's watermark, time and per-source offsets."""

    batch_id: int
    watermark_ms: int
    timestamp_ms: int
    sources: list[dict | None] = field(default_factory=list)


def read_log_file(fs, path: str) -> tuple[str, list[str]]:
    with fs.open(path, "r") as handle:
        lines = handle.read().splitlines()
    if not lines:
        raise DamagedLog(path, "empty file")
    return lines[0], lines[1:]


def parse_log_file(fs, path: str, max_version: int = 2) -> tuple[int, list[dict | str]]:
    """A log file's version and parsed lines, or :class:`DamagedLog` saying what Spark would say.

    JSON lines are parsed; a line that is not JSON (e.g. ``0:{...}`` of offset log v2, or
    ``-`` for a source without offset) is kept as text when it is otherwise well formed.
    """
    try:
        with fs.open(path, "rb") as handle:
            raw = handle.read()
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DamagedLog(path, "not UTF-8 text (garbage)") from None
    lines = text.splitlines()
    if not lines:
        raise DamagedLog(path, "empty file (Spark: Incomplete log file)")
    match = re.fullmatch(r"v(\d+)", lines[0])
    if not match:
        raise DamagedLog(path, "no version line (Spark: MALFORMED_LOG_FILE)")
    version = int(match.group(1))
    if not 1 <= version <= max_version:
        raise DamagedLog(path, f"unknown log version v{version} (Spark: INVALID_LOG_VERSION)")
    body = lines[1:]
    if not body:
        raise DamagedLog(path, "version line only (Spark: next on empty iterator)")
    parsed: list[dict | str] = []
    for line in body:
        candidate = line.split(":", 1)[1] if line[:1] not in "{-" and ":" in line else line
        if candidate.strip() == "-":
            parsed.append(line)
            continue
        try:
            parsed.append(json.loads(candidate))
        except ValueError:
            truncated = not text.endswith("\n") and line is body[-1]
            raise DamagedLog(
                path,
                "truncated JSON (Spark: Unexpected end-of-input)"
                if truncated
                else "a line is not JSON (Spark: MALFORMED_LOG_FILE)",
            ) from None
    return version, parsed


def crc_path(path: str) -> str:
    """The hidden checksum sibling Hadoop's local filesystem keeps for ``path``."""
    folder, name = path.rsplit("/", 1)
    return f"{folder}/.{name}.crc"


def remove(fs, path: str) -> None:
    """Delete a checkpoint file and its ``.crc`` sibling (a stale ``.crc`` misleads Spark)."""
    for target in (path, crc_path(path)):
        if fs.exists(target):
            fs.rm(target)


def _write_atomically(fs, path: str, text: str) -> None:
    """Write a checkpoint file atomically and drop its stale ``.crc`` (a stale one
    misleads Spark).
    """
    if fs.exists(crc_path(path)):
        fs.rm(crc_path(path))
    write_text(path, text)


def write_log_file(fs, path: str, version_line: str, lines: list[str]) -> None:
    """Write a log file: its version line, then one line per entry."""
    _write_atomically(fs, path, "\n".join([version_line, *lines]))


def numbered(fs, folder: str, suffix: str = "") -> dict[int, str]:
    """``{number: path}`` for the log files of a folder, skipping ``.crc`` and temp files."""
    found = {}
    for path in listing(fs, folder):
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
    Spark reads and keeps an existing ``metadata`` file (docs/concepts/checkpoints.md).
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


def set_query_id(checkpoint: str, new_id: str) -> None:
    """Give the checkpoint a new query id: Spark restarts under it and keeps state
    (docs/concepts/checkpoints.md).

    Writers key their Delta transactions on the id, so batches replayed after a rollback are
    not taken for ones the table has already seen.
    """
    _write_atomically(
        filesystem(checkpoint), f"{checkpoint}/metadata", json.dumps({"id": new_id}) + "\n"
    )


def restart_at(checkpoint: str, batch_id: int, new_id: str) -> None:
    """Replace the checkpoint by a new query's (id ``new_id``) whose only entry is ``offsets/0``
    = ``offsets/<batch_id>`` (its header: watermark, timestamp, confs such as the state's
    partitions; its source offsets), not committed. Its first start runs batch 0 over everything
    its Delta sources hold up to those offsets (with no start offset, Delta's source reads the
    table's snapshot as of the end offset, then nothing more), under that batch's watermark: the
    state the query would hold there.

    Staged beside the checkpoint first (its ``metadata`` written last marks it whole), then
    swapped in by :func:`finish_restart`, which the next start of the hop calls again after a crash.
    """
    fs = filesystem(checkpoint)
    version, lines = read_log_file(fs, f"{checkpoint}/offsets/{batch_id}")
    staged = f"{checkpoint}.restarted"
    remove_tree(fs, staged)
    fs.makedirs(f"{staged}/offsets", exist_ok=True)
    write_log_file(fs, f"{staged}/offsets/0", version, lines)
    set_query_id(staged, new_id)
    finish_restart(checkpoint)


def finish_restart(checkpoint: str) -> None:
    """Swap in a whole staged restart of :func:`restart_at` (a partial one is removed)."""
    fs = filesystem(checkpoint)
    staged = f"{checkpoint}.restarted"
    if not fs.exists(staged):
        return
    if not fs.exists(f"{staged}/metadata"):
        remove_tree(fs, staged)
        return
    version, lines = read_log_file(fs, f"{staged}/offsets/0")
    remove_tree(fs, checkpoint)
    fs.makedirs(f"{checkpoint}/offsets", exist_ok=True)
    write_log_file(fs, f"{checkpoint}/offsets/0", version, lines)
    set_query_id(checkpoint, query_id(staged))
    remove_tree(fs, staged)


def log_files(checkpoint: str, log: str) -> dict[int, str]:
    """``{batch id: path}`` of ``offsets/`` or ``commits/``."""
    return numbered(filesystem(checkpoint), f"{checkpoint}/{log}")


def offset_batch_ids(checkpoint: str) -> list[int]:
    return sorted(log_files(checkpoint, "offsets"))


def commit_batch_ids(checkpoint: str) -> list[int]:
    return sorted(log_files(checkpoint, "commits"))


def planned_batch(checkpoint: str) -> int | None:
    """The batch the checkpoint planned (``offsets/N``) but never committed, if any: the next
    start runs it again with the same offsets."""
    offsets, commits = offset_batch_ids(checkpoint), commit_batch_ids(checkpoint)
    return offsets[-1] if offsets and (not commits or offsets[-1] > commits[-1]) else None


def read_offsets(checkpoint: str, batch_id: int) -> BatchOffsets:
    """Parse ``offsets/<batch_id>`` (formats v1 and v2, see docs/concepts/checkpoints.md)."""
    fs = filesystem(checkpoint)
    _version, lines = read_log_file(fs, f"{checkpoint}/offsets/{batch_id}")
    header = json.loads(lines[0])
    return BatchOffsets(
        batch_id=batch_id,
        watermark_ms=int(header.get("batchWatermarkMs", 0)),
        timestamp_ms=int(header.get("batchTimestampMs", 0)),
        sources=offsets_sources(lines[1:]),
    )


def file_log_offset(checkpoint: str, batch_id: int) -> int:
    """The file source log batch that ``offsets/<batch_id>`` of a landing-file hop reads up to."""
    return int(read_offsets(checkpoint, batch_id).sources[0]["logOffset"])


def text_sources(text: str) -> list[dict | None]:
    """The source offsets of an offsets file's whole text (after its version line and header)."""
    return offsets_sources(text.splitlines()[2:])


def offsets_sources(lines: list[str]) -> list[dict | None]:
    """The source offsets of an offsets file's lines after its header: one per source, JSON or
    ``-`` (none yet), with v2's ``index:`` prefix."""
    sources: list[dict | None] = []
    for line in lines:
        text = line.split(":", 1)[1] if line[:1] not in "{-" and ":" in line else line
        sources.append(None if text.strip() == "-" else json.loads(text))
    return sources


def read_commit_watermark(checkpoint: str, batch_id: int) -> int | None:
    """``nextBatchWatermarkMs`` of ``commits/<batch_id>``."""
    fs = filesystem(checkpoint)
    _version, lines = parse_log_file(fs, f"{checkpoint}/commits/{batch_id}")
    first = lines[0] if lines and isinstance(lines[0], dict) else {}
    return first.get("nextBatchWatermarkMs")


def batch_file(checkpoint: str, log: str, batch_id: int) -> str:
    return f"{checkpoint}/{log}/{batch_id}"


def write_offsets(checkpoint: str, offsets: BatchOffsets, original: int | None = None) -> None:
    """Rewrite ``offsets/N`` with new source offsets, keeping its header line (watermark, confs).

    ``original`` is the batch whose file supplies the header (default: the same batch).
    """
    fs = filesystem(checkpoint)
    version, lines = read_log_file(
        fs, f"{checkpoint}/offsets/{original if original is not None else offsets.batch_id}"
    )
    header = lines[0]
    prefixed = version == "v2"
    sources = []
    for index, source in enumerate(offsets.sources):
        text = "-" if source is None else json.dumps(source, separators=(",", ":"))
        sources.append(f"{index}:{text}" if prefixed else text)
    write_log_file(fs, f"{checkpoint}/offsets/{offsets.batch_id}", version, [header, *sources])


def drop_batches_after(checkpoint: str, batch_id: int) -> list[str]:
    """Remove ``commits/`` then ``offsets/`` entries past ``batch_id``, newest first; return them.

    Commits go first so that a crash in between leaves offsets ahead of commits (a batch to
    redo), never commits ahead of offsets. For -1 (a query that starts over) both folders go
    whole, with what interrupted writes left in them (:func:`drop_leftovers`).
    """
    fs = filesystem(checkpoint)
    removed = []
    for log in ("commits", "offsets"):
        for number, path in sorted(log_files(checkpoint, log).items(), reverse=True):
            if number > batch_id:
                remove(fs, path)
                removed.append(f"{log}/{number}")
    if batch_id < 0:
        for log in ("commits", "offsets"):
            remove_tree(fs, f"{checkpoint}/{log}")
    return removed


def drop_source_logs(checkpoint: str) -> None:
    """Remove ``sources/``: what each source logged for itself (a file source's files, a Kafka
    source's starting offsets), so a query that starts over starts from its own options."""
    fs = filesystem(checkpoint)
    remove_tree(fs, f"{checkpoint}/sources")


def drop_leftovers(checkpoint: str) -> list[str]:
    """Remove from ``offsets/`` and ``commits/`` every file that is neither a batch's log file
    nor the ``.crc`` of one: what a write killed half-way leaves (Spark's ``.<n>.<uuid>.tmp``
    and its ``.crc``, this package's ``.<n>.lakehouse-tmp``, a checksum whose file is gone).
    Spark skips them when it reads the logs, but a query with no batch yet refuses to start
    while they are there (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY: "should be empty on batch
    0"). Returns them, as ``<log>/<name>``."""
    fs = filesystem(checkpoint)
    removed = []
    for log in ("offsets", "commits"):
        paths = listing(fs, f"{checkpoint}/{log}")
        batches = [path for path in paths if path.rsplit("/", 1)[-1].isdigit()]
        kept = {*batches, *map(crc_path, batches)}
        for path in paths:
            if path not in kept and fs.isfile(path):
                fs.rm(path)
                removed.append(f"{log}/{path.rsplit('/', 1)[-1]}")
    return removed


# Delta source offsets: ``{"reservoirVersion": V, "index": I, "isStartingVersion": S}``.
# I = -1 (and Delta's other negative markers): nothing of version V read yet; I >= 0: V read
# up to file I; an index this large is Delta's "all of V" marker.
_END_INDEX = 2**62


def delta_position(source: dict | None) -> tuple[int, bool]:
    """How far a Delta source offset has read its table: ``(version, complete)``.

    ``(v, True)``: every version up to and including v was read, nothing after. ``(v, False)``:
    part of the data up to version v was read (a partly read version, or part of the initial
    snapshot of v). ``(-1, True)``: nothing read.
    """
    if not source:
        return -1, True
    version = int(source["reservoirVersion"])
    index = int(source.get("index", -1))
    if source.get("isStartingVersion"):
        return (version, False) if index >= 0 else (-1, True)
    if index >= _END_INDEX:
        return version, True
    if index < 0:
        return version - 1, True
    return version, False


def version_read(checkpoint: str, batch_id: int) -> int:
    """The version of its one Delta upstream that batch ``batch_id`` of a query read up to (a
    version read in part counts whole): the table as of it holds everything the batch read."""
    version, _complete = delta_position(read_offsets(checkpoint, batch_id).sources[0])
    return version


def saw_whole_table(checkpoint: str, batch_id: int) -> bool:
    """Whether batch ``batch_id`` of a query over one Delta table is the query's first, read all
    of the table as of one version (no start; its end that version, complete) and ran under no
    watermark, so a stateful operator dropped no row as late (a state rebuild's batch 0 carries
    the watermark of the batch it restarts at: :func:`restart_at`)."""
    if batch_id != 0:
        return False
    offsets = read_offsets(checkpoint, batch_id)
    return offsets.watermark_ms == 0 and delta_position(offsets.sources[0])[1]


def delta_offset_after(source: dict, version: int) -> dict:
    """The offset that starts reading ``source``'s table after ``version``."""
    return {**source, "reservoirVersion": version + 1, "index": -1, "isStartingVersion": False}
