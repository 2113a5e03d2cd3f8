"""``lakehouse new NAME``: a runnable pipeline of a team's own, from the package's skeleton.

It writes a pipeline folder ``NAME/`` in the first pipelines folder (``$LAKEHOUSE_PIPELINES``):
the spec, its code, its sample data, its quality suites (``quality/``, or under
``$LAKEHOUSE_QUALITY`` when that is set) and a test. Nothing in the platform's code changes and
nothing is written inside the installed package. ``__pipeline__`` in the skeleton's file names
and texts becomes ``NAME``.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from spark_jobs.control.suites import suites_dir
from spark_jobs.logs.fs import write_text
from spark_jobs.model.errors import UsageError
from spark_jobs.model.formats import CSV, JSON
from spark_jobs.model.settings import PIPELINES, pipelines_dirs
from spark_jobs.model.spec import scan_specs
from spark_jobs.model.spec_keys import PIPELINE_NAME

PLACEHOLDER = "__pipeline__"


@dataclass
class NewPipeline:
    """What ``new`` wrote."""

    name: str
    files: list[str]


def skeleton() -> Traversable:
    """The skeleton's folder, package data of this package."""
    return files("spark_jobs.resources") / "skeleton"


def _skeleton_files(
    folder: Traversable, relative: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], Traversable]]:
    found = []
    for entry in sorted(folder.iterdir(), key=lambda entry: entry.name):
        if entry.name == "__pycache__":
            continue
        if entry.is_dir():
            found += _skeleton_files(entry, (*relative, entry.name))
        else:
            found.append(((*relative, entry.name), entry))
    return found


def _targets(name: str, folder: Path, fmt: str) -> dict[Path, Traversable]:
    """Where NAME's copy of each skeleton file goes, in its pipeline folder ``folder``; for
    ``fmt`` csv, the files of ``skeleton_csv`` replace the skeleton's of the same name."""
    suites = suites_dir(name, folder / f"{name}.yaml")
    targets = {}
    chosen = dict(_skeleton_files(skeleton()))
    if fmt == CSV:
        chosen.update(_skeleton_files(files("spark_jobs.resources") / "skeleton_csv"))
    for relative, source in chosen.items():
        if relative[0] == "quality":
            targets[suites.joinpath(*relative[1:])] = source
        else:
            targets[folder.joinpath(*relative[:-1], relative[-1].replace(PLACEHOLDER, name))] = (
                source
            )
    return targets


def _home(folders: tuple[Path, ...]) -> Path:
    """The pipelines folder ``new`` writes to: the first one, never inside the installed package."""
    package = Path(str(files("spark_jobs"))).resolve()
    if folders[0] == package or package in folders[0].parents:
        raise UsageError(
            f"{PIPELINES.name} points into the installed package ({folders[0]}): set it to a "
            "folder of your own"
        )
    return folders[0]


def new_pipeline(name: str, fmt: str = JSON) -> NewPipeline:
    """Write pipeline ``name`` from the skeleton, its sample landing as ``fmt`` (JSON lines its
    code parses, or CSV files the platform parses); refuse a bad name, no pipelines folder, or
    any file already there."""
    if fmt not in (JSON, CSV):  # debezium is a format of the spec, not a skeleton
        raise UsageError(f"format {fmt!r} is not one new writes: use json or csv")
    if not PIPELINE_NAME.fullmatch(name):
        raise UsageError(
            f"pipeline name {name!r} is not allowed: use lower-case letters, digits and _, "
            "starting with a letter (it names modules, tables and DAG ids)"
        )
    folder = _home(pipelines_dirs()) / name
    specs, _broken = scan_specs()
    taken = next((spec for spec in specs if spec.name == name), None)
    if taken is not None:
        raise UsageError(
            f"pipeline {name!r} exists already (its spec: {taken.source}): choose another name"
        )
    targets = _targets(name, folder, fmt)
    there = [str(path) for path in targets if path.exists()]
    if there:
        raise UsageError(f"{there[0]} exists already: move it away or choose another name")
    for target, source in targets.items():
        write_text(str(target), source.read_text().replace(PLACEHOLDER, name))
    return NewPipeline(name, [str(path) for path in targets])
