"""A checkpoint's state stores as plain files: ``state/<operator>/<partition>/``, one version
per batch (batch N writes version N+1), as deltas and snapshots (HDFS-backed store) or
changelogs and zips (RocksDB). Which versions a partition can load, dropping those past a
rollback's target, and which files no version from a given one on reads (``lakehouse maintain``;
docs/concepts/checkpoints.md)."""

from __future__ import annotations

import re

from spark_jobs.logs.checkpoint_log import remove
from spark_jobs.logs.fs import filesystem, listing, remove_tree

_STATE_FILE = re.compile(r"^(\d+)(?:_[0-9a-fA-F-]+)?\.(delta|snapshot|zip|changelog)$")


def state_files(checkpoint: str) -> dict[str, dict[int, list[tuple[str, str]]]]:
    """``{store dir: {version: [(path, kind)]}}`` for every state store of every partition: the
    partition's folder, or for an operator with several stores (a stream-stream join's four)
    each store's folder in it (``state/0/3/left-keyToNumValues``).

    Kinds: ``delta``/``snapshot`` (HDFS-backed store), ``changelog``/``zip`` (RocksDB, with a
    ``_<uuid>`` suffix in checkpoint format v2).
    """
    fs = filesystem(checkpoint)
    root = f"{checkpoint}/state"
    found: dict[str, dict[int, list[tuple[str, str]]]] = {}
    for operator in listing(fs, root):
        if not operator.rstrip("/").rsplit("/", 1)[-1].isdigit():
            continue
        for partition in listing(fs, operator):
            if partition.rstrip("/").rsplit("/", 1)[-1].isdigit():
                _store_files(fs, partition.rstrip("/"), found)
    return found


def _store_files(fs, folder: str, found: dict, depth: int = 0) -> None:
    versions: dict[int, list[tuple[str, str]]] = {}
    stores = []
    for path in listing(fs, folder):
        name = path.rstrip("/").rsplit("/", 1)[-1]
        match = _STATE_FILE.match(name)
        if match:
            versions.setdefault(int(match.group(1)), []).append((path, match.group(2)))
        elif depth == 0 and not name.startswith((".", "_")) and fs.isdir(path):
            stores.append(path.rstrip("/"))
    if versions or not stores:  # one store here (RocksDB's SSTs/ folder is part of it)
        found[folder] = versions
        return
    for store in stores:
        _store_files(fs, store, found, depth + 1)


def state_loadable(versions: dict[int, list[tuple[str, str]]], version: int) -> bool:
    """Whether one partition's store can load ``version``: from a snapshot at or below it (or
    the empty version 0) through a delta/changelog for every version after."""
    if version == 0:
        return True
    for at in range(version, -1, -1):
        kinds = {kind for _path, kind in versions.get(at, [])}
        if at == 0 or kinds & {"snapshot", "zip"}:
            return True
        if not kinds & {"delta", "changelog"}:
            return False
    return True


def drop_state_after(checkpoint: str, version: int) -> list[str]:
    """Remove every state file of a version past ``version`` (all of them for -1 or 0)."""
    fs = filesystem(checkpoint)
    removed = []
    for partition, versions in state_files(checkpoint).items():
        for number in sorted(versions, reverse=True):
            if number > version:
                for path, _kind in versions[number]:
                    remove(fs, path)
                    removed.append("state/" + path.split("/state/", 1)[-1])
    if version <= 0:
        remove_tree(fs, f"{checkpoint}/state")
    return removed


def state_before(checkpoint: str, version: int) -> list[str]:
    """The files of an HDFS-backed store's versions that loading ``version`` or any later one does
    not read: those older than the newest snapshot at or before ``version`` (none where there is
    no such snapshot, or the store is RocksDB's, whose files share SSTs)."""
    old = []
    for versions in state_files(checkpoint).values():
        kinds = {kind for files in versions.values() for _path, kind in files}
        if kinds & {"zip", "changelog"}:
            continue
        bases = [
            number
            for number, files in versions.items()
            if number <= version and any(kind == "snapshot" for _path, kind in files)
        ]
        if bases:
            old.extend(
                path
                for number, files in versions.items()
                if number < max(bases)
                for path, _kind in files
            )
    return sorted(old)
