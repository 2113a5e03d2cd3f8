"""The code's shape: the layers' import bans hold (each one tried with ruff on a probe import, as
CI's lint would see it in that folder), and no module or function of the package grows past
what a reader holds in mind (docs/architecture.md)."""

from __future__ import annotations

import ast
import subprocess

import pytest

from testkit.paths import ROOT, VENV_BIN

pytestmark = pytest.mark.unit

PACKAGE = [ROOT / "spark_jobs", ROOT / "plugins" / "lakehouse_airflow", ROOT / "dags"]
# A module this long holds a second concept to find (split by concept, never squeezed to a count).
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 60

# (where the import is, what it imports): every one must be refused by `ruff check`.
BANNED = [
    ("spark_jobs/engine", "spark_jobs.cli"),
    ("spark_jobs/engine", "spark_jobs.service"),
    ("spark_jobs/engine", "spark_jobs.shared_driver"),
    ("spark_jobs/engine", "airflow"),
    ("spark_jobs/engine", "lakehouse_airflow"),
    ("spark_jobs/control", "pyspark"),
    ("spark_jobs/control", "spark_jobs.engine"),
    ("spark_jobs/control", "spark_jobs.service"),
    ("spark_jobs/logs", "spark_jobs.control"),
    ("spark_jobs/model", "spark_jobs.logs"),
    ("spark_jobs/model", "spark_jobs.pipelines"),
    ("plugins/lakehouse_airflow", "pyspark"),
    ("bench", "tests"),
    ("bench", "tests.conftest"),
    ("testkit", "tests"),
    ("spark_jobs/model", "importlib.import_module"),
]


def _ruff(folder: str, source: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "ruff"), "check", "--no-cache", "--select", "TID",
                           "--stdin-filename", f"{folder}/_probe.py", "-"],
                          input=source, capture_output=True, text=True, cwd=ROOT)


@pytest.mark.parametrize("folder,module", BANNED, ids=[f"{folder}->{module}" for folder, module in BANNED])
def test_a_layer_that_imports_what_it_must_not_fails_lint(folder, module):
    package, _, name = module.rpartition(".")
    probe = f"from {package} import {name}\n" if module.startswith("importlib.") else f"import {module}\n"
    done = _ruff(folder, probe)
    assert done.returncode == 1 and "TID25" in done.stdout and "is banned" in done.stdout, done.stdout + done.stderr


def test_the_probe_passes_where_the_import_is_allowed():
    """The probe itself is clean: an allowed import in the same folder passes lint."""
    assert _ruff("spark_jobs/engine", "import spark_jobs.model.lake\n").returncode == 0
    assert _ruff("bench", "import testkit.paths\n").returncode == 0


def _sources():
    return sorted(path for folder in PACKAGE for path in folder.rglob("*.py") if "__pycache__" not in path.parts)


def test_no_module_of_the_package_is_over_600_lines():
    long = {str(path.relative_to(ROOT)): lines for path in _sources()
            if (lines := len(path.read_text().splitlines())) > MAX_FILE_LINES}
    assert long == {}, f"find the second concept in these modules (over {MAX_FILE_LINES} lines): {long}"


def test_no_function_of_the_package_is_over_60_lines():
    long = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= MAX_FUNCTION_LINES:
                long[f"{path.relative_to(ROOT)}:{node.name}"] = node.end_lineno - node.lineno + 1
    assert long == {}, f"split these functions (at most {MAX_FUNCTION_LINES} lines): {long}"
