"""Build each pipeline's DAGs from its spec (docs/guides/airflow.md).

Only wiring happens here: the spec is plain YAML, operators resolve jars and paths when they
execute. DAG ids: ``<pipeline>__stream``, ``<pipeline>__backfill``, ``<pipeline>__rollback``,
``<pipeline>__refresh`` and ``<pipeline>__maintenance``. A spec that cannot become DAGs is left out
(:func:`usable_specs`) and reported by ``dags/lakehouse_spec_errors.py``.
"""

from __future__ import annotations

import datetime as dt

import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.providers.standard.operators.python import PythonOperator, ShortCircuitOperator
from airflow.sdk import DAG, Param

from lakehouse_airflow.alerts import notifier_classes, task_failed, undone
from lakehouse_airflow.arrival import arrival_schedule
from lakehouse_airflow.assets import reads, table_asset
from lakehouse_airflow.checks import (
    has_new_data,
    plan_refresh,
    plan_rollback,
    plan_undo,
    verify_rollback,
)
from lakehouse_airflow.freshness import deadline
from lakehouse_airflow.operators import LakehouseSparkOperator, QualityGateOperator
from lakehouse_airflow.timetables import BackfillOnlyTimetable
from lakehouse_airflow.versions import check_airflow
from spark_jobs.model.spec import HopSpec, PipelineSpec, scan_specs

_ISO = r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?$"
RUN_ID_ARG = "{{ run_id }}"
# A scheduled backfill run's Airflow id can equal a stream run's (the backfill of day D and the
# stream's midnight run of D are both `scheduled__D`): backfill records name their DAG too, so
# neither run's records overwrite the other's.
BACKFILL_RUN_ID_ARG = "{{ dag.dag_id }}__{{ run_id }}"
_RUN_ID = r"^[A-Za-z0-9_.:+-]{1,200}$"
# Writers of a pipeline take its lock; a task waits this long for another writer to finish.
WAIT = {"wait_s": 900}
# Every task's failure reaches the pipeline's notifiers (lakehouse_airflow/alerts.py).
DEFAULT_ARGS = {
    "owner": "lakehouse",
    "retries": 1,
    "retry_delay": dt.timedelta(seconds=30),
    "on_failure_callback": task_failed,
}

STREAM_DOC = """\
### {name}: run-once streaming

{cadence}, each hop ({hops}) runs as a Structured Streaming query with
`trigger(availableNow=True)`: it processes everything new since its last run, commits to its
checkpoint and Delta table, and stops, so no cluster sits idle between runs.
`check_new_data` reads the checkpoint and landing listings as plain files (no JVM) and skips
the Spark jobs when nothing is new.

Each hop checks its Great Expectations suite on the rows it wrote, and its `gate_<hop>` task
fails when a rule with policy `fail` failed (the Data Docs page is the task's extra link).
A failed gate stops the hops below; `plan_undo` and `undo` then roll this run's batches of
that hop (and of the hops below that read them) back, and the run ends failed
(`all_gates_passed` is not reached).

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


def _cadence(spec: PipelineSpec) -> str:
    """When the stream DAG runs, for its documentation."""
    cadence = spec.cadence[0].upper() + spec.cadence[1:]
    if not spec.on_arrival:
        return cadence
    return (
        f"{cadence}: new landing files or topic records (asset "
        f"`{spec.name}.arrivals`, watched by the triggerer)"
    )


def _start_date(text: str) -> pendulum.DateTime:
    return pendulum.parse(text, tz="UTC")


def _hop_and_gate(
    spec: PipelineSpec, hop: HopSpec
) -> tuple[LakehouseSparkOperator, QualityGateOperator]:
    """A hop's run-once task and its gate in the stream DAG (the gate is the table's producer)."""
    task = LakehouseSparkOperator(
        task_id=hop.name,
        command="run",
        pipeline=spec.name,
        options={"hop": hop.name, "run_id": RUN_ID_ARG, "quality": "report", **WAIT},
        shares_driver=True,
        releases_driver=hop is spec.sink,
        # A gate above ends skipped when its run wrote no row (no asset event): the hop runs
        # all the same, since it may have work of its own (another upstream, a replay).
        trigger_rule="all_success" if hop.ingests else "none_failed",
        doc_md=(
            f"Run-once (`availableNow`) of hop `{hop.name}` into `{hop.table}`, "
            "then its quality check."
        ),
    )
    gate = QualityGateOperator(
        task_id=f"gate_{hop.name}",
        pipeline=spec.name,
        hop=hop.name,
        run_id=RUN_ID_ARG,
        retries=0,
        inlets=reads(spec, hop),
        outlets=[table_asset(spec, hop.name)],
        doc_md=(
            f"Fails when a `fail` rule of `{hop.name}`'s suite failed on the rows this run wrote; "
            f"when it passes and the run wrote rows, `{spec.name}.{hop.name}` (the table's asset) "
            "gets an event, and when the run wrote none it ends skipped (no event)."
        ),
    )
    return task, gate


def build_stream_dag(spec: PipelineSpec) -> DAG:
    with DAG(
        dag_id=f"{spec.name}__stream",
        schedule=arrival_schedule(spec) if spec.on_arrival else spec.schedule,
        start_date=_start_date(spec.backfill_start),
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        deadline=deadline(spec),
        doc_md=STREAM_DOC.format(
            name=spec.name,
            cadence=_cadence(spec),
            hops=", ".join(spec.hop_names),
            description=spec.description,
        ),
        tags=["lakehouse", spec.name, "stream"],
    ) as dag:
        check = ShortCircuitOperator(
            task_id="check_new_data",
            python_callable=has_new_data,
            op_kwargs={"pipeline": spec.name},
            retries=0,
        )
        # Hops as their spec's graph: an ingest hop after the check, any other after its
        # upstreams' gates.
        gates = {}
        for hop in spec.hops:
            task, gate = _hop_and_gate(spec, hop)
            (
                (check if hop.ingests else [gates[upstream] for upstream in hop.upstreams])
                >> task
                >> gate
            )
            gates[hop.name] = gate
        undo_hop = "ti.xcom_pull(task_ids='plan_undo')"
        planned = PythonOperator(
            task_id="plan_undo",
            python_callable=plan_undo,
            trigger_rule="one_failed",
            retries=0,
            op_kwargs={"pipeline": spec.name, "run_id": RUN_ID_ARG},
        )
        undo = LakehouseSparkOperator(
            task_id="undo",
            command="rollback",
            pipeline=spec.name,
            options={
                "hop": "{{ %s }}" % undo_hop,
                "to_run": RUN_ID_ARG,
                "cascade": True,
                **WAIT,
            },
            shares_driver=True,
            releases_driver=True,
            retries=0,
            on_success_callback=undone,
            doc_md=(
                "Roll back this run's batches of the hop whose gate failed, and of the hops below."
            ),
        )
        list(gates.values()) >> planned >> undo
        # After the gates of the graph's leaves: when a hop or gate failed, a leaf's gate is
        # failed or upstream_failed, so the DAG run ends failed even after `undo` succeeded.
        [gates[hop.name] for hop in spec.hops if not spec.feeds(hop.name)] >> EmptyOperator(
            task_id="all_gates_passed", trigger_rule="none_failed"
        )
    return dag


def build_backfill_dag(spec: PipelineSpec) -> DAG:
    start = "{{ params.start or data_interval_start.strftime('%Y-%m-%dT%H:%M:%S') }}"
    end = "{{ params.end or data_interval_end.strftime('%Y-%m-%dT%H:%M:%S') }}"
    with DAG(
        dag_id=f"{spec.name}__backfill",
        # A data-interval timetable: each run covers [day, next day) (a plain "@daily" is a
        # trigger timetable in Airflow 3, whose runs have empty intervals); for backfills and
        # manual runs only, the scheduler makes none of its own.
        schedule=BackfillOnlyTimetable("@daily", timezone="UTC"),
        start_date=_start_date(spec.backfill_start),
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        doc_md=BACKFILL_DOC.format(name=spec.name),
        tags=["lakehouse", spec.name, "backfill"],
        params={
            "start": Param(
                None,
                type=["null", "string"],
                pattern=_ISO,
                description="Range start (UTC, ISO-8601); empty: the run's data interval",
            ),
            "end": Param(
                None,
                type=["null", "string"],
                pattern=_ISO,
                description="Range end, exclusive (UTC, ISO-8601); empty: the run's data interval",
            ),
        },
    ) as dag:
        tasks = {}
        for hop in spec.hops:
            task = LakehouseSparkOperator(
                task_id=hop.name,
                command="backfill",
                pipeline=spec.name,
                # `--flag=value`: a value can never be taken for another flag.
                options={
                    "hop": hop.name,
                    "start": start,
                    "end": end,
                    "run_id": BACKFILL_RUN_ID_ARG,
                    **WAIT,
                },
                shares_driver=True,
                releases_driver=hop is spec.sink,
                inlets=reads(spec, hop),
                outlets=[table_asset(spec, hop.name)],
                announces=hop.name,
                # a hop above that wrote no row in the range ends skipped
                trigger_rule="none_failed",
                doc_md=(
                    f"Batch recompute of hop `{hop.name}` over the range, into "
                    f"`{hop.table}` (its quality gate "
                    f"included); an event on `{spec.name}.{hop.name}` when it wrote rows, "
                    "skipped when it wrote none."
                ),
            )
            [tasks[upstream] for upstream in hop.upstreams] >> task
            tasks[hop.name] = task
    return dag


ROLLBACK_DOC = """\
### {name}: roll back to a chosen batch and replay

Undo a hop's batches after a target (a batch id, a run id, or a time), and by default the
batches of the hops below that read them, so the next run of `{name}__stream` replays them
exactly once. `plan` prints what will be undone, which table versions are restored and what
will be read again (also in XCom `plan`), and starts no JVM. With `dry_run` on (the default)
nothing changes; turn it off to let `execute` restore the tables and rewind the checkpoints,
then `verify` checks the result. A rollback waits for a running job of the pipeline. With
`replan` on, the next run plans the undone data afresh (with what arrived since) instead of
replaying each undone batch as it was logged; with `exact` on, the rollback is refused (nothing
changes) unless every hop replays its undone batches as logged, and the plan says why one cannot.
"""


def _manual_dag(spec: PipelineSpec, kind: str, doc: str, params: dict) -> DAG:
    """A DAG the user triggers (no schedule, one run at a time, no retries):
    ``<pipeline>__<kind>``.
    """
    return DAG(
        dag_id=f"{spec.name}__{kind}",
        schedule=None,
        start_date=_start_date(spec.backfill_start),
        catchup=False,
        max_active_runs=1,
        default_args={**DEFAULT_ARGS, "retries": 0},
        doc_md=doc.format(name=spec.name),
        tags=["lakehouse", spec.name, kind],
        params=params,
    )


def build_rollback_dag(spec: PipelineSpec) -> DAG:
    plan = "ti.xcom_pull(task_ids='plan', key='plan')"
    with _manual_dag(
        spec,
        "rollback",
        ROLLBACK_DOC,
        {
            "hop": Param(
                spec.hop_names[0],
                type="string",
                enum=list(spec.hop_names),
                description="Hop to roll back",
            ),
            "to_batch": Param(
                None,
                type=["null", "integer"],
                minimum=-1,
                description="Last batch to keep (-1: none); or use to_run / to_time",
            ),
            "to_run": Param(
                None,
                type=["null", "string"],
                pattern=_RUN_ID,
                description="Undo this run and later ones",
            ),
            "to_time": Param(
                None,
                type=["null", "string"],
                pattern=_ISO,
                description="Keep batches committed by this time (UTC, ISO-8601)",
            ),
            "cascade": Param(
                True,
                type="boolean",
                description="Also undo the hops below that read the undone data",
            ),
            "replan": Param(
                False,
                type="boolean",
                description="The next run plans the undone data afresh with what "
                "arrived since, instead of replaying each undone batch as it was logged",
            ),
            "exact": Param(
                False,
                type="boolean",
                description="Refuse unless every hop replays its undone batches "
                "as logged (the plan says why one cannot)",
            ),
            "dry_run": Param(True, type="boolean", description="Only plan: change nothing"),
        },
    ) as dag:
        planned = ShortCircuitOperator(
            task_id="plan", python_callable=plan_rollback, op_kwargs={"pipeline": spec.name}
        )
        execute = LakehouseSparkOperator(
            task_id="execute",
            command="rollback",
            pipeline=spec.name,
            options={
                "hop": "{{ params.hop }}",
                "to_batch": "{{ %s['requested_batch'] }}" % plan,
                "cascade": "{{ params.cascade }}",
                "replan": "{{ params.replan }}",
                "exact": "{{ params.exact }}",
                **WAIT,
            },
            doc_md=(
                "Restore the tables and rewind the checkpoints as planned (a Spark application)."
            ),
        )
        verify = PythonOperator(
            task_id="verify", python_callable=verify_rollback, op_kwargs={"pipeline": spec.name}
        )
        planned >> execute >> verify
    return dag


REFRESH_DOC = """\
### {name}: recompute a hop with the code as it is now

After a change of a hop's code or spec that its checkpoint's state cannot follow (`{name}__stream`
then fails naming this fix), or to recompute results an earlier version of the code got wrong:
`plan` rolls the hop and every hop below it back (to the start, or to the batches committed by
`from_time`) and shows the plan (XCom `plan`); with `dry_run` off, `refresh` restores the tables,
rewinds the checkpoints (from `from_time`, a hop whose state the change cannot follow has its
state rebuilt there with the current code) and runs those hops with the current code (a Spark
application), and `verify` checks the rollback's journal. The same as
`lakehouse refresh {name} --hop HOP [--from TIME]`.
"""


def build_refresh_dag(spec: PipelineSpec) -> DAG:
    with _manual_dag(
        spec,
        "refresh",
        REFRESH_DOC,
        {
            "hop": Param(
                spec.hop_names[0],
                type="string",
                enum=list(spec.hop_names),
                description="Hop to recompute (the hops below follow)",
            ),
            "from_time": Param(
                None,
                type=["null", "string"],
                pattern=_ISO,
                description=(
                    "Keep the batches committed by this time (UTC, ISO-8601); empty: from the start"
                ),
            ),
            "dry_run": Param(True, type="boolean", description="Only plan: change nothing"),
        },
    ) as dag:
        planned = ShortCircuitOperator(
            task_id="plan", python_callable=plan_refresh, op_kwargs={"pipeline": spec.name}
        )
        refresh = LakehouseSparkOperator(
            task_id="refresh",
            command="refresh",
            pipeline=spec.name,
            options={
                "hop": "{{ params.hop }}",
                "from_time": "{{ params.from_time or '' }}",
                **WAIT,
            },
            doc_md=(
                "Roll back as planned, then run the hops with the current code "
                "(a Spark application)."
            ),
        )
        verify = PythonOperator(
            task_id="verify", python_callable=verify_rollback, op_kwargs={"pipeline": spec.name}
        )
        planned >> refresh >> verify
    return dag


MAINTENANCE_DOC = """\
### {name}: table maintenance

Daily: compacts each table's small files (Delta OPTIMIZE, on tables with `compact_min_files` files
or more) and deletes the files no rollback inside the window and no stream reading the table
still needs, then archives or deletes expired landing files and old records (`retention`), under
the pipeline's lock (the same as `lakehouse maintain {name}`). Its record is
in `_ops/maintenance/{name}/`; `lakehouse status {name}` shows the last one.
"""


def build_maintenance_dag(spec: PipelineSpec) -> DAG:
    with DAG(
        dag_id=f"{spec.name}__maintenance",
        schedule="@daily",
        start_date=_start_date(spec.backfill_start),
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        doc_md=MAINTENANCE_DOC.format(name=spec.name),
        tags=["lakehouse", spec.name, "maintenance"],
    ) as dag:
        LakehouseSparkOperator(
            task_id="maintain",
            command="maintain",
            pipeline=spec.name,
            options=WAIT,
            doc_md="Compact and vacuum every table of the pipeline (a Spark application).",
        )
    return dag


def _check_buildable(spec: PipelineSpec) -> None:
    """What Airflow would refuse when building the spec's DAGs: its schedule, its backfill start
    and its notifiers' classes."""
    from airflow.timetables.trigger import CronTriggerTimetable

    checks = [("backfill_start", spec.backfill_start, lambda: _start_date(spec.backfill_start))]
    if spec.schedule not in (None, "@once", "@continuous"):
        checks.append(
            (
                "schedule",
                spec.schedule,
                lambda: CronTriggerTimetable(spec.schedule, timezone="UTC").validate(),
            )
        )
    for key, value, check in checks:
        try:
            check()
        except Exception as error:  # Airflow's and pendulum's own errors for a bad cron or date
            raise ValueError(
                f"{key} {value!r} is refused ({type(error).__name__}: {error}): fix it in the spec"
            ) from None
    notifier_classes(spec)  # each notifier imports: its ValueError names the class


def usable_specs() -> tuple[list[PipelineSpec], dict[str, str]]:
    """The specs whose DAGs can be built, and the problem of every other spec file (by path)."""
    specs, problems = scan_specs()
    usable = []
    for spec in specs:
        try:
            _check_buildable(spec)
        except ValueError as error:
            problems[str(spec.source)] = f"{spec.source}: {error}"
        else:
            usable.append(spec)
    return usable, problems


# The DAGs of every pipeline, ``<pipeline>__<kind>`` (the Lakehouse tab of each shows its pipeline).
BUILDERS = {
    "stream": build_stream_dag,
    "backfill": build_backfill_dag,
    "rollback": build_rollback_dag,
    "refresh": build_refresh_dag,
    "maintenance": build_maintenance_dag,
}
DAG_KINDS = tuple(BUILDERS)


def build_all() -> dict[str, DAG]:
    """Every DAG of every usable pipeline spec, by DAG id. A spec that cannot be built is left out
    here and reported by ``dags/lakehouse_spec_errors.py`` as an import error
    naming its file. An unsupported Airflow is the DAG file's import error
    (:func:`~lakehouse_airflow.versions.check_airflow`)."""
    check_airflow()
    dags: dict[str, DAG] = {}
    for spec in usable_specs()[0]:
        for build in BUILDERS.values():
            dag = build(spec)
            dags[dag.dag_id] = dag
    return dags


class PipelineSpecError(Exception):
    """Pipeline specs that cannot become DAGs; Airflow shows this as the import error of
    ``dags/lakehouse_spec_errors.py``, one line per spec file with the reason."""


def raise_spec_problems() -> None:
    """Raise :class:`PipelineSpecError` when some spec cannot become DAGs (the other
    pipelines' DAGs stay).
    """
    problems = usable_specs()[1]
    if problems:
        raise PipelineSpecError(
            "pipeline specs left out of Airflow:\n" + "\n".join(problems.values())
        )
