"""The one filesystem helper: fsspec for a local path or a URI, and the one atomic writer.

Everything outside Spark that reads or writes the lake's files (checkpoint and Delta logs, run
records, rollback journals, quality results, sample landing files) goes through here, so a
local lake and an object-store lake take the same code.
"""

from __future__ import annotations

import json

import fsspec


def filesystem(path: str) -> fsspec.AbstractFileSystem:
    """The fsspec filesystem serving ``path``."""
    return fsspec.core.url_to_fs(path)[0]


def write_text(path: str, text: str) -> str:
    """Write ``path`` atomically: a dot-prefixed temp file beside it (which Spark's file sources
    and the log readers skip), then a rename. Returns ``path``."""
    fs = filesystem(path)
    folder, name = path.rsplit("/", 1)
    fs.makedirs(folder, exist_ok=True)
    staging = f"{folder}/.{name}.lakehouse-tmp"
    with fs.open(staging, "w") as handle:
        handle.write(text)
    fs.mv(staging, path)
    return path


def write_json(folder: str, name: str, document: dict) -> str:
    """Write ``folder/name`` as indented JSON, atomically; return its path."""
    return write_text(f"{folder}/{name}", json.dumps(document, indent=2, default=str))


def read_json(path: str) -> dict | None:
    """The JSON document at ``path``, or None when there is no such file."""
    fs = filesystem(path)
    if not fs.exists(path):
        return None
    with fs.open(path, "r") as handle:
        return json.load(handle)


def read_json_folder(folder: str) -> list[dict]:
    """Every ``*.json`` document of ``folder`` (none when it does not exist), by file name."""
    fs = filesystem(folder)
    if not fs.exists(folder):
        return []
    documents = []
    for path in sorted(fs.ls(folder, detail=False)):
        name = path.rsplit("/", 1)[-1]
        if name.startswith(".") or not name.endswith(".json"):
            continue
        with fs.open(path, "r") as handle:
            documents.append(json.load(handle))
    return documents
