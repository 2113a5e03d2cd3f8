"""A pipeline's ``freshness`` (spec) as Airflow's deadline alert on its stream DAG.

Airflow 3.3's deadline alerts judge DAG runs, not tables: the nearest native form of "a hop's
newest commit is older than its freshness" is "a stream DAG run not done ``freshness`` after it
was queued" (its hops commit when it ends). When that deadline passes, the scheduler's executor
calls :func:`freshness_missed` (a sync callback: no triggerer needed), which measures every
hop's commit age from the lake's files (no JVM), logs the stale ones and writes the alert to
``_ops/alerts/<pipeline>/``, where the Lakehouse page shows it beside the red mark it draws on
each stale hop.
"""

from __future__ import annotations

import datetime as dt
import inspect
import logging
import sys
from pathlib import Path

from airflow.sdk import DeadlineAlert, DeadlineReference, SyncCallback

from lakehouse_airflow.alerts import run_id_of, send
from spark_jobs import service
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import PipelineSpec

log = logging.getLogger(__name__)


def in_dag_test() -> bool:
    """True in ``airflow dags test``: Airflow 3.3.2's ``DAG.test()`` fails on a DAG with a deadline
    alert (its run loop looks the alerts up by id, and a DAG it serialized itself holds them as
    dicts), and nothing checks deadlines there anyway."""
    words = [word for word in sys.argv[1:] if not word.startswith("-")]
    program = Path(sys.argv[0])
    # `airflow ...`, or `python -m airflow ...` (whose program is airflow/__main__.py)
    airflow = program.name == "airflow" or program.parts[-2:] == ("airflow", "__main__.py")
    return airflow and words[:2] == ["dags", "test"]


def deadline(spec: PipelineSpec) -> DeadlineAlert | None:
    """The stream DAG's deadline alert (None when the spec sets no ``freshness``, and in
    :func:`in_dag_test`)."""
    if spec.freshness_s is None or in_dag_test():
        return None
    # Airflow 3.3 names an alert (its UI shows the name); 3.2's alerts take no name.
    named = "name" in inspect.signature(DeadlineAlert.__init__).parameters
    return DeadlineAlert(
        reference=DeadlineReference.DAGRUN_QUEUED_AT,
        interval=dt.timedelta(seconds=spec.freshness_s),
        callback=SyncCallback(freshness_missed, kwargs={"pipeline": spec.name}),
        **({"name": f"{spec.name} freshness {spec.freshness}"} if named else {}),
    )


def freshness_missed(context: dict | None = None, *, pipeline: str) -> str:
    """The deadline's callback: record which hops are stale now (``_ops/alerts/``), and log it.
    Returns the log line."""
    lake = Lake.named(pipeline)
    view = service.pipeline_overview(lake)
    ages = {hop["hop"]: hop["freshness"]["last_commit_age_s"] for hop in view["hops"]}
    alert = {
        "pipeline": pipeline,
        "dag_run": run_id_of((context or {}).get("dag_run")) or None,
        "at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "freshness": lake.spec.freshness,
        "stale": [hop["hop"] for hop in view["hops"] if hop["freshness"]["stale"]],
        "commit_age_s": ages,
    }
    service.write_alert(lake, alert)
    message = (
        f"{pipeline}: a stream run was not done within {lake.spec.freshness} of being queued "
        f"({alert['dag_run']}); stale hops: {', '.join(alert['stale']) or 'none yet'}"
    )
    send(
        lake.spec,
        f"lakehouse {pipeline}: freshness deadline missed",
        message + f": see the stream DAG's last runs and `lakehouse status {pipeline}`",
        context,
        ", ".join(alert["stale"]),
        alert["dag_run"] or "",
    )
    return message
