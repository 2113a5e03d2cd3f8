"""``spark_jobs/model/origin.py``: who asked for a command and through which interface, from the
environment Airflow's task runner gives a task or from the origin a task sent (no JVM)."""

from __future__ import annotations

import getpass

import pytest

from spark_jobs.model.origin import current, from_environment, given

pytestmark = pytest.mark.unit


def test_outside_airflow_a_command_comes_from_the_cli_as_the_account_it_runs_as():
    assert from_environment({"HOME": "/root"}) == {"interface": "cli", "user": getpass.getuser()}


def test_in_an_airflow_task_the_origin_names_its_dag_run_task_and_try():
    task = {
        "AIRFLOW_CTX_DAG_ID": "ad_events__stream",
        "AIRFLOW_CTX_DAG_RUN_ID": "scheduled__2026-03-04T00:00:00+00:00",
        "AIRFLOW_CTX_TASK_ID": "silver",
        "AIRFLOW_CTX_TRY_NUMBER": "2",
        "AIRFLOW_CTX_DAG_OWNER": "lakehouse",  # not part of an origin
    }
    assert from_environment(task) == {
        "interface": "airflow",
        "user": getpass.getuser(),
        "dag_id": "ad_events__stream",
        "dag_run_id": "scheduled__2026-03-04T00:00:00+00:00",
        "task_id": "silver",
        "try_number": "2",
    }


def test_a_given_origin_holds_inside_its_block_only_and_blocks_nest(monkeypatch):
    for name in ("AIRFLOW_CTX_DAG_ID", "AIRFLOW_CTX_DAG_RUN_ID", "AIRFLOW_CTX_TASK_ID"):
        monkeypatch.delenv(name, raising=False)
    sent = {"interface": "airflow", "user": "airflow", "dag_id": "d", "task_id": "gold"}
    assert current()["interface"] == "cli"
    with given(sent):
        assert current() == sent
        assert current("run") == {**sent, "command": "run"}
        assert current() == sent  # naming the command changes nothing kept
        with given({"interface": "cli", "user": "x"}):
            assert current("rollback") == {"interface": "cli", "user": "x", "command": "rollback"}
        assert current() == sent
        with given(None):  # none sent: the environment's
            assert current()["interface"] == "cli"
    assert current()["interface"] == "cli"
