"""Alerts through Airflow's notifiers (plugins/lakehouse_airflow/alerts.py), each received by a
real SMTP server (aiosmtpd on 127.0.0.1) from the SMTP provider's real notifier. The stream
run whose gate fails, with the undo it did, is in tests/airflow/test_airflow.py (a real DAG
run); here a Spark task whose command refused (the spark-submit replaced: the one line it
printed becomes the task's error and the mail's), a missed freshness deadline, a notifier set
per pipeline in its spec, and a class that does not import."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace
from unittest import mock

import pytest
import yaml

from testkit.lakes import example_copy
from testkit.mail import SMTP_NOTIFIER, body, smtp_server

pytestmark = [pytest.mark.unit, pytest.mark.airflow]

REFUSAL = (
    "hop bronze now reads topic orders but its checkpoint was written reading landing files: a "
    "stream cannot go on from another source's offsets; start the hop over on its new source with "
    "`lakehouse refresh ad_events --hop bronze` (the hops below follow), or put the old "
    "source back in the spec"
)


def test_a_refused_run_fails_its_task_with_the_commands_line_and_mails_it(airflow_in_process):
    from airflow.providers.common.compat.sdk import AirflowException
    from lakehouse_airflow import dag_factory
    from lakehouse_airflow.alerts import task_failed

    from spark_jobs.model.spec import get_spec
    from testkit.airflow import execute_task

    # spark-submit's output, then its exit
    def refusing_submit(hook, application: str = "", **_kwargs) -> None:
        hook._process_spark_submit_log(iter(["starting\n", f"error: {REFUSAL}\n"]))
        raise AirflowException("Cannot execute: spark-submit ... Error code is: 2.")

    task = dag_factory.build_stream_dag(get_spec("ad_events")).get_task("bronze")
    with smtp_server() as (env, mails), mock.patch.dict(os.environ, env):
        with pytest.raises(AirflowException) as failed:
            execute_task(task, {"run_id": "scheduled__x", "params": {}}, refusing_submit)
        assert str(failed.value) == f"lakehouse run ad_events: {REFUSAL}"
        context = {
            "ti": SimpleNamespace(task_id="bronze", dag_id="ad_events__stream"),
            "dag_run": SimpleNamespace(run_id="scheduled__x"),
            "exception": failed.value,
        }
        callbacks = task.on_failure_callback
        # every task's, by default
        assert task_failed in (callbacks if isinstance(callbacks, list) else [callbacks])
        task_failed(context)
    assert [message["Subject"] for message in mails] == ["lakehouse ad_events: hop bronze failed"]
    text = body(mails[0])
    assert (
        "ad_events: hop bronze of ad_events__stream run scheduled__x failed: lakehouse run "
        "ad_events: hop bronze now reads topic orders"
        in text
        and "`lakehouse refresh ad_events --hop bronze`" in text
    )


def test_a_missed_deadline_is_mailed_and_a_spec_can_name_its_own_notifiers(
    airflow_in_process, tmp_path, monkeypatch
):
    from lakehouse_airflow.dag_factory import usable_specs
    from lakehouse_airflow.freshness import freshness_missed

    pipelines = tmp_path / "pipelines"
    spec_file = example_copy(pipelines, "ad_events") / "ad_events.yaml"
    spec = yaml.safe_load(spec_file.read_text())
    spec.update(
        freshness="5 minutes",
        notify=[
            {
                "class": SMTP_NOTIFIER,
                "to": "ads@example.com",
                "from_email": "airflow@example.com",
                "subject": "[ads] {subject}",
            }
        ],
    )
    spec_file.write_text(yaml.safe_dump(spec))
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(pipelines))
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "lake"))
    with smtp_server() as (env, mails), mock.patch.dict(os.environ, env):
        freshness_missed({"dag_run": {"dag_run_id": "scheduled__late"}}, pipeline="ad_events")
    assert [(message["To"], message["Subject"]) for message in mails] == [
        # the spec's, not the setting's
        ("ads@example.com", "[ads] lakehouse ad_events: freshness deadline missed")
    ]
    assert "(scheduled__late)" in body(mails[0]) and "`lakehouse status ad_events`" in body(
        mails[0]
    )

    # A class that does not import: the pipeline's DAGs are left out, one line naming it.
    spec["notify"] = [{"class": "airflow.providers.nowhere.Notifier", "to": "x"}]
    spec_file.write_text(yaml.safe_dump(spec))
    usable, problems = usable_specs()
    assert usable == [] and list(problems.values())[0].count("\n") == 0
    assert (
        "notifier class 'airflow.providers.nowhere.Notifier' in the spec's `notify`"
        in list(problems.values())[0]
    )
    monkeypatch.setenv("LAKEHOUSE_NOTIFIERS", json.dumps([{"class": "json.JSONDecoder"}]))
    spec.pop("notify")
    spec_file.write_text(yaml.safe_dump(spec))
    assert (
        "'json.JSONDecoder' in LAKEHOUSE_NOTIFIERS is not an Airflow notifier"
        in list(usable_specs()[1].values())[0]
    )
