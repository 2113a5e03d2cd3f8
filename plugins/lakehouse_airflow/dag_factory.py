"""Build each pipeline's DAGs from its spec (DESIGN.md section 7).

Only wiring happens here: the spec is plain YAML, operators resolve jars and paths when
they execute. DAG ids: ``<pipeline>__stream`` and ``<pipeline>__backfill``.
"""

from __future__ import annotations

import datetime as dt

import pendulum
from airflow.providers.standard.operators.python import ShortCircuitOperator
from airflow.sdk import DAG, Param
from airflow.timetables.interval import CronDataIntervalTimetable

from lakehouse_airflow.checks import has_new_data
from lakehouse_airflow.operators import LakehouseSparkOperator
from spark_jobs.spec import PipelineSpec, list_specs

_ISO = r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?$"
RUN_ID_ARG = "{{ run_id }}"
DEFAULT_ARGS = {"owner": "lakehouse", "retries": 1, "retry_delay": dt.timedelta(seconds=30)}

STREAM_DOC = """\
### {name}: run-once streaming

Every `{schedule}`, each hop ({hops}) runs as a Structured Streaming query with
`trigger(availableNow=True)`: it processes everything new since its last run, commits to its
checkpoint and Delta table, and stops, so no cluster sits idle between runs.
`check_new_data` reads the checkpoint and landing listings as plain files (no JVM) and skips
the Spark jobs when nothing is new.

{description}
"""

BACKFILL_DOC = """\
### {name}: batch backfill over the same code

One run per daily data interval recomputes that day (`[data_interval_start,
data_interval_end)`) with `spark.read` and the same transforms as the stream, overwriting
exactly that range (`replaceWhere`), so re-running is harmless and the streaming checkpoints
are never touched. Use Airflow's backfill (UI or `airflow backfill create`) for a date
range, or trigger with `start`/`end` params for any range.
"""


def _start_date(text: str) -> pendulum.DateTime:
    return pendulum.parse(text, tz="UTC")


def build_stream_dag(spec: PipelineSpec) -> DAG:
    with DAG(
        dag_id=f"{spec.name}__stream",
        schedule=spec.schedule,
        start_date=_start_date(spec.backfill_start),
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        doc_md=STREAM_DOC.format(name=spec.name, schedule=spec.schedule, hops=", ".join(spec.hop_names),
                                 description=spec.description),
        tags=["lakehouse", spec.name, "stream"],
    ) as dag:
        previous = ShortCircuitOperator(
            task_id="check_new_data", python_callable=has_new_data, op_kwargs={"pipeline": spec.name}, retries=0
        )
        for hop in spec.hops:
            task = LakehouseSparkOperator(
                task_id=hop.name,
                command="run",
                pipeline=spec.name,
                arguments=["--hop", hop.name, "--run-id", RUN_ID_ARG],
                doc_md=f"Run-once (`availableNow`) of hop `{hop.name}` into `{hop.table}`.",
            )
            previous >> task
            previous = task
    return dag


def build_backfill_dag(spec: PipelineSpec) -> DAG:
    start = "{{ params.start or data_interval_start.strftime('%Y-%m-%dT%H:%M:%S') }}"
    end = "{{ params.end or data_interval_end.strftime('%Y-%m-%dT%H:%M:%S') }}"
    with DAG(
        dag_id=f"{spec.name}__backfill",
        # A data-interval timetable: each run covers [day, next day). A plain "@daily" is a
        # trigger timetable in Airflow 3, whose runs have empty intervals.
        schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
        start_date=_start_date(spec.backfill_start),
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        doc_md=BACKFILL_DOC.format(name=spec.name),
        tags=["lakehouse", spec.name, "backfill"],
        params={
            "start": Param(None, type=["null", "string"], pattern=_ISO,
                           description="Range start (UTC, ISO-8601); empty: the run's data interval"),
            "end": Param(None, type=["null", "string"], pattern=_ISO,
                         description="Range end, exclusive (UTC, ISO-8601); empty: the run's data interval"),
        },
    ) as dag:
        previous = None
        for hop in spec.hops:
            task = LakehouseSparkOperator(
                task_id=hop.name,
                command="backfill",
                pipeline=spec.name,
                arguments=["--hop", hop.name, "--start", start, "--end", end, "--run-id", RUN_ID_ARG],
                doc_md=f"Batch recompute of hop `{hop.name}` over the range, into `{hop.table}`.",
            )
            if previous is not None:
                previous >> task
            previous = task
    return dag


def build_all() -> dict[str, DAG]:
    """Every DAG of every pipeline spec, by DAG id."""
    dags: dict[str, DAG] = {}
    for spec in list_specs():
        for dag in (build_stream_dag(spec), build_backfill_dag(spec)):
            dags[dag.dag_id] = dag
    return dags
