"""The one filesystem helper: fsspec for a local path or a URI, and the one atomic writer.

Everything outside Spark that reads or writes the lake's files (checkpoint and Delta logs, run
records, rollback journals, quality results, sample landing files) goes through here, so a
local lake and an object-store lake take the same code.
"""

from __future__ import annotations

import json
import os

import fsspec


def filesystem(path: str) -> fsspec.AbstractFileSystem:
    """The fsspec filesystem serving ``path``.

    On S3, without s3fs's cache of folder listings: Spark adds and deletes the objects behind
    s3fs's back, so a cached listing would show a checkpoint or a Delta log as it was. S3 has
    no empty folders either: a folder whose last object went is gone, so listers treat a missing
    folder as an empty one (:func:`listing`).
    """
    options = _s3_options() if path.startswith(("s3://", "s3a://")) else {}
    return fsspec.core.url_to_fs(path, **options)[0]


def _s3_options() -> dict:
    """s3fs's options, with the standard ``AWS_*`` variables given explicitly: fsspec caches one
    instance per set of options, so a process whose variables changed (another store) gets a
    client of its own instead of the first one's."""
    env = os.environ
    options: dict = {"use_listings_cache": False}
    if env.get("AWS_ENDPOINT_URL"):
        options["endpoint_url"] = env["AWS_ENDPOINT_URL"]
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        options.update(
            key=env["AWS_ACCESS_KEY_ID"],
            secret=env["AWS_SECRET_ACCESS_KEY"],
            token=env.get("AWS_SESSION_TOKEN"),
        )
    return options


def listing(fs: fsspec.AbstractFileSystem, folder: str) -> list[str]:
    """The paths in ``folder``, sorted; none when it does not exist."""
    try:
        return sorted(fs.ls(folder, detail=False))
    except FileNotFoundError:
        return []


def remove_tree(fs: fsspec.AbstractFileSystem, path: str) -> None:
    """Delete ``path`` and everything under it, folders included.

    Some S3 stores (SeaweedFS, as a filer with real folders) keep an emptied folder and list it
    as a prefix; Spark would then find a deleted state folder "not empty" on batch 0. Their
    folder entries (``key/``) go too, deepest first.
    """
    if fs.exists(path):
        fs.rm(path, recursive=True)
    if not hasattr(fs, "call_s3"):
        return
    bucket, _, key = fs._strip_protocol(path).partition("/")

    def folders_of(prefix: str) -> None:
        found = fs.call_s3("list_objects_v2", Bucket=bucket, Prefix=prefix, Delimiter="/")
        for entry in found.get("CommonPrefixes", []):
            folders_of(entry["Prefix"])
        fs.call_s3("delete_object", Bucket=bucket, Key=prefix)

    folders_of(key.rstrip("/") + "/")


def write_text(path: str, text: str, encoding: str = "utf-8") -> str:
    """Write ``path`` atomically: a dot-prefixed temp file beside it (which Spark's file sources
    and the log readers skip), then a rename. Returns ``path``."""
    fs = filesystem(path)
    folder, name = path.rsplit("/", 1)
    fs.makedirs(folder, exist_ok=True)
    staging = f"{folder}/.{name}.lakehouse-tmp"
    with fs.open(staging, "wb") as handle:
        handle.write(text.encode(encoding))
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
    documents = []
    for path in listing(fs, folder):
        name = path.rsplit("/", 1)[-1]
        if name.startswith(".") or not name.endswith(".json"):
            continue
        with fs.open(path, "r") as handle:
            documents.append(json.load(handle))
    return documents
