"""``plugins/lakehouse_airflow/freshness.py``: a pipeline's ``freshness`` as the deadline alert of
its stream DAG, against the stream DAG the platform's DAG factory builds from a copy of the
example spec, and the alert's callback run by Airflow's own callback runner (what the executor
runs when the deadline passes) with the context Airflow's scheduler gives it, on a lake real runs
wrote (``tests/fixtures/lakes/``) whose commit times the test sets.

``test_airflow.py`` has the shipped spec's alert as the DAG processor parses it (its reference,
45 minutes, the callback's path and arguments) and none on the other DAGs; ``test_ui.py`` the
alert the callback writes on the Lakehouse page; ``test_alerts.py`` the mail it sends.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
from pathlib import Path

import pendulum
import pytest
import yaml

from testkit.lakes import FIXTURE_SPEC, fixture_lake, spec_copy
from testkit.paths import EXAMPLES

pytestmark = [pytest.mark.unit, pytest.mark.airflow]

PIPELINE = "ad_events"


def _stream_dag(folder: Path, monkeypatch, **changes):
    """The stream DAG of a copy of ad_events' spec with ``changes``, built by the DAG factory."""
    from lakehouse_airflow import dag_factory

    from spark_jobs.model.spec import get_spec

    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(spec_copy(folder, **changes)))
    return dag_factory.build_stream_dag(get_spec(PIPELINE))


def test_the_stream_dag_must_be_done_within_the_freshness_of_being_queued_or_has_no_deadline(
    airflow_in_process, tmp_path, monkeypatch
):
    from airflow.sdk import DeadlineReference

    [alert] = _stream_dag(tmp_path / "five", monkeypatch, freshness="5 minutes").deadline
    assert alert.reference == DeadlineReference.DAGRUN_QUEUED_AT
    assert alert.interval == dt.timedelta(seconds=5 * 60)
    assert (alert.callback.path, alert.callback.kwargs) == (
        "lakehouse_airflow.freshness.freshness_missed",
        {"pipeline": PIPELINE},
    )
    assert alert.name == "ad_events freshness 5 minutes"  # what Airflow's UI lists
    # a spec without `freshness`: nothing to judge
    assert not _stream_dag(tmp_path / "none", monkeypatch, freshness=None).deadline


def test_only_airflow_dags_test_builds_the_stream_dag_without_its_deadline(
    airflow_in_process, tmp_path, monkeypatch
):
    """``DAG.test()`` fails on a DAG with a deadline alert; the scheduler's and the DAG
    processor's DAG keeps it."""
    airflow = str(Path(sys.executable).parent / "airflow")
    import airflow as package

    module = str(Path(package.__file__).parent / "__main__.py")  # `python -m airflow`
    cases = (
        ([airflow, "dags", "test", "ad_events__stream", "2026-03-04"], 0),
        ([module, "dags", "test", "ad_events__stream", "2026-03-04"], 0),
        ([airflow, "dags", "reserialize"], 1),
        ([airflow, "scheduler"], 1),
    )
    for number, (argv, alerts) in enumerate(cases):
        monkeypatch.setattr(sys, "argv", argv)
        dag = _stream_dag(tmp_path / str(number), monkeypatch)
        assert len(dag.deadline or []) == alerts, argv


def _deadline_context(run_id: str) -> dict:
    """The context Airflow's scheduler gives a missed deadline's callback
    (``airflow.models.deadline.Deadline.handle_miss``): the run as the REST API's JSON."""
    from airflow.api_fastapi.core_api.datamodels.dag_run import DAGRunResponse
    from airflow.models import DagModel, DagRun
    from airflow.utils.state import DagRunState
    from airflow.utils.types import DagRunType

    queued = pendulum.now("UTC").subtract(minutes=50)
    run = DagRun(
        dag_id=f"{PIPELINE}__stream",
        run_id=run_id,
        run_type=DagRunType.SCHEDULED,
        state=DagRunState.RUNNING,
        queued_at=queued,
        logical_date=queued,
        run_after=queued,
        data_interval=(queued, queued),
    )
    run.dag_model = DagModel(dag_id=f"{PIPELINE}__stream")
    return {
        "dag_run": DAGRunResponse.model_validate(run).model_dump(mode="json"),
        "deadline": {"id": "a-deadline", "deadline_time": queued.add(minutes=45)},
    }


def _last_commits_aged(checkpoints: Path, ages: dict[str, float]) -> None:
    """Each hop's newest ``commits/N`` made ``ages[hop]`` seconds old."""
    for hop, age in ages.items():
        commits = checkpoints / hop / "commits"
        newest = max((path for path in commits.iterdir() if path.name.isdigit()), key=_number)
        then = time.time() - age
        os.utime(newest, (then, then))


def _number(path: Path) -> int:
    return int(path.name)


def test_a_missed_deadline_run_by_airflows_callback_runner_records_the_hops_stale_by_then(
    airflow_in_process, tmp_path, monkeypatch
):
    import structlog
    from airflow.sdk.execution_time.callback_supervisor import execute_callback

    lake = fixture_lake("history", tmp_path)
    home = Path(lake.home)
    monkeypatch.setenv("LAKEHOUSE_HOME", lake.home)
    monkeypatch.delenv("LAKEHOUSE_NOTIFIERS", raising=False)  # the log and the file only
    freshness = yaml.safe_load((EXAMPLES / PIPELINE / f"{PIPELINE}.yaml").read_text())["freshness"]
    assert freshness == "45 minutes"
    # the spec the lake was written with
    [alert] = _stream_dag(tmp_path / "pipelines", monkeypatch, **FIXTURE_SPEC).deadline

    def missed(run_id: str, ages: dict[str, float]) -> dict:
        """The deadline of stream run ``run_id`` missed, each hop's last commit ``ages`` old:
        the alert the callback wrote."""
        _last_commits_aged(home / "checkpoints" / PIPELINE, ages)
        kwargs = {**alert.callback.kwargs, "context": _deadline_context(run_id)}
        assert execute_callback(alert.callback.path, kwargs, "", None, structlog.get_logger()) == (
            True,
            None,
        )
        written = [
            json.loads(path.read_text()) for path in (home / "_ops" / "alerts" / PIPELINE).iterdir()
        ]
        [found] = [each for each in written if each["dag_run"] == run_id]
        assert (found["pipeline"], found["freshness"]) == (PIPELINE, freshness)
        assert found["commit_age_s"].keys() == ages.keys()
        for hop, age in ages.items():  # whole seconds of a file time, a moment later
            assert age - 1 <= found["commit_age_s"][hop] <= age + 5, (hop, found)
        return found

    # The run is late, but every hop committed a minute ago: nothing is stale yet.
    assert missed("scheduled__first", {"bronze": 60, "silver": 60, "gold": 60})["stale"] == []
    # Gold's last commit two hours old, past 45 minutes; silver's 44 minutes, within them.
    later = {"bronze": 60, "silver": 44 * 60, "gold": 2 * 3600}
    assert missed("scheduled__second", later)["stale"] == ["gold"]
    assert len(list((home / "_ops" / "alerts" / PIPELINE).iterdir())) == 2
