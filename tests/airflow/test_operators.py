"""The exact ``spark-submit`` argv of every Spark task of the three DAGs, rendered in-process.

Unit tests of argument building, the way Airflow's own Spark provider tests its operators: the
templated arguments are rendered with a task context and ``SparkSubmitHook.submit`` is replaced
by a function that records the command the real hook builds (a mock of the submit only; the
hook, the connection and the templates are real). The real spark-submit runs are in
``test_platform.py`` (every DAG through ``make run``'s scheduler, and on ``make run-cluster``'s).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pendulum
import pytest

from testkit.airflow import execute_task
from testkit.lakes import example_copy
from testkit.paths import EXAMPLES, ROOT

pytestmark = [pytest.mark.unit, pytest.mark.airflow]

RUN_ID = "scheduled__2026-03-04T00:00:00+00:00"


@pytest.fixture(scope="module")
def factory(airflow_in_process):
    """The DAG factory, imported in this process with Airflow's home in a temporary folder."""
    from lakehouse_airflow import dag_factory

    from spark_jobs.model.spec import get_spec

    return dag_factory, get_spec("ad_events")


def submitted(task, context: dict, master: str = "local[2]") -> tuple[list[str], dict]:
    """Render ``task``'s templates, execute it with the submit replaced; the argv and environment
    the hook built.
    """
    calls = []

    def submit(hook, application: str = "", **_kwargs) -> None:
        calls.append((hook._build_spark_submit_command(application), dict(hook._env or {})))

    connection = json.dumps({"conn_type": "spark", "host": master})
    with mock.patch.dict("os.environ", {"AIRFLOW_CONN_SPARK_DEFAULT": connection}):
        execute_task(task, context, submit)
    assert len(calls) == 1
    return calls[0]


def _split(argv: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """spark-submit's options (each flag with its values, in order) and what follows
    the application.
    """
    application = argv.index(str(ROOT / "spark_jobs" / "submit.py"))
    options: dict[str, list[str]] = {}
    for flag, value in zip(argv[1:application:2], argv[2:application:2]):
        options.setdefault(flag, []).append(value)
    return options, argv[application + 1 :]


def _common(options: dict[str, list[str]], name: str, master: str = "local[2]") -> None:
    from spark_jobs.engine.jvm import archive_path
    from spark_jobs.model.settings import cache_dir, jars_dir

    jars = sorted(str(path) for path in jars_dir().glob("*.jar"))
    assert options["--master"] == [master] and options["--name"] == [name]
    assert sorted(options["--jars"][0].split(",")) == jars and any(
        "delta-spark" in jar for jar in jars
    )
    (archive,) = options["--py-files"]
    assert Path(archive).parent == cache_dir() / "dist" and Path(archive).suffix == ".zip"
    confs = dict(conf.split("=", 1) for conf in options["--conf"])
    assert confs["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert confs["spark.pyspark.python"] == confs["spark.pyspark.driver.python"] == sys.executable
    assert confs["spark.driver.bindAddress"] == confs["spark.driver.host"] == "127.0.0.1"
    shared = archive_path()
    assert shared.exists()  # `lakehouse setup` built it
    assert f"-XX:SharedArchiveFile={shared} " in confs["spark.driver.extraJavaOptions"]
    # the lean JIT and GC options of a short-lived driver (spark_jobs/engine/jvm.py),
    # as written there
    assert {"-XX:+UseSerialGC", "-XX:Tier4InvocationThreshold=50000"} <= set(
        confs["spark.driver.extraJavaOptions"].split()
    )


@pytest.mark.parametrize("hop", ["bronze", "silver", "gold"])
def test_stream_hop_task_submits_run_once_of_its_hop(factory, hop, lake_home):
    dag_factory, spec = factory
    task = dag_factory.build_stream_dag(spec).get_task(hop)
    argv, env = submitted(task, {"run_id": RUN_ID, "params": {}})
    options, arguments = _split(argv)
    _common(options, "lakehouse-ad_events-run")
    assert arguments == [
        "run",
        "ad_events",
        f"--hop={hop}",
        f"--run-id={RUN_ID}",
        "--quality=report",
        "--wait=900",
    ]
    assert env["LAKEHOUSE_HOME"] == str(lake_home) and env["SPARK_LOCAL_IP"] == "127.0.0.1"


def test_backfill_task_covers_the_data_interval_or_the_params(factory):
    dag_factory, spec = factory
    interval = {
        "data_interval_start": pendulum.datetime(2026, 3, 3, tz="UTC"),
        "data_interval_end": pendulum.datetime(2026, 3, 4, tz="UTC"),
        "run_id": RUN_ID,
    }
    task = dag_factory.build_backfill_dag(spec).get_task("silver")
    _options, arguments = _split(
        submitted(task, {**interval, "params": {"start": None, "end": None}})[0]
    )
    assert arguments == [
        "backfill",
        "ad_events",
        "--start=2026-03-03T00:00:00",
        "--end=2026-03-04T00:00:00",
        "--hop=silver",
        f"--run-id=ad_events__backfill__{RUN_ID}",
        "--quality=gate",
        "--wait=900",
    ]
    task = dag_factory.build_backfill_dag(spec).get_task("gold")
    params = {"start": "2026-02-01", "end": "2026-02-02T06:00:00"}
    _options, arguments = _split(submitted(task, {**interval, "params": params})[0])
    assert arguments[2:4] == ["--start=2026-02-01", "--end=2026-02-02T06:00:00"]


def test_rollback_execute_and_stream_undo_tasks_on_a_standalone_master(factory):
    """The hop and batch come from XCom (the plan); ``ti`` is a stand-in whose ``xcom_pull``
    returns what the plan tasks push."""
    dag_factory, spec = factory
    master = "spark://127.0.0.1:7077"
    plans = {("plan", "plan"): {"requested_batch": 4}, ("plan_undo", "return_value"): "silver"}
    ti = SimpleNamespace(xcom_pull=lambda task_ids, key="return_value": plans[(task_ids, key)])

    task = dag_factory.build_rollback_dag(spec).get_task("execute")
    params = {"hop": "bronze", "cascade": False, "replan": False, "exact": False}
    options, arguments = _split(
        submitted(task, {"run_id": RUN_ID, "params": params, "ti": ti}, master)[0]
    )
    _common(options, "lakehouse-ad_events-rollback", master)
    assert arguments == [
        "rollback",
        "ad_events",
        "--hop=bronze",
        "--to-batch=4",
        "--no-cascade",
        "--no-replan",
        "--no-exact",
        "--wait=900",
    ]
    for params, flags in (
        (
            {"hop": "bronze", "cascade": True, "replan": True, "exact": False},
            ["--replan", "--no-exact"],
        ),
        (
            {"hop": "bronze", "cascade": True, "replan": False, "exact": True},
            ["--no-replan", "--exact"],
        ),
    ):
        # rendering fills the task's arguments in
        task = dag_factory.build_rollback_dag(spec).get_task("execute")
        _options, arguments = _split(
            submitted(task, {"run_id": RUN_ID, "params": params, "ti": ti}, master)[0]
        )
        assert arguments[-4:] == ["--cascade", *flags, "--wait=900"]

    task = dag_factory.build_stream_dag(spec).get_task("undo")
    _options, arguments = _split(
        submitted(task, {"run_id": RUN_ID, "params": {}, "ti": ti}, master)[0]
    )
    assert arguments == [
        "rollback",
        "ad_events",
        "--hop=silver",
        f"--to-run={RUN_ID}",
        "--cascade",
        "--no-replan",
        "--no-exact",
        "--wait=900",
    ]


@pytest.mark.parametrize(
    "from_time, expected",
    [(None, []), ("2026-03-01T10:00:00", ["--from=2026-03-01T10:00:00"])],
    ids=["from-the-start", "from-a-time"],
)
def test_refresh_task_submits_refresh_of_the_hop(factory, from_time, expected):
    dag_factory, spec = factory
    task = dag_factory.build_refresh_dag(spec).get_task("refresh")
    params = {"hop": "gold", "from_time": from_time, "dry_run": False}
    options, arguments = _split(submitted(task, {"run_id": RUN_ID, "params": params})[0])
    assert arguments == [
        "refresh",
        "ad_events",
        "--hop=gold",
        *expected,  # none: from the start
        "--quality=gate",
        "--wait=900",
    ]


def test_maintenance_task_submits_maintain_of_the_pipeline(factory):
    dag_factory, spec = factory
    task = dag_factory.build_maintenance_dag(spec).get_task("maintain")
    _options, arguments = _split(submitted(task, {"run_id": RUN_ID, "params": {}})[0])
    assert arguments == ["maintain", "ad_events", "--hop=all", "--wait=900"]


def test_a_cluster_behind_a_shared_secret_gets_its_properties_file_never_the_secret_in_argv(
    factory, tmp_path
):
    """``make run-cluster``'s master wants Spark's shared secret: spark-submit reads it from the
    cluster's properties file (``$LAKEHOUSE_SPARK_PROPERTIES``), so the argv names only the file."""
    dag_factory, spec = factory
    master = "spark://127.0.0.1:7077"
    # a new task: the operator keeps its hook
    bronze = lambda: dag_factory.build_stream_dag(spec).get_task("bronze")
    argv, _env = submitted(bronze(), {"run_id": RUN_ID, "params": {}}, master)
    assert "--properties-file" not in argv  # no cluster file in this process's environment
    secret = "a-generated-secret-" + RUN_ID[-8:]
    properties = tmp_path / "spark.conf"
    properties.write_text(f"spark.authenticate true\nspark.authenticate.secret {secret}\n")
    with mock.patch.dict("os.environ", {"LAKEHOUSE_SPARK_PROPERTIES": str(properties)}):
        argv, _env = submitted(bronze(), {"run_id": RUN_ID, "params": {}}, master)
    options, _arguments = _split(argv)
    assert options["--properties-file"] == [str(properties)] and options["--master"] == [master]
    assert not any(secret in word for word in argv)


def test_the_hop_tasks_of_a_dag_run_share_one_driver_started_with_their_own_submit_options(
    factory, lake_home, tmp_path, monkeypatch
):
    """The shared driver's spark-submit argv is a hop task's own (master, jars, confs, shipped
    package, environment) with ``serve`` for the command; every Spark task of one DAG run names
    the same driver, another run or lake another; the run's last hop and ``undo`` release it, and
    the rollback DAG's one Spark task submits its own application."""
    dag_factory, spec = factory
    monkeypatch.setenv("LAKEHOUSE_DRIVER_DIR", str(tmp_path / "drivers"))
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_DEFAULT",
        json.dumps({"conn_type": "spark", "host": "spark://127.0.0.1:7077"}),
    )
    plans = {("plan_undo", "return_value"): "silver"}
    ti = SimpleNamespace(xcom_pull=lambda task_ids, key="return_value": plans[(task_ids, key)])

    def driver(build, task_id: str, run_id: str = RUN_ID) -> tuple[Path, list[str], dict]:
        dag = build(spec)  # a fresh task each time, as each task instance's execution has
        task = dag.get_task(task_id)
        context = {
            "run_id": run_id,
            "params": {"start": "2026-03-03", "end": "2026-03-04"},
            "ti": ti,
            "dag_run": SimpleNamespace(dag_id=dag.dag_id, run_id=run_id),
        }
        task.render_template_fields({"dag": dag, **context})
        task.prepare()
        assert task._uses_shared_driver()
        return task.driver_command(context)

    stream, backfill = dag_factory.build_stream_dag, dag_factory.build_backfill_dag
    address, argv, env = driver(stream, "bronze")
    options, arguments = _split(argv)
    _common(options, "lakehouse-ad_events-ad_events__stream", "spark://127.0.0.1:7077")
    assert address.parent == tmp_path / "drivers" and address.suffix == ".json"
    assert arguments == [
        "serve",
        "--address",
        str(address),
        "--idle",
        "60",
        "--log",
        str(address.with_suffix(".log")),
    ]
    assert env["LAKEHOUSE_HOME"] == str(lake_home) and env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert {driver(stream, task_id)[0] for task_id in ("silver", "gold", "undo")} == {address}
    assert driver(stream, "gold", run_id="manual__other")[0] != address
    assert driver(backfill, "bronze")[0] == driver(backfill, "gold")[0] != address
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "another-lake"))
    assert driver(stream, "silver")[0] != address
    releases = {
        task.task_id
        for dag in (stream(spec), backfill(spec))
        for task in dag.tasks
        if getattr(task, "releases_driver", False)
    }
    assert releases == {"gold", "undo"}  # in both DAGs, gold is the last hop
    assert all(
        task.releases()
        for dag in (stream(spec), backfill(spec))
        for task in dag.tasks
        if getattr(task, "releases_driver", False)
    )
    # Kept warm (`make run`): the DAG's runs share its driver, which only `undo` ends, until the
    # pipeline code changes; it waits that long idle.
    monkeypatch.setenv("LAKEHOUSE_DRIVER_KEEP_WARM", "600")
    warm, warm_argv, _ = driver(stream, "bronze")
    assert warm != address and driver(stream, "gold", run_id="manual__other")[0] == warm
    assert _split(warm_argv)[1][:5] == ["serve", "--address", str(warm), "--idle", "600"]
    assert (
        driver(backfill, "gold", run_id="manual__other")[0] == driver(backfill, "bronze")[0] != warm
    )
    assert {
        task.task_id
        for dag in (stream(spec), backfill(spec))
        for task in dag.tasks
        if getattr(task, "releases", None) and task.releases()
    } == {"undo"}
    pipelines = tmp_path / "team"
    example_copy(pipelines, "shop")
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(pipelines))
    before = driver(stream, "bronze")[0]
    assert driver(stream, "silver", run_id="manual__other")[0] == before
    changed = pipelines / "shop" / "shop_transforms.py"
    changed.write_text(changed.read_text() + "\n# changed\n")
    assert driver(stream, "bronze")[0] != before
    monkeypatch.delenv("LAKEHOUSE_DRIVER_KEEP_WARM")
    execute = dag_factory.build_rollback_dag(spec).get_task("execute")
    assert not execute.shares_driver and not execute._uses_shared_driver()
    with mock.patch.dict("os.environ", {"LAKEHOUSE_DRIVER": "task"}):
        assert not stream(spec).get_task("bronze")._uses_shared_driver()
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_DEFAULT",
        json.dumps(
            {
                "conn_type": "spark",
                "host": "spark://127.0.0.1:7077",
                "extra": {"deploy-mode": "cluster"},
            }
        ),
    )
    # the driver is not here
    assert not dag_factory.build_stream_dag(spec).get_task("bronze")._uses_shared_driver()


def test_a_graph_spec_becomes_a_graph_of_tasks(factory, tmp_path):
    """Each ingest hop after the new-data check, any other hop after its upstream's gate (its
    upstream itself in the backfill); every gate before the undo planner, the leaves' gates before
    the final marker. Branches that never meet have no last hop: no hop task releases the driver
    (its idle end does)."""
    from spark_jobs.model.spec import load_spec
    from tests.spark.test_graph import SPEC

    dag_factory, _ = factory
    (tmp_path / "forks.yaml").write_text(SPEC)
    spec = load_spec(tmp_path / "forks.yaml")
    stream, backfill = dag_factory.build_stream_dag(spec), dag_factory.build_backfill_dag(spec)
    above = {
        "bronze_a": None,
        "bronze_b": None,
        "positive_a": "bronze_a",
        "other_a": "bronze_a",
        "positive_b": "bronze_b",
        "gold_a": "positive_a",
        "gold_b": "positive_b",
    }
    gates = sorted(f"gate_{hop}" for hop in above)
    assert {task.task_id: sorted(task.upstream_task_ids) for task in stream.tasks} == {
        "check_new_data": [],
        "plan_undo": gates,
        "undo": ["plan_undo"],
        "all_gates_passed": ["gate_gold_a", "gate_gold_b", "gate_other_a"],
        **{hop: [f"gate_{up}" if up else "check_new_data"] for hop, up in above.items()},
        **{f"gate_{hop}": [hop] for hop in above},
    }
    assert {task.task_id: sorted(task.upstream_task_ids) for task in backfill.tasks} == {
        hop: [up] if up else [] for hop, up in above.items()
    }
    assert {
        task.task_id
        for dag in (stream, backfill)
        for task in dag.tasks
        if getattr(task, "releases_driver", False)
    } == {"undo"}
    # Inlets on a table's producing task (the stream's gate, the backfill's hop): the
    # graph's lineage.
    assert [asset.name for asset in stream.get_task("gate_bronze_b").inlets] == [
        "forks.landing:landing/forks_b"
    ]
    assert [asset.name for asset in backfill.get_task("gold_a").inlets] == ["forks.positive_a"]


def test_shops_join_runs_after_each_of_its_upstreams_and_its_sink_releases_the_driver(factory):
    """The shipped ``shop`` pipeline's graph: two sources side by side, the join after both."""
    from spark_jobs.model.spec import load_spec

    dag_factory, _ = factory
    spec = load_spec(EXAMPLES / "shop" / "shop.yaml")
    stream, backfill = dag_factory.build_stream_dag(spec), dag_factory.build_backfill_dag(spec)
    assert (
        sorted(stream.get_task("bronze_orders").upstream_task_ids)
        == sorted(stream.get_task("bronze_payments").upstream_task_ids)
        == ["check_new_data"]
    )
    assert sorted(stream.get_task("silver_paid").upstream_task_ids) == [
        "gate_bronze_payments",
        "gate_silver_orders",
    ]
    assert sorted(backfill.get_task("silver_paid").upstream_task_ids) == [
        "bronze_payments",
        "silver_orders",
    ]
    assert sorted(stream.get_task("all_gates_passed").upstream_task_ids) == [
        "gate_gold_merchant_revenue"
    ]
    assert [asset.name for asset in stream.get_task("gate_silver_paid").inlets] == [
        "shop.silver_orders",
        "shop.bronze_payments",
    ]
    assert [asset.name for asset in stream.get_task("gate_bronze_payments").inlets] == [
        "shop.landing:landing/shop/payments"
    ]
    # The aggregate below the join is reached from every hop: it ends the DAG run's driver.
    assert {
        task.task_id
        for dag in (stream, backfill)
        for task in dag.tasks
        if getattr(task, "releases_driver", False)
    } == {"gold_merchant_revenue", "undo"}


@pytest.mark.quality
def test_a_stream_runs_gate_fails_when_one_of_its_repairs_failed(factory, tmp_path, monkeypatch):
    """The stream DAG's hop task runs with ``--quality=report``, so a failed ``fail`` rule on what a
    join's repair wrote (run id ``<run>.repair-N``) must fail the hop's gate task, and the undo
    planner must name the hop. Plain files, no JVM; ``Recorder`` stands in for Airflow's task
    instance (only ``xcom_push`` is called)."""
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException
    from lakehouse_airflow.checks import plan_undo, quality_gate

    from spark_jobs.control import suites
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.spec import get_spec

    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path))
    lake = Lake.open(get_spec("shop"))
    folder = Path(suites.results_dir(lake))
    folder.mkdir(parents=True)

    def summary(run_id: str, hop: str, gate: str) -> None:
        failed = ["expect_column_values_to_not_be_null(amount)"] if gate == "failed" else []
        (folder / f"{run_id}.{hop}.json").write_text(
            json.dumps(
                {
                    "run_id": run_id,
                    "hop": hop,
                    "gate": gate,
                    "failed": failed,
                    "warned": [],
                    "rules": [],
                    "suite": f"shop.{hop}",
                    "rows": 3,
                    "versions": [4, 5],
                    "seconds": 0.1,
                }
            )
        )

    class Recorder:
        def __init__(self):
            self.pushed = {}

        def xcom_push(self, key, value):
            self.pushed[key] = value

    for hop in ("bronze_orders", "bronze_payments", "silver_orders", "silver_paid"):
        summary("R", hop, "passed")
    summary("R.repair-1", "silver_paid", "passed")
    summary("R2.repair-1", "silver_paid", "failed")  # another run's repair
    summary("R.repair-1", "gold_merchant_revenue", "failed")  # another hop's repair
    assert quality_gate("shop", "silver_paid", "R", Recorder())["gate"] == "passed"
    assert plan_undo("shop", "R") == "gold_merchant_revenue"  # its own repair failed
    (folder / "R.repair-1.gold_merchant_revenue.json").unlink()
    with pytest.raises(AirflowSkipException):
        plan_undo("shop", "R")

    summary("R.repair-2", "silver_paid", "failed")
    assert [each["run_id"] for each in suites.read_repair_summaries(lake, "R", "silver_paid")] == [
        "R.repair-1",
        "R.repair-2",
    ]
    with pytest.raises(AirflowFailException, match="failed on the run's repair R.repair-2"):
        quality_gate("shop", "silver_paid", "R", Recorder())
    # the first hop, in the spec's order, whose gate failed
    assert plan_undo("shop", "R") == "silver_paid"


def test_a_master_on_another_machine_needs_the_address_its_executors_reach_the_driver_at(
    factory, monkeypatch
):
    """Argument building only (spark-submit replaced): without ``LAKEHOUSE_SPARK_DRIVER_HOST`` the
    task fails before it submits, naming the setting; with it, the driver binds and is reached
    there (or binds to ``LAKEHOUSE_SPARK_DRIVER_BIND``). A driver the cluster places gets none."""
    from airflow.sdk.exceptions import AirflowFailException

    dag_factory, spec = factory
    master = "spark://10.1.2.3:7077"
    bronze = lambda: dag_factory.build_stream_dag(spec).get_task("bronze")
    monkeypatch.delenv("LAKEHOUSE_SPARK_DRIVER_HOST", raising=False)
    with pytest.raises(AirflowFailException, match="LAKEHOUSE_SPARK_DRIVER_HOST"):
        submitted(bronze(), {"run_id": RUN_ID, "params": {}}, master)
    monkeypatch.setenv("LAKEHOUSE_SPARK_DRIVER_HOST", "10.1.2.9")
    options, _arguments = _split(submitted(bronze(), {"run_id": RUN_ID, "params": {}}, master)[0])
    confs = dict(value.split("=", 1) for value in options["--conf"])
    assert confs["spark.driver.host"] == confs["spark.driver.bindAddress"] == "10.1.2.9"
    monkeypatch.setenv("LAKEHOUSE_SPARK_DRIVER_BIND", "0.0.0.0")
    argv, env = submitted(bronze(), {"run_id": RUN_ID, "params": {}}, master)
    confs = dict(value.split("=", 1) for value in _split(argv)[0]["--conf"])
    assert (
        confs["spark.driver.host"],
        confs["spark.driver.bindAddress"],
        env["SPARK_LOCAL_IP"],
    ) == ("10.1.2.9", "0.0.0.0", "0.0.0.0")
    monkeypatch.delenv("LAKEHOUSE_SPARK_DRIVER_HOST")
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_DEFAULT",
        json.dumps({"conn_type": "spark", "host": master, "extra": {"deploy-mode": "cluster"}}),
    )
    task = bronze()
    task.render_template_fields({"dag": task.dag, "run_id": RUN_ID, "params": {}})
    task.prepare()  # the cluster places the driver: no address of this machine's
    assert "spark.driver.host" not in task.conf and "SPARK_LOCAL_IP" not in task.env_vars
