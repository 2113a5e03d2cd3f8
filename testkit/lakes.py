"""Pipelines folders and lakes for a test: copies of the examples, and increments run
through the service.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from spark_jobs.logs import file_source_log
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import load_spec
from testkit.paths import EXAMPLES, ROOT

# The lakes real runs wrote for the JVM-free tests (tests/fixtures/make_lakes.py): their folder, the
# placeholder of the lake's path in their files, and how their spec differs from the example's.
FIXTURE_LAKES = ROOT / "tests" / "fixtures" / "lakes"
PLACEHOLDER = "@LAKE@"
FIXTURE_SPEC = {"source_log_compact_interval": 2}
# The fixture lakes of another pipeline than ad_events (its example's spec, unchanged).
FIXTURE_PIPELINES = {"nodata": "shop"}


def spec_copy(folder: Path, **changes) -> Path:
    """``folder`` with a copy of the ad_events pipeline folder, some knobs of its spec changed
    (a knob changed to None is taken out); returns the folder (a pipelines folder)."""
    pipeline = example_copy(folder, "ad_events")
    spec = yaml.safe_load((pipeline / "ad_events.yaml").read_text())
    spec.update(changes)
    spec = {key: value for key, value in spec.items() if value is not None}
    (pipeline / "ad_events.yaml").write_text(yaml.safe_dump(spec))
    return folder


def topic_spec_copy(folder: Path, **bronze) -> Path:
    """``folder`` with a copy of ad_events whose bronze reads Kafka instead of its landing folder
    (``bronze``: its topic keys, ``topic=...`` or ``topic_pattern=...`` and the like); returns the
    folder (a pipelines folder)."""
    hops = yaml.safe_load((EXAMPLES / "ad_events" / "ad_events.yaml").read_text())["hops"]
    hops[0].pop("landing", None)
    hops[0].update(bronze)
    return spec_copy(folder, hops=hops)


def suites_copy(folder: Path) -> Path:
    """``folder`` holding a copy of every example's suites as ``<pipeline>/<hop>.json`` (the
    layout of ``$LAKEHOUSE_QUALITY``); returns it."""
    for pipeline in sorted(EXAMPLES.iterdir()):
        if (pipeline / "quality").is_dir():
            shutil.copytree(pipeline / "quality", folder / pipeline.name, dirs_exist_ok=True)
    return folder


def example_copy(folder: Path, name: str, hops: tuple[str, ...] = ()) -> Path:
    """A copy of the example pipeline ``name``'s folder in the pipelines folder ``folder``, with
    only the spec's ``hops`` when given (a test of some hops does not run the others); returns
    the copy's path."""
    target = folder / name
    shutil.copytree(
        EXAMPLES / name, target, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True
    )
    if hops:
        import yaml

        spec_file = target / f"{name}.yaml"
        spec = yaml.safe_load(spec_file.read_text())
        spec["hops"] = [hop for hop in spec["hops"] if hop["name"] in hops]
        spec_file.write_text(yaml.safe_dump(spec, sort_keys=False, default_flow_style=None))
    return target


def increment(seed: int, hop: str = "all", run_id: str | None = None, events: int = 240) -> None:
    """New landing files (two, from minute ``seed`` of 2026-04-01, 3% bad lines), then a run:
    through the service API.
    """
    from spark_jobs import service
    from spark_jobs.model.times import parse_time

    service.generate(
        "ad_events",
        events,
        files=2,
        seed=seed,
        start_ms=parse_time(f"2026-04-01T00:{seed:02d}:00", "start"),
        bad_fraction=0.03,
    )
    service.run("ad_events", hop, run_id=run_id, progress=lambda line: None).raise_for_gate()


def fixture_lake(name: str, folder: Path) -> Lake:
    """A copy of the fixture lake ``name`` in ``folder``, its paths pointing at the copy, opened
    with the spec it was written with."""
    home = folder / name
    shutil.copytree(FIXTURE_LAKES / name, home)
    for path in home.rglob("*"):
        if path.is_file() and path.suffix != ".parquet":
            try:
                text = path.read_text()
            except UnicodeDecodeError:
                continue  # state store files hold no paths
            if PLACEHOLDER in text:
                path.write_text(text.replace(PLACEHOLDER, str(home)))
    pipeline = FIXTURE_PIPELINES.get(name)
    if pipeline:
        spec = load_spec(example_copy(folder / f"{name}-pipelines", pipeline) / f"{pipeline}.yaml")
    else:
        spec = load_spec(
            spec_copy(folder / f"{name}-pipelines", **FIXTURE_SPEC) / "ad_events" / "ad_events.yaml"
        )
    lake = Lake(str(home), spec)
    for hop in spec.hops:  # the landing files its batches read, emptied as its data files are
        if hop.reads_landing:
            for entry in file_source_log.file_source_entries(lake.checkpoint(hop)):
                path = Path(file_source_log.listed_path(entry["path"]))
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
    return lake
