"""``spark_jobs/control/companions.py``: a pipeline's modules beside its spec, against small
pipeline folders written here (their code, sample data and a sibling they import; no JVM)."""

from __future__ import annotations

import dataclasses
import re
import sys

import pytest

from spark_jobs.control.companions import companion_module
from spark_jobs.model.errors import UsageError
from tests.unit.spark_jobs._helpers import load

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _forget_imported_pipelines():
    """The packages and modules a test imported leave ``sys.modules`` with it."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith("lakehouse_pipelines_"):
            del sys.modules[name]


def _pipeline(folder, **modules):
    """The spec of pipeline ``crm`` in ``folder``, with ``modules`` (file stem: text) beside it."""
    folder.mkdir(parents=True)
    for stem, text in modules.items():
        (folder / f"{stem}.py").write_text(text)
    return load(folder, "")


def test_a_spec_without_a_module_beside_it_has_none(tmp_path):
    spec = _pipeline(tmp_path / "team", crm_transforms="X = 1\n")
    assert companion_module(spec) is None
    assert companion_module(spec, "_sample") is None
    # a spec not read from a file (built in code) has no folder to look in
    assert companion_module(dataclasses.replace(spec, source=None), "_transforms") is None


def test_each_specs_folder_is_a_package_whose_modules_import_their_siblings(tmp_path):
    code = "from . import crm_transforms as transforms\n\nTEAM = transforms.TEAM\n"
    one = _pipeline(
        tmp_path / "one", crm=code, crm_transforms="TEAM = 'one'\n", crm_sample="BAD_LINES = ['x']"
    )
    two = _pipeline(tmp_path / "two", crm=code, crm_transforms="TEAM = 'two'\n")
    # the same pipeline name in two folders: two pipelines, each importing its own sibling
    assert companion_module(one).TEAM == "one"
    assert companion_module(two).TEAM == "two"
    assert companion_module(one, "_sample").BAD_LINES == ["x"]
    assert companion_module(two, "_sample") is None
    # imported once: the engine and the sample writer get the same module
    assert companion_module(one) is companion_module(one)
    assert companion_module(one).__file__ == str((tmp_path / "one" / "crm.py").resolve())


def test_a_module_that_cannot_be_imported_is_refused_naming_its_file_and_the_error(tmp_path):
    spec = _pipeline(
        tmp_path / "team",
        crm="def transforms(:\n",
        crm_sample="from . import crm_helpers\n",
    )
    code, sample = tmp_path / "team" / "crm.py", tmp_path / "team" / "crm_sample.py"
    with pytest.raises(
        UsageError,
        match=rf"^{re.escape(str(code))}: cannot be imported \(SyntaxError: .*\): fix it$",
    ) as refused:
        companion_module(spec)
    assert isinstance(refused.value.__cause__, SyntaxError)
    with pytest.raises(
        UsageError,
        match=rf"^{re.escape(str(sample))}: cannot be imported \(ImportError: .*crm_helpers",
    ):
        companion_module(spec, "_sample")
