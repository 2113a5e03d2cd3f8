"""The Airflow lines the package supports: the check the DAG factory and the plugin make, and the
metadata's range it mirrors (pyproject.toml)."""

from __future__ import annotations

import tomllib

import pytest
from lakehouse_airflow.versions import SUPPORTED, UnsupportedAirflow, check_airflow
from packaging.specifiers import SpecifierSet

from testkit.paths import ROOT

pytestmark = pytest.mark.unit


def _declared_range() -> SpecifierSet:
    requirements = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (core,) = [each for each in requirements if each.startswith("apache-airflow-core")]
    return SpecifierSet(core.removeprefix("apache-airflow-core"))


@pytest.mark.parametrize("version", ["3.1.8", "3.2.0", "3.2.2", "3.3.2", "3.4.0", "4.0.0"])
def test_a_version_is_supported_exactly_when_the_metadata_admits_it(version):
    if version in _declared_range():
        check_airflow(version)
    else:
        with pytest.raises(UnsupportedAirflow) as refused:
            check_airflow(version)
        assert str(refused.value).count("\n") == 0 and f"Airflow {version} is not supported" in str(
            refused.value
        )
        assert "3.2 and 3.3" in str(refused.value)
    assert {(3, 2), (3, 3)} <= set(SUPPORTED)


def test_the_installed_airflow_is_supported():
    check_airflow()
