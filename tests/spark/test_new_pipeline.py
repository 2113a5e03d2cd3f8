"""A team's own pipeline without touching the platform's code: ``lakehouse new`` writes a pipeline
folder (spec, code, sample data, suites, a test) among the team's pipelines, and it runs at once on
the sample data it generates.

The skeleton's own test (``test_<name>.py``, computed in plain Python from the landing files) is
run here, in this process's SparkSession, on the code as written and on a copy with a bug in
gold: it must pass on the first and fail on the second.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import pytest

from spark_jobs.cli import main
from spark_jobs.model.errors import UsageError
from testkit.lakes import example_copy

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _skeleton_test(folder: Path, name: str):
    """The test function of ``folder/test_<name>.py``, imported by its path."""
    spec = importlib.util.spec_from_file_location(
        f"skeleton_test_{folder.name}", folder / f"test_{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.test_sample_files_run_through_every_hop


def test_new_writes_a_pipeline_that_runs_at_once_and_whose_test_can_fail(
    spark, tmp_path, monkeypatch, capsys
):
    specs = tmp_path / "team" / "pipelines"
    example_copy(specs, "ad_events")
    monkeypatch.delenv("LAKEHOUSE_PIPELINES")
    assert main(["new", "orders"]) == 2 and "set LAKEHOUSE_PIPELINES" in capsys.readouterr().err
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(specs))
    monkeypatch.delenv("LAKEHOUSE_QUALITY")  # the suites go into the pipeline's own folder
    assert main(["new", "orders"]) == 0
    written = {
        str(Path(path).relative_to(specs))
        for path in capsys.readouterr().out.split()
        if "/team/" in path
    }
    assert written == {
        "orders/orders.yaml",
        "orders/orders.py",
        "orders/orders_transforms.py",
        "orders/orders_sample.py",
        "orders/test_orders.py",
        "orders/quality/bronze.json",
        "orders/quality/silver.json",
        "orders/quality/gold.json",
    }
    assert sorted(path.name for path in (specs / "orders").rglob("*") if path.is_file()) == sorted(
        Path(path).name for path in written
    )
    assert "__pipeline__" not in "".join(
        path.read_text() for path in (specs / "orders").rglob("*.*")
    )
    # Refusals change nothing: the name is taken; a name that cannot name modules and tables.
    before = sorted((tmp_path / "team").rglob("*"))
    assert main(["new", "orders"]) == 2 and "exists already" in capsys.readouterr().err
    assert main(["new", "ad_events"]) == 2 and "exists already" in capsys.readouterr().err
    assert main(["new", "Orders-2"]) == 2 and "is not allowed" in capsys.readouterr().err
    assert sorted((tmp_path / "team").rglob("*")) == before

    # The skeleton's own test: sample files, every hop with its quality gate, tables as computed.
    _skeleton_test(specs / "orders", "orders")(tmp_path / "run", monkeypatch)

    # The same with gold's sum turned into a max: its test must catch it.
    broken = tmp_path / "broken"
    shutil.copytree(specs / "orders", broken / "orders")
    code = (broken / "orders" / "orders_transforms.py").read_text()
    assert 'F.sum("amount")' in code
    (broken / "orders" / "orders_transforms.py").write_text(
        code.replace('F.sum("amount")', 'F.max("amount")')
    )
    with pytest.raises(AssertionError):
        _skeleton_test(broken / "orders", "orders")(tmp_path / "run-broken", monkeypatch)


def test_a_hop_without_a_transform_is_refused_before_any_query(spark, tmp_path, monkeypatch):
    from spark_jobs import service

    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(tmp_path / "pipelines"))
    monkeypatch.setenv("LAKEHOUSE_QUALITY", str(tmp_path / "quality"))
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "lake"))
    (tmp_path / "pipelines").mkdir()
    service.new("clicks")
    module = tmp_path / "pipelines" / "clicks" / "clicks.py"
    # gold's entry of TRANSFORMS taken out, however many lines it spans
    module.write_text(
        re.sub(r'\n    "gold": .*?(?=\n    "|\n\})', "", module.read_text(), flags=re.S)
    )
    service.generate("clicks", 50, seed=1)
    with pytest.raises(
        UsageError, match=f"^{module}: TRANSFORMS has no transform for hop gold: add `'gold'"
    ):
        service.run("clicks")
    assert (
        not (tmp_path / "lake" / "tables").exists()
        and not (tmp_path / "lake" / "checkpoints").exists()
    )


def test_new_with_csv_writes_a_pipeline_without_a_line_parser_whose_test_passes(
    spark, tmp_path, monkeypatch, capsys
):
    """``new --format csv``: the sample lands as CSV files with a header, the spec declares
    bronze's columns and the platform parses them; the pipeline module has no parser and no
    ``split_ingested``, and the skeleton's test (which reads the CSV files with Python's csv
    module) passes."""
    specs = tmp_path / "pipelines"
    specs.mkdir()
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(specs))
    assert main(["new", "readings", "--format", "csv"]) == 0
    code = (specs / "readings" / "readings.py").read_text()
    assert "split_ingested" not in code and "transforms.parse" not in code
    assert "format: csv" in (specs / "readings" / "readings.yaml").read_text()
    with pytest.raises(SystemExit) as refused:
        main(["new", "other", "--format", "xml"])
    assert refused.value.code == 2 and "invalid choice: 'xml'" in capsys.readouterr().err

    _skeleton_test(specs / "readings", "readings")(tmp_path / "run", monkeypatch)
    landed = list((tmp_path / "run" / "lake" / "landing" / "readings").glob("*"))
    assert landed and all(path.suffix == ".csv" for path in landed)
