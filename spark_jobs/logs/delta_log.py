"""Read a Delta table's ``_delta_log`` as plain JSON files: versions, commits, metrics.

No JVM: ``status``, the run records and Airflow's light tasks use this.
"""

from __future__ import annotations

import functools
import json
import re
from urllib.parse import unquote

from spark_jobs.logs.fs import filesystem, listing

_COMMIT_FILE = re.compile(r"^(\d{20})\.json$")


def _log_dir(table: str) -> str:
    return f"{table.rstrip('/')}/_delta_log"


def versions(table: str) -> list[int]:
    """Every commit version whose JSON file is still in the log, ascending ([] if no table)."""
    fs = filesystem(table)
    found = []
    for entry in listing(fs, _log_dir(table)):
        match = _COMMIT_FILE.match(entry.rstrip("/").rsplit("/", 1)[-1])
        if match:
            found.append(int(match.group(1)))
    return sorted(found)


def table_version(table: str) -> int | None:
    """The table's latest version, or None when there is no table yet."""
    found = versions(table)
    return found[-1] if found else None


def file_path(table: str, path: str) -> str | None:
    """Where a file a commit names (relative to the table, URL-escaped) lies; None for one named
    by an absolute URI (outside the table's folder: never checked nor deleted)."""
    return None if "://" in path else f"{table}/{unquote(path)}"


def read_commit(table: str, version: int) -> tuple[dict, ...]:
    """The actions of one commit, in order. A commit never changes once written, so each is read
    once per process, but a table deleted and written again at the same path has new commits of
    the same versions: the file's size and modification time are part of the cache's key."""
    path = f"{_log_dir(table)}/{version:020d}.json"
    info = filesystem(table).info(path)
    return _read_commit(
        table, path, info.get("size"), str(info.get("mtime", info.get("LastModified")))
    )


@functools.lru_cache(maxsize=4096)
def _read_commit(table: str, path: str, _size: int | None, _modified: str) -> tuple[dict, ...]:
    with filesystem(table).open(path, "r") as handle:
        return tuple(json.loads(line) for line in handle if line.strip())


def commit_info(table: str, version: int) -> dict:
    """The ``commitInfo`` action of one commit (operation, parameters, metrics)."""
    for action in read_commit(table, version):
        if "commitInfo" in action:
            return action["commitInfo"]
    return {}


def transaction(table: str, version: int) -> dict | None:
    """The ``txn`` action (appId, version) of a commit, if the writer set one."""
    for action in read_commit(table, version):
        if "txn" in action:
            return action["txn"]
    return None


def data_files(table: str, version: int, ignore: tuple[str, ...] = ()) -> list[tuple]:
    """What a Delta stream reads of one commit, file by file in the order it indexes them (the
    ``add`` actions that change data): each file's partition values, row count and per-column
    statistics but those of ``ignore`` (columns that differ between two writes of the same rows,
    such as an ingest time). Two commits with equal lists hold the same rows at the same indexes."""
    found = []
    for action in read_commit(table, version):
        add = action.get("add")
        if not add or not add.get("dataChange", True):
            continue
        stats = json.loads(add.get("stats") or "{}")
        columns = {
            kind: {
                name: value for name, value in (stats.get(kind) or {}).items() if name not in ignore
            }
            for kind in ("minValues", "maxValues", "nullCount")
        }
        found.append(
            (
                json.dumps(add.get("partitionValues") or {}, sort_keys=True),
                stats.get("numRecords"),
                json.dumps(columns, sort_keys=True),
            )
        )
    return found


def rows_written(table: str, after: int | None, upto: int | None) -> int:
    """Rows added by the commits in ``(after, upto]``, from their operation metrics.

    Appends count ``numOutputRows``; MERGE counts inserted plus updated target rows.
    """
    if upto is None:
        return 0
    start = -1 if after is None else after
    total = 0
    for version in range(start + 1, upto + 1):
        metrics = commit_info(table, version).get("operationMetrics", {})
        if "numTargetRowsInserted" in metrics:
            total += int(metrics.get("numTargetRowsInserted", 0)) + int(
                metrics.get("numTargetRowsUpdated", 0)
            )
        else:
            total += int(metrics.get("numOutputRows", 0))
    return total


def rows_deleted(table: str, after: int | None, upto: int | None) -> int:
    """Rows the commits in ``(after, upto]`` deleted, from their operation metrics (a MERGE's
    ``numTargetRowsDeleted``, a DELETE's ``numDeletedRows``)."""
    if upto is None:
        return 0
    total = 0
    for version in range(0 if after is None else after + 1, upto + 1):
        metrics = commit_info(table, version).get("operationMetrics", {})
        total += int(metrics.get("numTargetRowsDeleted", 0)) + int(metrics.get("numDeletedRows", 0))
    return total


def rows_with_value(table: str, column: str, after: int | None, upto: int | None) -> int | None:
    """Rows with ``column`` not null among the files the commits in ``(after, upto]`` added, from
    the files' statistics (numRecords minus the column's nullCount); None when a file has no
    statistics. A file whose statistics do not name the column (written before the table had
    it, or the column is past the first 32 that Delta indexes) counts none."""
    if upto is None:
        return 0
    total = 0
    for version in range(0 if after is None else after + 1, upto + 1):
        for action in read_commit(table, version):
            add = action.get("add")
            if not add or not add.get("dataChange", True):
                continue
            if not add.get("stats"):
                return None
            stats = json.loads(add["stats"])
            nulls = stats.get("nullCount", {})
            if column in nulls:
                total += int(stats["numRecords"]) - int(nulls[column])
    return total


# What a commit that only appends holds; the first commit also sets the table's metadata.
_APPEND_ACTIONS = frozenset({"commitInfo", "add", "txn"})
_FIRST_ACTIONS = _APPEND_ACTIONS | {"metaData", "protocol"}


def appended_files(table: str, most_commits: int = 200) -> int | None:
    """How many files the commits of ``table`` added when it was only ever appended to, else
    None. Only appended to: its JSON log still starts at version 0 and holds at most
    ``most_commits`` commits, and none after the first removed a file or changed the table's
    metadata or protocol. Then its files are exactly those its commits added, in order."""
    found = versions(table)
    if not found or found[0] != 0 or len(found) > most_commits or found[-1] != len(found) - 1:
        return None
    added = 0
    for version in found:
        allowed = _FIRST_ACTIONS if version == 0 else _APPEND_ACTIONS
        for action in read_commit(table, version):
            if not set(action) <= allowed or not action.get("add", {}).get("dataChange", True):
                return None
            added += "add" in action
    return added


def table_id(table: str) -> str | None:
    """The table's id (its ``metaData`` action's), which a Delta stream source's offsets name as
    ``reservoirId``; None when no JSON commit left has a ``metaData`` action."""
    for version in versions(table):
        for action in read_commit(table, version):
            if "metaData" in action:
                return action["metaData"].get("id")
    return None


def table_properties(table: str) -> dict[str, str] | None:
    """The table's properties (its latest ``metaData`` action's ``configuration``); None when no
    JSON commit left has a ``metaData`` action (a checkpoint holds it)."""
    for version in reversed(versions(table)):
        for action in read_commit(table, version):
            if "metaData" in action:
                return dict(action["metaData"].get("configuration") or {})
    return None


def unused_files(table: str, keep_from: int) -> list[str]:
    """The files (paths relative to the table, as the log spells them) that no version from
    ``keep_from`` on uses, as far as the JSON commits still in the log tell: data files whose last
    action is a ``remove`` in a commit at or before ``keep_from`` (a RESTORE that adds one back is
    a later action), and the change-data files of those commits. A file the log no longer
    mentions, or names by an absolute path, is never listed."""
    last: dict[tuple[str, str | None], tuple[str, int]] = {}
    changes = []
    for version in versions(table):
        for action in read_commit(table, version):
            for kind in ("add", "remove"):
                if kind in action:
                    last[_logical(action[kind])] = (kind, version)
            if "cdc" in action and version <= keep_from:
                changes.append(action["cdc"]["path"])
    used = {
        path
        for (path, _vector), (kind, version) in last.items()
        if kind == "add" or version > keep_from
    }
    removed = list(
        dict.fromkeys(path for (path, _vector), _last in last.items() if path not in used)
    )
    return [path for path in removed + changes if file_path(table, path)]


def _logical(action: dict) -> tuple[str, str | None]:
    """The file an ``add`` or ``remove`` names: its path and its deletion vector. With deletion
    vectors one commit removes a file and adds it back (other rows deleted), in either order, so
    a path alone does not tell whether the file stays."""
    vector = action.get("deletionVector")
    if not vector:
        return action["path"], None
    return action[
        "path"
    ], f"{vector.get('storageType')}:{vector.get('pathOrInlineDv')}@{vector.get('offset')}"


# A file of the log named by a version: a commit, its checksum, a checkpoint (one part or several).
_VERSIONED = re.compile(
    r"^\.?(\d{20})\.(json|crc|checkpoint\.parquet|checkpoint\.\d{10}\.(\d{10})\.parquet)(\.crc)?$"
)
_COMPACTED = re.compile(r"^\.?\d{20}\.(\d{20})\.compacted\.json(\.crc)?$")


def _checkpoints(names: list[str]) -> list[int]:
    """The versions with a complete classic checkpoint among the log's file ``names``."""
    parts: dict[int, set[str]] = {}
    for name in names:
        match = _VERSIONED.match(name)
        if (
            match
            and not name.startswith(".")
            and not name.endswith(".crc")
            and match.group(2).startswith("checkpoint")
        ):
            parts.setdefault(int(match.group(1)), set()).add(name)
    complete = []
    for version, found in parts.items():
        wanted = {f"{version:020d}.checkpoint.parquet"}
        multi = [
            _VERSIONED.match(name).group(3) for name in found if _VERSIONED.match(name).group(3)
        ]
        if multi:
            total = int(multi[0])
            wanted = {
                f"{version:020d}.checkpoint.{part:010d}.{total:010d}.parquet"
                for part in range(1, total + 1)
            }
        if wanted <= found:
            complete.append(version)
    return sorted(complete)


def log_files_before(table: str, keep_from: int) -> tuple[int | None, list[str]]:
    """The newest complete checkpoint at or before ``keep_from`` and the log's files older than it
    (commits, checksums, older checkpoints, compacted commits): a snapshot of any version from the
    checkpoint on needs none of them. ``(None, [])`` when there is no such checkpoint, or the
    table's log uses sidecar files (V2 checkpoints), which this does not read."""
    fs = filesystem(table)
    folder = _log_dir(table)
    paths = listing(fs, folder)
    names = [path.rstrip("/").rsplit("/", 1)[-1] for path in paths]
    if "_sidecars" in names or "_commits" in names:
        return None, []
    usable = [version for version in _checkpoints(names) if version <= keep_from]
    if not usable:
        return None, []
    base = usable[-1]
    old = []
    for path, name in zip(paths, names, strict=True):
        versioned, compacted = _VERSIONED.match(name), _COMPACTED.match(name)
        if (
            versioned
            and int(versioned.group(1)) < base
            or compacted
            and int(compacted.group(1)) < base
        ):
            old.append(path)
    return base, old


def _checkpoint_actions(
    table: str, version: int, kinds=("add", "remove")
) -> list[tuple[str, dict]] | None:
    """The actions of ``kinds`` the checkpoint of ``version`` holds (one part or several;
    None: unreadable).
    """
    import pyarrow.parquet as pq

    fs = filesystem(table)
    folder = _log_dir(table)
    names = [path.rstrip("/").rsplit("/", 1)[-1] for path in listing(fs, folder)]
    parts = [
        name
        for name in names
        if not name.startswith(".")
        and not name.endswith(".crc")
        and name.startswith(f"{version:020d}.checkpoint.")
        and name.endswith(".parquet")
    ]
    found = []
    for name in parts:
        try:
            with fs.open(f"{folder}/{name}", "rb") as handle:
                rows = pq.read_table(handle, columns=list(kinds)).to_pylist()
        # not a checkpoint this reads (pyarrow's errors are both)
        except (OSError, ValueError, KeyError):
            return None
        found.extend((kind, row[kind]) for row in rows for kind in kinds if row.get(kind))
    return found


def _log_start(table: str, present: list[int]) -> list[tuple[str, dict]] | None:
    """The actions before the log's first JSON commit: none when it is version 0, else its
    checkpoint's (None: the log starts elsewhere, or uses sidecars, which this does not read)."""
    if present[0] == 0:
        return []
    names = [
        path.rstrip("/").rsplit("/", 1)[-1] for path in listing(filesystem(table), _log_dir(table))
    ]
    if "_sidecars" in names or present[0] not in _checkpoints(names):
        return None
    return _checkpoint_actions(table, present[0])


def live_files(table: str) -> dict[str, dict] | None:
    """The table's current data files (paths as the log spells them), each with its ``add``
    action (``partitionValues`` as a mapping, ``size``), from its log; None when its log cannot be
    read this way (no table, V2 checkpoints)."""
    present = versions(table)
    start = _log_start(table, present) if present else None
    if start is None:
        return None
    live: dict[tuple[str, str | None], dict] = {}
    # The checkpoint holds its own version's commit already: applying that commit again
    # changes nothing.
    actions = [
        *start,
        *(
            (kind, action[kind])
            for version in present
            for action in read_commit(table, version)
            for kind in ("add", "remove")
            if kind in action
        ),
    ]
    for kind, action in actions:
        if kind == "add":
            values = action.get("partitionValues") or {}  # a checkpoint's map column reads as pairs
            live[_logical(action)] = action | {
                "partitionValues": dict(values)
                if isinstance(values, dict)
                else dict(map(tuple, values))
            }
        else:
            live.pop(_logical(action), None)
    return {path: action for (path, _vector), action in live.items()}


def live_rows(table: str) -> int | None:
    """The table's rows from its log alone: each live file's record count (its statistics) less
    the rows its deletion vector marks deleted. None when the log cannot be read this way or a
    live file has no record count (statistics not collected)."""
    live = live_files(table)
    if live is None:
        return None
    total = 0
    for action in live.values():
        count = json.loads(action.get("stats") or "{}").get("numRecords")
        if count is None:
            return None
        total += int(count) - int((action.get("deletionVector") or {}).get("cardinality") or 0)
    return total


def _modified_ms(info: dict) -> int | None:
    stamp = info.get("mtime", info.get("LastModified"))
    if stamp is None:
        return None
    return int((stamp.timestamp() if hasattr(stamp, "timestamp") else float(stamp)) * 1000)


def _named_files(table: str) -> set[str] | None:
    """Every file path an action of the table's log names: its JSON commits and, when its first
    commits are gone, the checkpoint it starts from (None: no log, or one this cannot read)."""
    present = versions(table)
    start = _log_start(table, present) if present else None
    if start is None:
        return None
    named = {action["path"] for _kind, action in start}
    for version in present:
        for action in read_commit(table, version):
            named.update(
                action[kind]["path"] for kind in ("add", "remove", "cdc") if kind in action
            )
    return named


def unnamed_files(table: str, older_than_ms: int) -> list[str]:
    """Data files in the table's folder (its partition folders and ``_change_data``) that no
    action of its log names, last modified before ``older_than_ms``: what a write left that no
    commit took (an append of no rows writes a file and adds none; a killed job's tasks leave
    theirs). The log read is every JSON commit still there and, when its first commits are gone,
    the checkpoint it starts from. Empty when that checkpoint cannot be read (V2 checkpoints)."""
    named = _named_files(table)
    if named is None:
        return []
    wanted = {file_path(table, path) for path in named} - {None}
    fs = filesystem(table)
    root = table.rstrip("/")
    found = []
    for path, info in fs.find(root, detail=True).items():
        relative = (
            path[len(root.split("://")[-1]) :].lstrip("/")
            if "://" in root
            else path[len(root) :].lstrip("/")
        )
        top, name = relative.split("/", 1)[0], relative.rsplit("/", 1)[-1]
        if (
            top == "_delta_log"
            or name.startswith((".", "_"))
            or (top.startswith((".", "_")) and top != "_change_data")
        ):
            continue
        modified = _modified_ms(info)
        if f"{root}/{relative}" not in wanted and modified is not None and modified < older_than_ms:
            found.append(f"{root}/{relative}")
    return sorted(found)


# Beside a table's _delta_log: what ``lakehouse maintain`` recorded of the commits it deleted
# from the log (``_`` hides it from readers).
CLEANED = "_lakehouse_cleaned_log.json"


def cleaned_record(table: str) -> dict | None:
    """What the last log clean-up recorded of the commits it deleted: ``first_kept`` (the log's
    first version after it), ``backfill_writes`` and ``hidden_batches`` (per stream, the last batch
    whose commit, still in effect, went); None when maintain never cleaned this log."""
    from spark_jobs.logs.fs import read_json

    return read_json(f"{table.rstrip('/')}/{CLEANED}")


def hidden_transactions(table: str) -> dict[str, int]:
    """When the log's first commits are gone: per stream (``appId``), the last batch whose commit
    went with them. From what the clean-up recorded when it was maintain's; else (Delta's own
    clean-up) the last batch each stream committed as of the checkpoint the log starts from, which
    may name batches a RESTORE undid since. {} when the log starts at version 0."""
    present = versions(table)
    if not present or present[0] == 0:
        return {}
    record = cleaned_record(table) or {}
    if record.get("first_kept") == present[0] and "hidden_batches" in record:
        return {app: int(batch) for app, batch in record["hidden_batches"].items()}
    if _log_start(table, present) is None:
        return {}
    return {
        action["appId"]: int(action["version"])
        for _kind, action in _checkpoint_actions(table, present[0], ("txn",)) or []
    }
