"""``spark_jobs/control/writers/skeleton.py``: what ``lakehouse new`` writes where, against the
skeleton's files in the package read as plain text, and what it refuses without writing (no JVM).
That the written pipeline runs and its test can fail is ``tests/spark/test_new_pipeline.py``'s."""

from __future__ import annotations

from pathlib import Path

import pytest

import spark_jobs
from spark_jobs.control.writers.skeleton import _home, new_pipeline
from spark_jobs.model.errors import UsageError

pytestmark = pytest.mark.unit

PACKAGE = Path(spark_jobs.__file__).parent.resolve()


def _files(folder: Path) -> dict[str, Path]:
    """The files under ``folder`` by their path relative to it."""
    return {
        path.relative_to(folder).as_posix(): path
        for path in folder.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def _tree(folder: Path) -> list[str]:
    return sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*"))


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_new_writes_each_skeleton_file_named_for_the_pipeline_with_its_suites_apart(
    tmp_path, monkeypatch, fmt
):
    """In the first pipelines folder, each skeleton file with ``__pipeline__`` made the name (for
    csv, ``skeleton_csv``'s files instead of those of the same name); the suites in
    ``$LAKEHOUSE_QUALITY/<name>/`` when that is set."""
    first, second, quality = tmp_path / "first", tmp_path / "second", tmp_path / "quality"
    second.mkdir()
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", f"{first}:{second}")
    monkeypatch.setenv("LAKEHOUSE_QUALITY", str(quality))
    sources = _files(PACKAGE / "resources" / "skeleton")
    if fmt == "csv":
        sources |= _files(PACKAGE / "resources" / "skeleton_csv")
    assert "quality/gold.json" in sources and "__pipeline__.yaml" in sources
    expected = {}
    for relative, source in sources.items():
        if relative.startswith("quality/"):
            target = quality / "orders" / relative.removeprefix("quality/")
        else:
            target = first / "orders" / relative.replace("__pipeline__", "orders")
        expected[str(target)] = source.read_text().replace("__pipeline__", "orders")

    written = new_pipeline("orders", fmt)

    assert written.name == "orders"
    assert sorted(written.files) == sorted(expected)
    assert {path: Path(path).read_text() for path in written.files} == expected
    # nothing else: no staging file left, no quality/ in the pipeline folder, the second untouched
    assert sorted(str(path) for path in first.rglob("*") if path.is_file()) == sorted(
        path for path in expected if path.startswith(f"{first}/")
    )
    assert _tree(quality / "orders") == ["bronze.json", "gold.json", "silver.json"]
    assert _tree(second) == []


def test_new_refuses_an_unknown_format_and_a_file_in_the_way_writing_nothing(tmp_path, monkeypatch):
    pipelines, quality = tmp_path / "pipelines", tmp_path / "quality"
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(pipelines))
    monkeypatch.setenv("LAKEHOUSE_QUALITY", str(quality))
    stray = quality / "orders" / "silver.json"
    stray.parent.mkdir(parents=True)
    stray.write_text("{}")
    for fmt in ("xml", "debezium"):  # debezium is a spec's format, with no skeleton of its own
        with pytest.raises(UsageError, match=f"format '{fmt}' is not one new writes: use json or"):
            new_pipeline("orders", fmt)
    with pytest.raises(
        UsageError, match=f"^{stray} exists already: move it away or choose another name$"
    ):
        new_pipeline("orders")
    assert _tree(tmp_path) == ["quality", "quality/orders", "quality/orders/silver.json"]
    assert stray.read_text() == "{}"


def test_the_pipelines_folder_new_writes_to_is_never_inside_the_installed_package(tmp_path):
    # asked of the choice itself: through new_pipeline, a choice gone wrong would write there
    for inside in (PACKAGE, PACKAGE / "resources" / "pipelines"):
        with pytest.raises(UsageError, match="points into the installed package .*: set it to"):
            _home((inside, tmp_path))
    # the first folder is the one; a folder beside the package whose name starts like it is fine
    beside = PACKAGE.parent / f"{PACKAGE.name}_pipelines"
    assert _home((beside, PACKAGE)) == beside
    assert _home((tmp_path, PACKAGE)) == tmp_path
