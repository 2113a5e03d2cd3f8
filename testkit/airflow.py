"""Airflow in the test process: a DAG run by ``dag.test()`` or one task executed, the Spark
tasks' commands run by the CLI in this process; and Airflow's REST API of a running platform."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest


def _submit_in_this_process(hook, application: str = "", **_kwargs) -> None:
    """``SparkSubmitHook.submit`` for :func:`dag_test`: the command the real hook built, run by
    the CLI in this process's SparkSession instead of a spark-submit child (whose argv
    ``test_operators.py`` checks, and which the real ``airflow dags test`` runs use)."""
    from airflow.exceptions import AirflowException

    from spark_jobs.cli import main

    argv = hook._build_spark_submit_command(application)
    with pytest.MonkeyPatch.context() as patch:
        for key, value in (hook._env or {}).items():
            patch.setenv(key, value)
        try:
            code = main(argv[argv.index(application) + 1 :])
        except SystemExit as exit_:
            code = exit_.code
    if code != 0:
        raise AirflowException(f"Cannot execute: {argv}. Error code is: {code}.")


def dag_test(
    dag_id: str, logical_date: str | None = None, conf: dict | None = None
) -> tuple[str, str, dict[str, str]]:
    """Run one DAG run with ``dag.test()`` in this process (needs the ``airflow_in_process``
    fixture): Airflow's own dependency and trigger-rule loop, XCom and templates, with the Spark
    tasks' CLI commands run here (see :func:`_submit_in_this_process`). The run's id, its state
    and each task's state."""
    from unittest import mock

    import pendulum
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from lakehouse_airflow.dag_factory import build_all

    dag = build_all()[dag_id]
    # as under `airflow dags test` (lakehouse_airflow.freshness.in_dag_test says why)
    dag.deadline = None
    date = pendulum.parse(logical_date, tz="UTC") if logical_date else None
    with (
        mock.patch.object(SparkSubmitHook, "submit", _submit_in_this_process),
        mock.patch.dict(os.environ, {"LAKEHOUSE_DRIVER": "task"}),
    ):
        run = dag.test(logical_date=date, run_conf=conf)
    return (
        run.run_id,
        str(run.state),
        {ti.task_id: str(ti.state) for ti in run.get_task_instances()},
    )


def task_in_process(dag_id: str, task_id: str, context: dict) -> None:
    """Execute one task as a re-run of its task instance would, its CLI command run in this
    process (needs ``airflow_in_process``)."""
    from lakehouse_airflow.dag_factory import build_all

    execute_task(build_all()[dag_id].get_task(task_id), context, _submit_in_this_process)


def execute_task(task, context: dict, submit) -> None:
    """Render ``task``'s templates with ``context`` (and its DAG) and execute it, with
    ``SparkSubmitHook.submit`` replaced by ``submit``."""
    from unittest import mock

    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    task.render_template_fields({"dag": task.dag, **context})
    # Each task submits its own application (the shared driver's tests:
    # tests/airflow/test_driver.py).
    with (
        mock.patch.object(SparkSubmitHook, "submit", submit),
        mock.patch.dict(os.environ, {"LAKEHOUSE_DRIVER": "task"}),
    ):
        task.execute(context)


class Api:
    """Airflow's REST API of a running platform, as one user."""

    def __init__(self, base: str, user: str, password: str):
        self.base = base
        body = json.dumps({"username": user, "password": password}).encode()
        request = urllib.request.Request(
            f"{base}/auth/token",
            data=body,
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        self.token = json.load(urllib.request.urlopen(request, timeout=30))["access_token"]

    def call(self, method: str, path: str, body: dict | None = None, api: str = "/api/v2") -> dict:
        """``api``: the REST API's prefix, or ``/ui`` for the routes Airflow's own pages read."""
        request = urllib.request.Request(
            f"{self.base}{api}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)

    def wait_for_run(self, dag_id: str, run_id: str, timeout_s: float = 600) -> str:
        quoted = urllib.parse.quote(run_id, safe="")
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            state = self.call("GET", f"/dags/{dag_id}/dagRuns/{quoted}")["state"]
            if state in ("success", "failed"):
                return state
            # a run's end is seen within a second (a poll costs the API server milliseconds)
            time.sleep(1)
        tasks = self.call("GET", f"/dags/{dag_id}/dagRuns/{quoted}/taskInstances")["task_instances"]
        raise AssertionError(
            f"{dag_id} {run_id} did not finish: {[(t['task_id'], t['state']) for t in tasks]}"
        )

    def wait_for_arrival_run(self, dag_id: str, timeout_s: float = 300) -> tuple[dict, dict]:
        """Wait for a successful run of ``dag_id`` that an asset watcher's event started (no DAG
        made the event: the arrival trigger's); the run and that event."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            for run in self.call("GET", f"/dags/{dag_id}/dagRuns?limit=50")["dag_runs"]:
                if run["run_type"] != "asset_triggered":
                    continue
                assert run["state"] != "failed", run
                if run["state"] == "success":
                    events = self.upstream_events(dag_id, run["dag_run_id"])
                    watched = [event for event in events if event["extra"].get("from_trigger")]
                    assert watched, events
                    return run, watched[0]
            time.sleep(2)
        runs = self.call("GET", f"/dags/{dag_id}/dagRuns?limit=50")["dag_runs"]
        raise AssertionError(
            f"no run of {dag_id} on arrival: its runs "
            f"{[(run['dag_run_id'], run['run_type'], run['state']) for run in runs]}"
        )

    def upstream_events(self, dag_id: str, run_id: str) -> list[dict]:
        """The asset events the run ``run_id`` of ``dag_id`` consumed."""
        quoted = urllib.parse.quote(run_id, safe="")
        return self.call("GET", f"/dags/{dag_id}/dagRuns/{quoted}/upstreamAssetEvents")[
            "asset_events"
        ]

    def runs_on_events_of(self, dag_id: str, *sources: tuple[str, str]) -> list[tuple[dict, dict]]:
        """The runs of ``dag_id`` that an asset event of one of ``sources`` (DAG id, run id)
        triggered, each with that event.
        """
        found = []
        for run in self.call("GET", f"/dags/{dag_id}/dagRuns?limit=50")["dag_runs"]:
            events = self.upstream_events(dag_id, run["dag_run_id"])
            found += [
                (run, event)
                for event in events
                if (event["source_dag_id"], event["source_run_id"]) in sources
            ]
        return found

    def wait_for_asset_run(
        self, dag_id: str, *sources: tuple[str, str], timeout_s: float = 300
    ) -> dict:
        """Wait for a successful run of ``dag_id`` triggered by an asset event of one of ``sources``
        (DAG id, run id; the first one's events and gate logs are shown when none
        came); that event."""
        source_dag, source_run = sources[0]
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            for run, event in self.runs_on_events_of(dag_id, *sources):
                assert run["state"] != "failed", run
                if run["state"] == "success":
                    return event
            time.sleep(3)
        quoted = urllib.parse.quote(source_run, safe="")
        runs = [
            (run["dag_run_id"], run["state"])
            for run in self.call("GET", f"/dags/{dag_id}/dagRuns?limit=50")["dag_runs"]
        ]
        events = self.call("GET", f"/assets/events?source_run_id={quoted}")["asset_events"]
        tasks = self.call("GET", f"/dags/{source_dag}/dagRuns/{quoted}/taskInstances")[
            "task_instances"
        ]
        logs = [
            self.log_lines(source_dag, source_run, task["task_id"], max(task["try_number"], 1))
            for task in tasks
            if task["task_id"].startswith("gate_")
        ]
        raise AssertionError(
            f"no run of {dag_id} after an asset event of {source_dag} {source_run}: its runs "
            f"{runs}; the source run's events {[(e['asset_id'], e['extra']) for e in events]}; "
            + "\n".join(line for log in logs for line in log[-15:])
        )

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        """What the UI shows of a task's log so far (empty before the task wrote any)."""
        quoted = urllib.parse.quote(run_id, safe="")
        try:
            return json.dumps(
                self.call(
                    "GET",
                    f"/dags/{dag_id}/dagRuns/{quoted}/taskInstances/{task_id}/logs/{try_number}",
                )
            )
        except urllib.error.HTTPError as error:
            if error.code != 404:
                raise
            return ""

    def log_lines(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> list[str]:
        """A task's log, one line per event, under a header naming the task."""
        log = self.task_log(dag_id, run_id, task_id, try_number)
        content = json.loads(log)["content"] if log else []
        return [
            f"--- {task_id}:",
            *(
                entry.get("event", "") if isinstance(entry, dict) else str(entry)
                for entry in content
            ),
        ]

    def failures(self, dag_id: str, run_id: str, lines: int = 30) -> str:
        """A failed run's failed tasks, each with the end of its log (an assertion's message)."""
        quoted = urllib.parse.quote(run_id, safe="")
        tasks = self.call("GET", f"/dags/{dag_id}/dagRuns/{quoted}/taskInstances")["task_instances"]
        report = [f"{dag_id} {run_id}: {[(task['task_id'], task['state']) for task in tasks]}"]
        for task in tasks:
            if task["state"] in ("failed", "upstream_failed", "up_for_retry"):
                log = self.log_lines(dag_id, run_id, task["task_id"], max(task["try_number"], 1))
                report += [log[0], *log[1:][-lines:]]
        return "\n".join(report)

    def task_state(self, dag_id: str, run_id: str, task_id: str) -> str | None:
        quoted = urllib.parse.quote(run_id, safe="")
        return self.call("GET", f"/dags/{dag_id}/dagRuns/{quoted}/taskInstances/{task_id}")["state"]
