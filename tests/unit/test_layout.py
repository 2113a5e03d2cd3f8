"""The code's shape: the layers' import bans hold (each one tried with ruff on a probe import, as
CI's lint would see it in that folder), and no module or function of the package grows past
what a reader holds in mind (docs/architecture.md); the unit tests are laid out like the package."""

from __future__ import annotations

import ast
import subprocess
import warnings
from pathlib import Path

import pytest

from testkit.paths import ROOT, VENV_BIN

pytestmark = pytest.mark.unit

PACKAGE = [ROOT / "spark_jobs", ROOT / "plugins" / "lakehouse_airflow", ROOT / "dags"]
# A module this long holds a second concept to find (split by concept, never squeezed to a count).
MAX_FILE_LINES = 600
# Lines as `ruff format` lays code out at 100 columns (one argument a line where a call does
# not fit); C901 holds each function's complexity at 10 as well.
MAX_FUNCTION_LINES = 90

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
    # the Airflow side's one door is the service
    ("plugins/lakehouse_airflow", "spark_jobs.control"),
    ("plugins/lakehouse_airflow", "spark_jobs.engine"),
    ("plugins/lakehouse_airflow", "spark_jobs.logs"),
    ("plugins/lakehouse_airflow", "spark_jobs.perform"),
    ("plugins/lakehouse_airflow", "spark_jobs.results"),
    ("plugins/lakehouse_airflow", "spark_jobs.shared_driver"),
    ("dags", "spark_jobs.control"),
    ("dags", "spark_jobs.engine"),
    ("dags", "spark_jobs.logs"),
    ("dags", "spark_jobs.authoring"),
    ("bench", "tests"),
    ("bench", "tests.conftest"),
    ("testkit", "tests"),
    ("spark_jobs/model", "importlib.import_module"),
]


def _ruff(folder: str, source: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            str(VENV_BIN / "ruff"),
            "check",
            "--no-cache",
            "--select",
            "TID",
            "--stdin-filename",
            f"{folder}/_probe.py",
            "-",
        ],
        input=source,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


@pytest.mark.parametrize(
    "folder,module", BANNED, ids=[f"{folder}->{module}" for folder, module in BANNED]
)
def test_a_layer_that_imports_what_it_must_not_fails_lint(folder, module):
    package, _, name = module.rpartition(".")
    probe = (
        f"from {package} import {name}\n"
        if module.startswith("importlib.")
        else f"import {module}\n"
    )
    done = _ruff(folder, probe)
    assert done.returncode == 1 and "TID25" in done.stdout and "is banned" in done.stdout, (
        done.stdout + done.stderr
    )


def test_the_probe_passes_where_the_import_is_allowed():
    """The probe itself is clean: an allowed import in the same folder passes lint."""
    assert _ruff("spark_jobs/engine", "import spark_jobs.model.lake\n").returncode == 0
    assert _ruff("bench", "import testkit.paths\n").returncode == 0
    assert (
        _ruff(
            "plugins/lakehouse_airflow", "import spark_jobs.service\nimport spark_jobs.model.lake\n"
        ).returncode
        == 0
    )


def _sources():
    return sorted(
        path
        for folder in PACKAGE
        for path in folder.rglob("*.py")
        if "__pycache__" not in path.parts
    )


def test_a_module_over_600_lines_is_named_in_a_warning():
    """A warning, not a failure: a module is split where a second concept starts, never squeezed
    to a count (the warning says where to look)."""
    long = {
        str(path.relative_to(ROOT)): lines
        for path in _sources()
        if (lines := len(path.read_text().splitlines())) > MAX_FILE_LINES
    }
    if long:
        warnings.warn(
            f"find the second concept in these modules (over {MAX_FILE_LINES} lines): {long}",
            stacklevel=1,
        )


def test_no_function_of_the_package_is_over_90_lines():
    long = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.end_lineno - node.lineno >= MAX_FUNCTION_LINES
            ):
                long[f"{path.relative_to(ROOT)}:{node.name}"] = node.end_lineno - node.lineno + 1
    assert long == {}, f"split these functions (at most {MAX_FUNCTION_LINES} lines): {long}"


def _module_name(path) -> str:
    relative = path.relative_to(ROOT / "plugins" if "plugins" in path.parts else ROOT).with_suffix(
        ""
    )
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def _imports_of(path, modules: set[str]) -> set[str]:
    """The package's modules that ``path`` imports, wherever the import stands (a lazy import in a
    function counts: it ties the two modules all the same)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for name in names:
            while name and name not in modules:  # `from a.b import c`: module a.b.c, else a.b
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def _reach(graph: dict[str, set[str]], node: str) -> set[str]:
    seen, todo = set(), [node]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The modules that reach each other through their imports, by circle (more than
    one module each).
    """
    reach = {node: _reach(graph, node) for node in graph}
    circles = {
        tuple(sorted({node} | {other for other in reach[node] if node in reach[other]}))
        for node in graph
        if node in reach[node]
    }
    return sorted(list(circle) for circle in circles if len(circle) > 1)


def test_no_two_modules_of_the_package_import_each_other_even_lazily():
    paths = {_module_name(path): path for path in _sources()}
    # A package's __init__ stands for the package only where it imports something itself.
    graph = {name: _imports_of(path, set(paths)) - {name} for name, path in paths.items()}
    graph = {
        name: {
            target for target in targets if target != name.rpartition(".")[0] or graph.get(target)
        }
        for name, targets in graph.items()
    }
    assert _circles(graph) == [], "import circles: move what both sides need to a module below them"


def test_the_circle_finder_finds_a_circle_through_three_modules():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("front", ["cli.py", "perform.py", "shared_driver.py", "submit.py"])
def test_the_cli_and_the_shared_driver_call_the_service_and_read_the_model_only(front):
    """The CLI parses argv into a call, the shared driver reads one off the wire, and
    ``perform`` calls the service with it and prints what it returns: nothing of theirs reaches
    below the service."""
    paths = {_module_name(path): path for path in _sources()}
    used = _imports_of(ROOT / "spark_jobs" / front, set(paths))
    # the package itself: `from spark_jobs import service`
    below = sorted(
        name
        for name in used - {"spark_jobs"}
        if not name.startswith(
            (
                "spark_jobs.service",
                "spark_jobs.model",
                "spark_jobs.results",
                "spark_jobs.cli",
                "spark_jobs.perform",
            )
        )
        and name not in ("spark_jobs.shared_driver",)
    )
    assert below == [], f"{front} reaches below the service: {below}"


# The layers, lowest first (docs/architecture.md): a module may import its own layer and the
# layers below it, never one above, lazily or not. ``results`` is the service's return types.
LAYERS = [
    ("spark_jobs.model",),
    ("spark_jobs.logs",),
    ("spark_jobs.control", "spark_jobs.results"),
    ("spark_jobs.transforms", "spark_jobs.authoring", "spark_jobs.pipelines"),
    ("spark_jobs.engine",),
    ("spark_jobs.service",),
    (
        "spark_jobs.cli",
        "spark_jobs.perform",
        "spark_jobs.shared_driver",
        "spark_jobs.submit",
        "lakehouse_airflow",
        "dags",
    ),
]
# A team's pipeline code, copied by ``lakehouse new``: it uses the authoring API like any team's.
OUTSIDE = ("spark_jobs.resources",)


def _layer(module: str) -> int | None:
    for rank, prefixes in enumerate(LAYERS):
        if any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes):
            return rank
    return None


def _arrows_up(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{source} -> {target}"
        for source, targets in graph.items()
        for target in targets
        if _layer(source) is not None
        and _layer(target) is not None
        and _layer(target) > _layer(source)
    )


def test_no_module_imports_a_layer_above_its_own():
    paths = {_module_name(path): path for path in _sources()}
    graph = {name: _imports_of(path, set(paths)) - {name} for name, path in paths.items()}
    unplaced = sorted(
        name
        for name in graph
        if _layer(name) is None and name != "spark_jobs" and not name.startswith(OUTSIDE)
    )
    assert unplaced == [], f"modules in no layer of LAYERS: {unplaced}"
    assert _arrows_up(graph) == [], "imports from a lower layer to a higher one"


def test_the_arrow_finder_finds_an_import_up():
    assert _arrows_up({"spark_jobs.logs.fs": {"spark_jobs.control.status"}}) == [
        "spark_jobs.logs.fs -> spark_jobs.control.status"
    ]
    assert _arrows_up({"spark_jobs.control.status": {"spark_jobs.logs.fs"}}) == []


# The unit tests are laid out like the package: tests/unit/spark_jobs/<package
# path>/test_<module>.py holds the tests of the module they call. At the top of tests/unit only the
# checks of the project as a whole, and of what is not in the package:
PROJECT_TESTS = {
    "test_layout.py",  # the code's shape (this file)
    "test_docs.py",  # the manual and the README
    "test_compose.py",  # docker-compose.yaml
    "test_bench.py",  # bench/, the benchmark suite's instruments
    "test_versions.py",  # the Airflow lines pyproject.toml admits
    "test_scripts.py",  # include/scripts/
    "test_testkit.py",  # testkit/'s own models
}


def _misplaced_unit_tests(unit: Path, package: Path) -> list[str]:
    """The test files of ``unit`` out of the package's layout: one under ``unit/<package>/`` whose
    ``test_<name>.py`` names no module ``<name>.py`` and no package ``<name>/`` at the same path in
    ``package``, a folder there without ``__init__.py`` (two test files of one name need packages),
    one at the top of ``unit`` that is not in PROJECT_TESTS, one in any other folder of ``unit``."""
    mirror = unit / package.name
    found = []
    for path in sorted(mirror.rglob("test_*.py")):
        module = package / path.parent.relative_to(mirror) / path.stem.removeprefix("test_")
        if not module.with_suffix(".py").is_file() and not (module / "__init__.py").is_file():
            found.append(
                f"{path.relative_to(unit)}: no module "
                f"{module.relative_to(package.parent)}.py, nor a package"
            )
    for folder in sorted(
        {
            mirror,
            *(path for path in mirror.rglob("*") if path.is_dir() and path.name != "__pycache__"),
        }
    ):
        if not (folder / "__init__.py").is_file():
            found.append(f"{folder.relative_to(unit)}/: no __init__.py")
    found += [
        f"{path.name}: a module's tests at the top: move them to {package.name}/<its "
        "path>/test_<module>.py"
        for path in sorted(unit.glob("test_*.py"))
        if path.name not in PROJECT_TESTS
    ]
    found += [
        f"{path.relative_to(unit)}: outside {package.name}/"
        for path in sorted(unit.glob("*/**/test_*.py"))
        if mirror not in path.parents
    ]
    return found


def test_the_unit_tests_are_laid_out_like_the_package():
    assert _misplaced_unit_tests(ROOT / "tests" / "unit", ROOT / "spark_jobs") == []
