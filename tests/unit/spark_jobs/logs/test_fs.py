"""``spark_jobs/logs/fs.py``: the atomic writer, the JSON readers, listings and tree removal on a
local lake, checked against the files as :mod:`pathlib` and :mod:`json` see them (no S3, no JVM)."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from spark_jobs.logs.fs import (
    filesystem,
    listing,
    read_json,
    read_json_folder,
    remove_tree,
    write_json,
    write_text,
)

pytestmark = pytest.mark.unit


def _tree(folder: Path) -> list[str]:
    return sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*"))


def test_a_write_makes_its_folders_replaces_the_file_and_leaves_no_staging_file(tmp_path):
    path = tmp_path / "_ops" / "runs" / "team" / "r1.silver.json"
    assert write_text(str(path), "first") == str(path)
    assert path.read_text() == "first"
    # a second write replaces the whole file, even with a shorter text
    write_text(str(path), "2nd", encoding="utf-16")
    assert path.read_bytes() == "2nd".encode("utf-16")
    assert _tree(tmp_path / "_ops") == ["runs", "runs/team", "runs/team/r1.silver.json"]


def test_a_json_document_reads_back_with_what_json_cannot_hold_as_text(tmp_path):
    folder = str(tmp_path / "journals")
    path = write_json(folder, "rb-1.json", {"amount": Decimal("1.10"), "table": Path("t/b")})
    assert path == f"{folder}/rb-1.json"
    expected = {"amount": "1.10", "table": "t/b"}
    assert json.loads(Path(path).read_text()) == expected
    assert read_json(path) == expected
    assert read_json(f"{folder}/rb-2.json") is None
    assert read_json(str(tmp_path / "no-folder" / "rb-1.json")) is None


def test_a_folder_reads_its_json_documents_by_name_and_skips_hidden_and_other_files(tmp_path):
    folder = tmp_path / "alerts"
    folder.mkdir()
    for name in ("b.json", "a.json"):
        (folder / name).write_text(json.dumps({"name": name}))
    # a write that stopped before its rename, a hidden file, and a file of another kind
    (folder / ".c.json.lakehouse-tmp").write_text('{"name": ".c.json.lakehouse-tmp"}')
    (folder / ".a.json").write_text('{"name": ".a.json"}')
    (folder / "notes.txt").write_text("not a document")
    assert read_json_folder(str(folder)) == [{"name": "a.json"}, {"name": "b.json"}]
    assert read_json_folder(str(tmp_path / "no-such-folder")) == []


def test_a_listing_is_sorted_and_empty_for_a_missing_folder(tmp_path):
    fs = filesystem(str(tmp_path))
    for name in ("2", "10", "1"):
        (tmp_path / name).write_text("")
    # sorted as text, as the paths are
    names = [Path(path).name for path in listing(fs, str(tmp_path))]
    assert names == ["1", "10", "2"]
    assert listing(fs, str(tmp_path / "gone")) == []


def test_removing_a_tree_takes_its_files_and_folders_and_a_missing_one_is_no_error(tmp_path):
    state = tmp_path / "checkpoints" / "team" / "silver" / "state"
    (state / "0" / "1").mkdir(parents=True)
    (state / "0" / "1" / "1.delta").write_text("x")
    (state / "0" / "_metadata").write_text("y")
    (tmp_path / "checkpoints" / "team" / "silver" / "commits").mkdir()
    fs = filesystem(str(tmp_path))
    remove_tree(fs, str(state))
    assert _tree(tmp_path / "checkpoints") == ["team", "team/silver", "team/silver/commits"]
    remove_tree(fs, str(state))
    assert _tree(tmp_path / "checkpoints") == ["team", "team/silver", "team/silver/commits"]
