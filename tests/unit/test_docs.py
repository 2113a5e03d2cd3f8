"""The manual and the README as a user reads them: the README is a front door, the product says
nothing of how it was made (no session or issue numbers, no commit hashes, no dates but the
examples'), and every spec key is in the spec reference. ``make docs`` builds the manual in
strict mode (a broken link fails); these checks need no build."""

from __future__ import annotations

import dataclasses
import re
import subprocess

import pytest

from testkit.paths import ROOT

pytestmark = [pytest.mark.unit]

PRODUCT = (
    "README.md",
    "docs",
    "spark_jobs",
    "plugins",
    "include",
    "dags",
    "examples",
    "requirements.txt",
    "pyproject.toml",
    "Makefile",
    "docker-compose.yaml",
    "testkit",
)
# Dates that are example data: sample events, spec defaults, placeholders, the valid
# event-time range.
EXAMPLE_DATES = {
    "2026-01-01",
    "2026-01-31",
    "2026-03-01",
    "2026-03-02",
    "2026-04-01",
    "2026-04-02",
    "2000-01-01",
    "2100-01-01",
}
HISTORY = re.compile(r"(?i)\b(session|issue) [0-9]")
DATE = re.compile(r"\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b")
HASH = re.compile(r"`[0-9a-f]{7,40}`")


# The benchmarks, the tests and CI's script: no session or issue numbers and no commit hashes
# either; dates only in their code, where they are data (event times, DAG runs' data intervals).
BESIDE = ("bench", "tests", ".ci")


def _product_files(*folders: str) -> list[str]:
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", *folders],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [
        name
        for name in tracked.stdout.split()
        if name.endswith(
            (".md", ".py", ".yaml", ".yml", ".toml", ".html", ".json", ".xml", ".txt", "Makefile")
        )
        or name.startswith(".ci/")
    ]


def _history(name: str, dates: bool) -> list[str]:
    text = (ROOT / name).read_text(errors="ignore")
    found = [match.group(0) for match in HISTORY.finditer(text)] + [
        match.group(0) for match in HASH.finditer(text)
    ]
    found += [
        match.group(0)
        for match in DATE.finditer(text)
        if dates and match.group(0) not in EXAMPLE_DATES
    ]
    return [f"{name}: {what}" for what in found]


def test_the_product_says_nothing_of_how_it_was_made():
    found = [line for name in _product_files(*PRODUCT) for line in _history(name, dates=True)]
    found += [
        line
        for name in _product_files(*BESIDE)
        for line in _history(name, dates=name.endswith(".md"))
    ]
    assert found == []


def test_the_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 250
    for command in ("make run", "make test"):
        assert command in readme
    # a file in the repository: right on its web view too
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / link).is_file(), link


def _hooks():
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    return hooks


def test_the_committed_reference_pages_are_what_the_code_generates(tmp_path, monkeypatch):
    hooks = _hooks()
    assert hooks.stale_pages() == [], "run `make reference` and commit the pages"
    # A page edited by hand (or code changed without `make reference`) is stale.
    pages = hooks.reference_pages()
    monkeypatch.setattr(hooks, "DOCS", tmp_path)
    for path, text in pages.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text.replace("| `--json` |", "| `--json`  |"))
    assert hooks.stale_pages() == ["reference/cli.md"]


def test_the_architecture_drawing_names_every_module_of_the_package():
    """Each module of the package is a box of its layer's band, named by its path from the
    layer's folder (with that folder's name in a band of several folders)."""
    drawing = (ROOT / "docs" / "images" / "architecture.svg").read_text()
    bands: dict[str, set[str]] = {}
    for title, boxes in re.findall(
        r'class="title">([^<]+)</text>(.*?)(?=class="title">|</svg>)', drawing, re.S
    ):
        bands[title] = set(re.findall(r'<text x="\d+" y="\d+">([^<]+)</text>', boxes))
    package = ROOT / "spark_jobs"
    layer = {  # the band of each folder or file directly under spark_jobs/, as the layers go
        "cli.py": "entry points",
        "submit.py": "entry points",
        "shared_driver.py": "entry points",
        "perform.py": "perform",
        "service": "service",
        "engine": "engine",
        "transforms": "pipeline code, results",
        "pipelines": "pipeline code, results",
        "authoring.py": "pipeline code, results",
        "results.py": "pipeline code, results",
        "control": "control",
        "logs": "logs",
        "model": "model",
    }
    shared = {"transforms"}  # its band draws several folders: their names lead
    missing = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        if path.name == "__init__.py" or relative.parts[0] in ("resources", "__pycache__"):
            continue
        if "__pycache__" in relative.parts:
            continue
        top = relative.parts[0]
        label = relative.name if len(relative.parts) == 1 else "/".join(relative.parts[1:])
        if top in shared:
            label = f"{top}/{label}"
        if label not in bands.get(layer[top], set()):
            missing.append(f"{relative} (in {layer[top]})")
    assert missing == [], f"run `make reference`: the drawing misses these modules: {missing}"


def test_every_field_of_a_spec_is_a_declared_key():
    """What a spec can set is declared in spark_jobs/model/spec_keys.py, from which the spec
    reference's tables are generated (tests/unit/spark_jobs/model/test_spec_keys.py)."""
    from spark_jobs.model import spec
    from spark_jobs.model.changes import ChangesSpec
    from spark_jobs.model.kafka import TopicSpec
    from spark_jobs.model.spec_keys import HOP_KEYS, PIPELINE_KEYS

    hop_fields = {field.name for field in dataclasses.fields(spec.HopSpec)} - {
        "upstreams",
        "changes",
        "kafka",
    } | {"upstream"}
    # a changes hop's and a topic-fed hop's, flat in the spec
    hop_fields |= {field.name for field in dataclasses.fields(ChangesSpec)}
    hop_fields |= {field.name for field in dataclasses.fields(TopicSpec)}
    hop_fields -= {"sequence_columns"}  # what sequence_by names, one column or several
    hop_fields |= {"columns", "csv"}  # a format's (FormatSpec), as the spec spells them
    pipeline_fields = {field.name for field in dataclasses.fields(spec.PipelineSpec)} - {"source"}
    assert hop_fields == {key.name for key in HOP_KEYS}
    assert pipeline_fields == {key.name for key in PIPELINE_KEYS} - {"campaigns"}


def test_every_setting_the_sources_read_is_declared_with_a_meaning():
    from spark_jobs.model.settings import SETTINGS

    assert len({setting.name for setting in SETTINGS}) == len(SETTINGS)
    assert all(
        setting.name.startswith("LAKEHOUSE_") and setting.meaning.endswith(".")
        for setting in SETTINGS
    )
    named = _hooks().names_in_sources()
    assert named and set(named) - {setting.name for setting in SETTINGS} == set()


def test_every_test_the_manual_names_exists():
    """The manual says which test checks each fact: a test renamed or moved must not leave
    it naming nothing.
    """
    named = re.compile(r"\b((?:tests|examples)/[\w/]+\.py)::(\w+)")
    missing = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for path, test in named.findall(page.read_text()):
            source = ROOT / path
            if not source.exists() or not re.search(rf"^\s*def {test}\(", source.read_text(), re.M):
                missing.append(f"{page.relative_to(ROOT)}: {path}::{test}")
    assert missing == []
