"""Airflow: DAG integrity, then the DAGs run through Airflow's own ``dag.test()`` loop in this
process (each Spark task's command run here; :func:`testkit.airflow.dag_test`) on real Spark and
Delta. The DAGs run with spark-submit through the real scheduler in ``test_platform.py`` (with
local Spark, and on ``make run-cluster``'s standalone cluster)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.expected import expected_gold, gold_counter, landing_lines, valid_event
from testkit.lakes import example_copy, suites_copy
from testkit.paths import ROOT, VENV_BIN

pytestmark = [pytest.mark.airflow]


DAGBAG_PROBE = """
import json, sys, time
started = time.perf_counter()
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
shape = {dag_id: {t.task_id: sorted(t.upstream_task_ids) for t in dag.topological_sort()}
         for dag_id, dag in bag.dags.items()}
meta = {dag_id: {"max_active_runs": dag.max_active_runs, "schedule": str(dag.schedule),
                 "params": sorted(dag.params.keys())} for dag_id, dag in bag.dags.items()}
heavy = sorted(m for m in ("pyspark", "delta", "great_expectations", "py4j") if m in sys.modules)
stream = bag.dags.get("ad_events__stream")
links = {t.task_id: sorted(link.name for link in t.operator_extra_links) for t in stream.tasks} if stream else {}
assets = {dag_id: {t.task_id: {"in": sorted(a.name for a in t.inlets), "out": sorted(a.name for a in t.outlets)}
                   for t in dag.tasks if t.inlets or t.outlets} for dag_id, dag in bag.dags.items()}
deadlines = {dag_id: [(type(d.reference).__name__, d.interval.total_seconds(), d.callback.path, d.callback.kwargs)
                      for d in dag.deadline or []] for dag_id, dag in bag.dags.items()}
print(json.dumps({"errors": bag.import_errors, "shape": shape, "meta": meta, "heavy": heavy, "links": links,
                  "assets": assets, "deadlines": deadlines, "seconds": time.perf_counter() - started}))
"""  # noqa: E501


def _probe_dagbag(home, dag_path, **env_changes) -> dict:
    """A DagBag of ``dag_path`` (the dags folder or one file), parsed in a fresh interpreter."""
    import os

    from lakehouse_platform import platform_env

    env = platform_env(
        {
            **os.environ,
            "AIRFLOW_HOME": str(home),
            "LAKEHOUSE_HOME": str(home / "lake"),
            **env_changes,
        }
    )
    done = subprocess.run(
        [sys.executable, "-c", DAGBAG_PROBE, str(dag_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def dagbag(tmp_path_factory):
    return _probe_dagbag(tmp_path_factory.mktemp("dagbag"), ROOT / "dags")


@pytest.mark.parametrize(
    "dag_file, dag_ids",
    [
        (
            "lakehouse_pipelines.py",
            {
                f"{name}__{kind}"
                for name in ("ad_events", "crm", "shop")
                for kind in ("stream", "backfill", "rollback", "refresh", "maintenance")
            },
        ),
        ("lakehouse_spec_errors.py", set()),
    ],
    ids=["pipelines", "spec_errors"],
)  # a set's order differs per process: xdist needs stable ids
def test_each_dag_file_imports_without_errors(tmp_path, dag_file, dag_ids):
    bag = _probe_dagbag(tmp_path, ROOT / "dags" / dag_file)
    assert bag["errors"] == {} and set(bag["shape"]) == dag_ids


def test_a_broken_spec_is_its_own_import_error_and_the_other_pipelines_stay(tmp_path):

    specs = tmp_path / "pipelines"
    specs.mkdir()
    example_copy(specs, "ad_events")
    (specs / "shop.yaml").write_text(
        "name: shop\nlanding: landing/shop\nhops:\n"
        "  - {name: bronze, kind: ingest-ish, table: tables/bronze/orders, time_column: t}\n"
    )
    (specs / "late.yaml").write_text(
        "name: late\nlanding: landing/late\nschedule: every morning\nhops:\n"
        "  - {name: bronze, kind: ingest, table: tables/bronze/late, time_column: t}\n"
    )
    (specs / "typo.yaml").write_text(
        "name: typo\nlanding: landing/typo\nallowed_latenes: 30 minutes\nhops:\n"
        "  - {name: bronze, kind: ingest, table: tables/bronze/typo, time_column: t}\n"
    )
    # And a team's own pipeline written by `lakehouse new`: its DAGs appear beside ad_events'.
    subprocess.run(
        [str(VENV_BIN / "lakehouse"), "new", "orders"],
        check=True,
        capture_output=True,
        env={
            **os.environ,
            "LAKEHOUSE_PIPELINES": str(specs),
            "LAKEHOUSE_QUALITY": str(tmp_path / "quality"),
        },
    )
    bag = _probe_dagbag(tmp_path, ROOT / "dags", LAKEHOUSE_PIPELINES=str(specs))
    assert set(bag["shape"]) == {
        f"{name}__{kind}"
        for name in ("ad_events", "orders")
        for kind in ("stream", "backfill", "rollback", "refresh", "maintenance")
    }
    assert bag["shape"]["orders__stream"] == {
        name.replace("ad_events", "orders"): upstream
        for name, upstream in bag["shape"]["ad_events__stream"].items()
    }
    errors_file = str(ROOT / "dags" / "lakehouse_spec_errors.py")
    assert list(bag["errors"]) == [errors_file]
    error = bag["errors"][errors_file]
    assert (
        f"{specs / 'shop.yaml'}: hop bronze has kind 'ingest-ish': use one of "
        "ingest, append, aggregate" in error
    )
    assert f"{specs / 'late.yaml'}: " in error and "every morning" in error
    assert (
        f"{specs / 'typo.yaml'}: the pipeline has unknown key `allowed_latenes`: did you mean "
        "`allowed_lateness`?"
    ) in error


def test_parsing_imports_no_spark_and_starts_no_jvm(dagbag):
    assert dagbag["heavy"] == []


def test_dag_shapes(dagbag):
    assert dagbag["shape"]["ad_events__stream"] == {
        "check_new_data": [],
        "bronze": ["check_new_data"],
        "gate_bronze": ["bronze"],
        "silver": ["gate_bronze"],
        "gate_silver": ["silver"],
        "gold": ["gate_silver"],
        "gate_gold": ["gold"],
        "plan_undo": ["gate_bronze", "gate_gold", "gate_silver"],
        "undo": ["plan_undo"],
        "all_gates_passed": ["gate_gold"],
    }
    assert {task: links for task, links in dagbag["links"].items() if links} == {
        f"gate_{hop}": ["Data Docs"] for hop in ("bronze", "silver", "gold")
    }
    assert dagbag["shape"]["ad_events__backfill"] == {
        "bronze": [],
        "silver": ["bronze"],
        "gold": ["silver"],
    }
    assert dagbag["shape"]["ad_events__rollback"] == {
        "plan": [],
        "execute": ["plan"],
        "verify": ["execute"],
    }
    assert dagbag["shape"]["ad_events__refresh"] == {
        "plan": [],
        "refresh": ["plan"],
        "verify": ["refresh"],
    }
    assert dagbag["shape"]["ad_events__maintenance"] == {"maintain": []}
    assert dagbag["meta"]["ad_events__stream"]["max_active_runs"] == 1
    assert dagbag["meta"]["ad_events__backfill"]["params"] == ["end", "start"]
    assert dagbag["meta"]["ad_events__rollback"]["params"] == [
        "cascade",
        "dry_run",
        "exact",
        "hop",
        "replan",
        "to_batch",
        "to_run",
        "to_time",
    ]
    # Lineage: a table's producing task, its gate (stream) or its hop task (backfill), reads
    # the asset above it and writes the table's own: Airflow's graph is landing -> bronze
    # -> silver -> gold.
    reads = {
        "bronze": ["ad_events.landing"],
        "silver": ["ad_events.bronze"],
        "gold": ["ad_events.silver"],
    }
    assert dagbag["assets"]["ad_events__stream"] == {
        f"gate_{hop}": {"in": reads[hop], "out": [f"ad_events.{hop}"]} for hop in reads
    }
    assert dagbag["assets"]["ad_events__backfill"] == {
        hop: {"in": reads[hop], "out": [f"ad_events.{hop}"]} for hop in reads
    }
    # The spec's `freshness: 45 minutes`, as the stream DAG's deadline alert.
    assert dagbag["deadlines"]["ad_events__stream"] == [
        [
            "DagRunQueuedAtDeadline",
            2700.0,
            "lakehouse_airflow.freshness.freshness_missed",
            {"pipeline": "ad_events"},
        ]
    ]
    assert (
        dagbag["deadlines"]["ad_events__backfill"]
        == dagbag["deadlines"]["ad_events__rollback"]
        == []
    )


def _records(home):
    folder = home / "_ops" / "runs" / "ad_events"
    return sorted(path.name for path in folder.glob("*.json")) if folder.exists() else []


@pytest.mark.slow
@pytest.mark.spark
def test_backfill_dag_fills_exactly_its_data_interval(spark, airflow_in_process, lake_home):
    """In-process ``dag.test()``; the backfill DAG's real spark-submit runs are in the
    launcher test's walk.
    """
    from testkit.airflow import dag_test

    lakehouse_main(
        [
            "generate",
            "ad_events",
            "--events",
            "3000",
            "--files",
            "2",
            "--seed",
            "8",
            "--start",
            "2026-03-02T23:59:45",
        ]
    )  # 30 s: half each side of midnight
    run_id, state, tasks = dag_test("ad_events__backfill", "2026-03-04")
    assert state == "success" and set(tasks.values()) == {"success"}, tasks
    # A run with logical date D covers the daily interval that ended at D: [D - 1 day, D).
    for hop in ("bronze", "silver", "gold"):
        record = json.loads(
            (
                lake_home / "_ops/runs/ad_events" / f"ad_events__backfill__{run_id}.{hop}.json"
            ).read_text()
        )
        assert record["range_start"].startswith("2026-03-03T00:00:00"), record
        assert record["range_end"].startswith("2026-03-04T00:00:00"), record
    bronze = spark.read.format("delta").load(str(lake_home / "tables/bronze/ad_events"))
    assert {str(row.event_date) for row in bronze.select("event_date").distinct().collect()} == {
        "2026-03-03"
    }
    day = (1_772_496_000_000, 1_772_582_400_000)  # [2026-03-03, 2026-03-04)
    expected = [
        e
        for _n, line in landing_lines(lake_home)
        if (e := valid_event(line)) and day[0] <= e["event_time"] < day[1]
    ]
    assert bronze.count() == len(expected) > 0
    assert not (lake_home / "checkpoints").exists()


def test_airflow_backfill_creates_one_run_per_daily_interval(airflow_env):
    airflow = str(VENV_BIN / "airflow")
    run = lambda *args: subprocess.run(
        [airflow, *args], env=airflow_env, capture_output=True, text=True, timeout=300
    )
    assert run("dags", "reserialize").returncode == 0
    # The scheduler makes no run of its own (unpausing it to let a backfill run would otherwise
    # start yesterday's), while the stream DAG has its next one: what serializing the DAGs wrote.
    with sqlite3.connect(Path(airflow_env["AIRFLOW_HOME"]) / "airflow.db") as db:
        next_runs = dict(db.execute("SELECT dag_id, next_dagrun_create_after FROM dag").fetchall())
    assert (
        next_runs["ad_events__backfill"] is None and next_runs["ad_events__stream"] is not None
    ), next_runs
    created = run(
        "backfill",
        "create",
        "--dag-id",
        "ad_events__backfill",
        "--from-date",
        "2026-02-01",
        "--to-date",
        "2026-02-03",
    )
    assert created.returncode == 0, created.stderr[-2000:]
    listed = run("dags", "list-runs", "ad_events__backfill", "-o", "json")
    runs = json.loads(next(line for line in listed.stdout.splitlines() if line.startswith("[")))
    runs = sorted(
        (r["logical_date"][:10], r["run_after"][:10])
        for r in runs
        if r["run_id"].startswith("backfill__2026-02")
    )
    # Each run covers one day: [logical_date, run_after).
    assert runs == [
        ("2026-02-01", "2026-02-02"),
        ("2026-02-02", "2026-02-03"),
        ("2026-02-03", "2026-02-04"),
    ]


@pytest.mark.slow
@pytest.mark.spark
def test_rollback_dag_plans_in_dry_run_then_executes(spark, airflow_in_process, three_increments):
    """The dry run and the execution in-process (``dag.test()``; the plan starts no JVM), the
    replay by the service. The execution through the real scheduler and spark-submit is in the
    launcher's UI walk (``test_platform.py``), triggered from the Lakehouse page."""
    from spark_jobs.logs import checkpoint_log
    from testkit.airflow import dag_test
    from testkit.expected import assert_tables_match_landing
    from testkit.paths import file_tree

    lake_home = three_increments
    assert checkpoint_log.commit_batch_ids(str(lake_home / "checkpoints/ad_events/silver"))[-1] > 0
    before = file_tree(lake_home)
    conf = {"hop": "silver", "to_batch": 0, "cascade": True}
    _run_id, state, tasks = dag_test("ad_events__rollback", conf={**conf, "dry_run": True})
    assert state == "success" and tasks == {
        "plan": "success",
        "execute": "skipped",
        "verify": "skipped",
    }, tasks
    assert file_tree(lake_home) == before

    _run_id, state, tasks = dag_test("ad_events__rollback", conf={**conf, "dry_run": False})
    assert state == "success" and set(tasks.values()) == {"success"}, tasks
    assert checkpoint_log.offset_batch_ids(str(lake_home / "checkpoints/ad_events/silver"))[-1] == 0
    journals = list((lake_home / "_ops/rollbacks/ad_events").glob("*.json"))
    assert len(journals) == 1 and json.loads(journals[0].read_text())["status"] == "succeeded"
    lakehouse_main(["run", "ad_events"])
    assert_tables_match_landing(lake_home)


PARAMS_PROBE = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
from airflow.serialization.serialized_objects import DagSerialization
bag = DagBag()
verdicts = []
for dag_id, conf in json.loads(sys.argv[1]):
    serialized = DagSerialization.from_dict(DagSerialization.to_dict(bag.dags[dag_id]))  # what the API server holds
    try:
        serialized.params.deep_merge(conf).validate()
        verdicts.append("accepted")
    except Exception as error:
        verdicts.append(type(error).__name__)
print(json.dumps(verdicts))
"""  # noqa: E501

HOSTILE_VALUES = [
    "../../etc",
    "--conf x=y",
    "; rm -rf /",
    "2026-01-01 --conf spark.x=y",
    "$(reboot)",
]


def test_dag_params_refuse_hostile_values(airflow_env):
    """What Airflow runs when a DAG run is created (params merged with conf, then validated):
    no param can carry a path, a spark-submit flag or a shell fragment."""
    cases = [
        ("ad_events__backfill", {"start": "2026-03-01", "end": "2026-03-02"}),
        ("ad_events__rollback", {"hop": "gold", "to_run": "r-1", "dry_run": True}),
    ]
    for value in HOSTILE_VALUES:
        cases += [
            ("ad_events__backfill", {"start": value}),
            ("ad_events__backfill", {"end": value}),
            ("ad_events__rollback", {"hop": value}),
            ("ad_events__rollback", {"to_run": value}),
            ("ad_events__rollback", {"to_time": value}),
            ("ad_events__rollback", {"to_batch": value}),
        ]
    done = subprocess.run(
        [sys.executable, "-c", PARAMS_PROBE, json.dumps(cases)],
        env=airflow_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    verdicts = json.loads(done.stdout.strip().splitlines()[-1])
    assert verdicts[:2] == ["accepted", "accepted"]
    assert set(verdicts[2:]) == {"ParamValidationError"}, list(zip(cases, verdicts))


@pytest.mark.slow
@pytest.mark.spark
def test_stream_then_backfill_dag_of_the_same_day_then_task_reruns_change_nothing(
    spark, airflow_in_process, lake_home
):
    """The stream DAG, then the backfill DAG of the day its files cover (in-process ``dag.test()``
    runs, :func:`testkit.airflow.dag_test`): the tables end exactly as the landing files say. Then
    clearing and re-running task instances (:func:`testkit.airflow.task_in_process`) changes no
    row: run-once tasks find nothing new, a backfill task rewrites its range with the same rows.
    The two DAGs at once, through the real scheduler with spark-submit tasks that take the
    pipeline's lock in turn: the launcher test's walk (``tests/e2e/test_platform.py``)."""
    import pendulum

    from testkit.airflow import dag_test, task_in_process
    from testkit.expected import assert_tables_match_landing
    from tests.spark.test_concurrency import MIDNIGHT_DATA

    lakehouse_main(MIDNIGHT_DATA)
    for dag_id in ("ad_events__stream", "ad_events__backfill"):
        _run_id, state, tasks = dag_test(dag_id, "2026-03-04")
        assert state == "success", (dag_id, tasks)
    assert_tables_match_landing(lake_home)

    from spark_jobs.logs import delta_log
    from spark_jobs.logs.fs import read_json_folder
    from testkit.expected import table_rows

    rows = {hop: table_rows(lake_home, hop) for hop in ("bronze", "silver", "gold")}
    tables = ["tables/bronze/ad_events", "tables/silver/ad_views", "tables/gold/campaign_views_10s"]
    versions = [delta_log.table_version(str(lake_home / table)) for table in tables]
    # Re-runs of three task instances: their commands as the scheduler's re-run would submit
    # them. The two DAG runs' Airflow run ids, as their records name them (a backfill's
    # names its DAG too).
    runs = {
        record["mode"]: record["run_id"].removeprefix("ad_events__backfill__")
        for record in read_json_folder(str(lake_home / "_ops/runs/ad_events"))
    }
    assert set(runs) == {"run-once", "backfill"}, runs
    interval = {
        "data_interval_start": pendulum.datetime(2026, 3, 3, tz="UTC"),
        "data_interval_end": pendulum.datetime(2026, 3, 4, tz="UTC"),
        "params": {"start": None, "end": None},
    }
    for dag_id, task, mode in (
        ("ad_events__stream", "gold", "run-once"),
        ("ad_events__stream", "bronze", "run-once"),
        ("ad_events__backfill", "silver", "backfill"),
    ):
        task_in_process(dag_id, task, {**interval, "run_id": runs[mode]})
        assert {hop: table_rows(lake_home, hop) for hop in rows} == rows, (dag_id, task)
        if dag_id == "ad_events__stream":  # nothing new: not even a commit
            assert [delta_log.table_version(str(lake_home / table)) for table in tables] == versions
    # the backfill did rewrite silver's day
    assert delta_log.table_version(str(lake_home / tables[1])) > versions[1]
    # The stream goes on past the backfill's rewrite commit (it skips it) with new data.
    lakehouse_main(
        [
            "generate",
            "ad_events",
            "--events",
            "300",
            "--seed",
            "13",
            "--start",
            "2026-03-03T09:00:00",
        ]
    )
    lakehouse_main(["run", "ad_events"])
    assert_tables_match_landing(lake_home)


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.quality
def test_a_failed_gate_rolls_the_run_back_and_a_drop_policy_lets_it_through(
    spark, airflow_in_process, lake_home, tmp_path, monkeypatch
):
    """A landing file with views of an ad no campaign has breaks silver's `fail` rule
    (campaign_id not null): the DAG run ends failed, silver and gold are as before the run
    (bronze keeps the raw data); with the rule's policy set to `drop`, the next run succeeds
    and the orphan views are in silver's quarantine; a run with nothing new starts no Spark
    job. In-process ``dag.test()`` runs (:func:`testkit.airflow.dag_test`)."""

    from unittest import mock

    from spark_jobs.control import suites
    from spark_jobs.logs import checkpoint_log
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.spec import get_spec
    from testkit.airflow import dag_test
    from testkit.expected import table_rows, valid_event
    from testkit.mail import body, smtp_server

    lakehouse_main(
        [
            "generate",
            "ad_events",
            "--events",
            "600",
            "--files",
            "2",
            "--seed",
            "31",
            "--start",
            "2026-03-05T08:00:00",
        ]
    )
    lakehouse_main(["run", "ad_events", "--quality=off"])  # the state before the DAG run
    before = {hop: table_rows(lake_home, hop) for hop in ("silver", "gold")}
    checkpoints = {
        hop: checkpoint_log.commit_batch_ids(str(lake_home / f"checkpoints/ad_events/{hop}"))
        for hop in ("silver", "gold")
    }
    quarantined_before = (
        spark.read.format("delta").load(str(lake_home / "tables/quarantine/ad_events")).count()
    )
    lakehouse_main(
        [
            "generate",
            "ad_events",
            "--events",
            "300",
            "--seed",
            "32",
            "--start",
            "2026-03-05T09:00:00",
        ]
    )
    orphans = [
        json.dumps(
            {
                "user_id": f"u{n}",
                "page_id": "p",
                "ad_id": "ad-without-campaign",
                "ad_type": "mail",
                "event_type": "view",
                "event_time": 1_772_701_200_000 + n,
                "ip_address": "1.2.3.4",
            }
        )
        for n in range(4)
    ]
    (lake_home / "landing/ad_events/orphans.json").write_text(
        "".join(line + "\n" for line in orphans)
    )

    with smtp_server() as (mail_env, mails), mock.patch.dict(os.environ, mail_env):
        # The alert reaches the team through the SMTP provider's notifier.
        run_id, state, tasks = dag_test("ad_events__stream", "2026-03-06")
    assert [message["Subject"] for message in mails] == [
        "lakehouse ad_events: gate of silver failed, run undone"
    ]
    text = body(mails[0])
    assert mails[0]["To"] == "data-team@example.com" and f"stream run {run_id}" in text, text
    assert (
        "(expect_column_values_to_not_be_null(campaign_id))" in text
        and "batches of silver, gold back" in text
    )
    assert f"`lakehouse quality ad_events --hop silver --run {run_id}`" in text
    assert state == "failed" and tasks == {
        "check_new_data": "success",
        "bronze": "success",
        "gate_bronze": "success",
        "silver": "success",
        "gate_silver": "failed",
        "gold": "upstream_failed",
        "gate_gold": "upstream_failed",
        "plan_undo": "success",
        "undo": "success",
        "all_gates_passed": "upstream_failed",
    }, tasks
    summary = suites.read_summary(Lake.open(get_spec("ad_events")), run_id, "silver")
    assert summary["gate"] == "failed" and summary["failed"] == [
        "expect_column_values_to_not_be_null(campaign_id)"
    ]
    assert {hop: table_rows(lake_home, hop) for hop in ("silver", "gold")} == before
    for hop in ("silver", "gold"):
        assert (
            checkpoint_log.commit_batch_ids(str(lake_home / f"checkpoints/ad_events/{hop}"))
            == checkpoints[hop]
        )
    bronze_lines = sorted(line for _name, line in landing_lines(lake_home) if valid_event(line))
    assert len(table_rows(lake_home, "bronze")) == len(bronze_lines)  # bronze kept the raw data
    # Asset events: bronze's gate passed and bronze wrote rows; silver's failed, gold never ran.
    # (The run's lines may all parse: then it made no quarantine commit, and quarantined none.)
    bronze_version = _latest_version(lake_home / "tables/bronze/ad_events")

    def rows(table: str, version: int | None = None) -> int:
        reader = spark.read.format("delta")
        return (
            (reader if version is None else reader.option("versionAsOf", version))
            .load(str(lake_home / table))
            .count()
        )

    assert _asset_events(run_id) == [
        (
            "ad_events.bronze",
            "gate_bronze",
            {
                "version": bronze_version,
                "previous_version": bronze_version - 1,
                "rows": rows("tables/bronze/ad_events", bronze_version)
                - rows("tables/bronze/ad_events", bronze_version - 1),
                "quarantined": rows("tables/quarantine/ad_events") - quarantined_before,
                "run_id": run_id,
                "mode": "run-once",
            },
        )
    ]

    suites_dir = tmp_path / "quality"
    suites_copy(suites_dir)
    silver_suite = suites_dir / "ad_events" / "silver.json"
    suite = json.loads(silver_suite.read_text())
    for expectation in suite["expectations"]:
        if (
            expectation["type"] == "expect_column_values_to_not_be_null"
            and expectation["kwargs"]["column"] == "campaign_id"
        ):
            expectation["meta"]["policy"] = "drop"
    silver_suite.write_text(json.dumps(suite))
    monkeypatch.setenv("LAKEHOUSE_QUALITY", str(suites_dir))
    run_id, state, tasks = dag_test("ad_events__stream", "2026-03-06T00:05:00")
    # Bronze found nothing new: its gate ends skipped (no event), and silver and gold run all the
    # same and write the undone batches again.
    assert (
        state == "success" and tasks["undo"] == "skipped" and tasks["gate_bronze"] == "skipped"
    ), tasks
    assert tasks["silver"] == tasks["gate_silver"] == tasks["all_gates_passed"] == "success", tasks
    events = _asset_events(run_id)
    assert [(asset, task) for asset, task, _extra in events] == [
        ("ad_events.silver", "gate_silver"),
        ("ad_events.gold", "gate_gold"),
    ], events
    for (asset, _task, extra), table in zip(
        events, ("tables/silver/ad_views", "tables/gold/campaign_views_10s")
    ):
        assert extra["version"] == _latest_version(lake_home / table) and extra["rows"] > 0, (
            asset,
            extra,
        )
    quarantine = (
        spark.read.format("delta").load(str(lake_home / "tables/quarantine/ad_views")).collect()
    )
    assert sorted(json.loads(row.raw_line)["user_id"] for row in quarantine) == [
        f"u{n}" for n in range(4)
    ]
    assert gold_counter(spark, lake_home) == expected_gold(lake_home)
    records = _records(lake_home)

    _run_id, state, tasks = dag_test("ad_events__stream", "2026-03-06T00:10:00")
    assert (
        state == "success" and tasks["check_new_data"] == "success" and tasks["bronze"] == "skipped"
    ), tasks
    assert _records(lake_home) == records  # nothing new: check_new_data skipped every Spark job
    assert _asset_events(_run_id) == []


def _latest_version(table: Path) -> int:
    """A Delta table's newest version, counted from its log's commit files."""
    return len(list((table / "_delta_log").glob("*.json"))) - 1


def _asset_events(run_id: str) -> list[tuple[str, str, dict]]:
    """The asset events a DAG run emitted (in Airflow's metadata DB): asset, task and extra."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(AssetModel.name, AssetEvent.source_task_id, AssetEvent.extra)
            .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
            .where(AssetEvent.source_run_id == run_id)
            .order_by(AssetEvent.id)
        ).all()
    return [(name, task, dict(extra or {})) for name, task, extra in rows]


def lakehouse_main(argv: list[str]) -> None:
    from spark_jobs.cli import main

    assert main(argv) == 0, argv
