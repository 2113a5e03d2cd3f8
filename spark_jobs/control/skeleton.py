"""``lakehouse new NAME``: a runnable pipeline of a team's own, from ``include/skeleton/``.

It writes the spec and its code beside it in the pipelines folder (``$LAKEHOUSE_PIPELINES``),
and the quality suites in the suites folder (``$LAKEHOUSE_QUALITY``): nothing in the platform's
code changes. ``__pipeline__`` in the skeleton's file names and texts becomes ``NAME``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from spark_jobs.logs.fs import write_text
from spark_jobs.model.errors import UsageError
from spark_jobs.model.spec import pipelines_dir, repo_root, scan_specs

PLACEHOLDER = "__pipeline__"
NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")


@dataclass
class NewPipeline:
    """What ``new`` wrote."""

    name: str
    files: list[str]


def skeleton_dir() -> Path:
    return repo_root() / "include" / "skeleton"


def _targets(name: str, quality: Path) -> dict[Path, Path]:
    """Each skeleton file and where NAME's copy goes."""
    folder = skeleton_dir()
    targets = {}
    for source in sorted(path for path in folder.rglob("*") if path.is_file() and "__pycache__" not in path.parts):
        relative = source.relative_to(folder)
        if relative.parts[0] == "quality":
            targets[source] = quality / name / Path(*relative.parts[1:])
        else:
            targets[source] = pipelines_dir() / str(relative).replace(PLACEHOLDER, name)
    return targets


def new_pipeline(name: str, quality: Path) -> NewPipeline:
    """Write pipeline ``name`` from the skeleton; refuse a bad name or any file already there."""
    if not NAME.fullmatch(name):
        raise UsageError(f"pipeline name {name!r} is not allowed: use lower-case letters, digits and _, "
                         "starting with a letter (it names modules, tables and DAG ids)")
    specs, _broken = scan_specs()
    if any(spec.name == name for spec in specs):
        raise UsageError(f"pipeline {name!r} exists already (a spec in {pipelines_dir()}): choose another name")
    targets = _targets(name, quality)
    there = [str(path) for path in targets.values() if path.exists()]
    if there:
        raise UsageError(f"{there[0]} exists already: move it away or choose another name")
    for source, target in targets.items():
        write_text(str(target), source.read_text().replace(PLACEHOLDER, name))
    return NewPipeline(name, [str(path) for path in targets.values()])
