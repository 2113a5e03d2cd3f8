"""Shared fixtures: one SparkSession per test process, a fresh lake per test, Airflow's home.
The helpers the tests import are in ``testkit/`` (the benchmarks use them too)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

# The helpers' asserts say what differed, as a test's own do (pytest rewrites them on import).
pytest.register_assert_rewrite("testkit")

from testkit.lakes import increment, spec_copy  # noqa: E402
from testkit.paths import EXAMPLES, ROOT  # noqa: E402

sys.path.insert(0, str(ROOT / "include" / "scripts"))
# The reference pipelines, for every test and the processes it starts, unless a test names others.
os.environ.setdefault("LAKEHOUSE_PIPELINES", str(EXAMPLES))


# With C1 only the JVM reserves 48 MiB for compiled code, not 240: a JVM that lives minutes (an
# always-on session, a DAG run's shared driver) filled it, compiled nothing more, and ran
# interpreted, slowly and with deep stacks (a StackOverflowError in shop's always-on test).
C1_ONLY = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
TEST_JVM_GC = "-XX:+UseSerialGC"

# Every Spark application of the tests (this process's and those in subprocesses) evaluates
# expressions interpreted instead of compiling generated code per query: on the tests' small
# increments compiling costs more than it saves (a run of three hops about a quarter faster).
# Spark's own test suites run both ways, and the two give the same results; the benchmarks keep
# Spark's defaults. They reach every driver as system properties (SparkConf reads ``spark.*``
# ones) through $SPARK_SUBMIT_OPTS, which spark-submit adds to the driver's JVM, pyspark's local
# one included. (A $SPARK_CONF_DIR would do too, but a class-data sharing archive cannot be
# used with a non-empty folder on the class path, see spark_jobs/engine/jvm.py.)
# Two more for the same small increments: adaptive execution re-plans each batch query after its
# shuffles, and Delta checks the table state it rebuilt after a commit against the checksum file
# of that version (it still writes the file). Off, a warm run of three hops took 6 to 10% less
# CPU (paired samples); neither changes a row.
TEST_SPARK_DEFAULTS = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
    "spark.databricks.delta.checksum.validation.enabled": "false",
}


def pytest_configure(config):
    """The JVMs the tests start in subprocesses (``lakehouse`` runs, spark-submit, Airflow's
    tasks, a cluster) compile with C1 only: they live seconds, and C2's compile time is not paid
    back (in CI, the tests made of such runs took about a third less: the two DAGs at once
    344 -> 215 s, the cluster run 199 -> 125 s). The test process's own JVM lives the whole
    session and keeps C2 (see :func:`spark`: with C1 too, the in-process rollback tests took
    half as long again). It changes how fast code runs, never what it computes. Here and not at
    import: the benchmarks import this module and measure the JVM as users run it."""
    os.environ.setdefault("JDK_JAVA_OPTIONS", C1_ONLY)
    os.environ.setdefault(
        "SPARK_SUBMIT_OPTS",
        " ".join(f"-D{key}={value}" for key, value in TEST_SPARK_DEFAULTS.items()),
    )


@pytest.fixture(scope="session")
def spark():
    from spark_jobs.engine.jvm import driver_java_options
    from spark_jobs.engine.session import build_session
    from spark_jobs.model import settings

    ours = os.environ.get("JDK_JAVA_OPTIONS") == C1_ONLY
    if ours:
        # This JVM lives the whole session: C2 pays back here. The serial collector: on the tests'
        # small data G1's concurrent and parallel GC threads cost about a tenth of this JVM's CPU
        # (tests/spark/test_rollback.py alone: 385 s with G1, 333 s with it; docs/limitations.md).
        os.environ["JDK_JAVA_OPTIONS"] = TEST_JVM_GC
    # Its heap at full size from the start: grown from the JVM's small initial heap, the young
    # generation (a third of the heap) stays small for long, and the old one grows by steps, each
    # after a full collection. With it, test_pipeline_e2e.py's JVM collected 82 times instead of
    # 301 and spent 3.2 s in the collector instead of 6.0 (jstat), in about 95 s of tests.
    java_options = f"{driver_java_options()} -Xms{settings.DRIVER_MEMORY.value()}"
    try:
        session = build_session("lakehouse-tests", shuffle_partitions=4, java_options=java_options)
    finally:
        if ours:
            os.environ["JDK_JAVA_OPTIONS"] = C1_ONLY
    for key, value in TEST_SPARK_DEFAULTS.items():
        assert session.conf.get(key) == value, f"{key} of $SPARK_SUBMIT_OPTS was not applied"
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def quality_suites(request, tmp_path_factory, monkeypatch) -> None:
    """Tests marked ``quality`` check the examples' suites after every hop (each in its pipeline
    folder's ``quality/``); the others run the pipeline without suites (a supported set-up: no
    suite, no check), which keeps a warm run of ad_events' three hops about a second shorter
    (paired in-process runs): ``$LAKEHOUSE_QUALITY`` names an empty folder."""
    if request.node.get_closest_marker("quality") is not None:
        monkeypatch.delenv("LAKEHOUSE_QUALITY", raising=False)
    else:
        monkeypatch.setenv("LAKEHOUSE_QUALITY", str(tmp_path_factory.mktemp("no-quality-suites")))


@pytest.fixture
def lake_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "lake"
    monkeypatch.setenv("LAKEHOUSE_HOME", str(home))
    return home


# -- expected values, computed from the files without the code under test ----------------------


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    """A test that takes the ``spark`` fixture is marked ``spark``, so ``-m "not spark"`` (the
    JVM-free tier) leaves it out. In one process, fast tests first (unit, then Spark, then slow
    ones), so a broken transform fails in seconds. In several (``make test`` runs
    pytest-xdist), the longest first (the model test, then the slow Airflow and Spark tests; the
    platform walk before all), so no process is left alone with a long test at the end while
    the other idles; and the tests of the three-increment lake in one group (``--dist
    loadgroup``), so one process builds that lake, not each."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "three_increments" in fixtures:
            item.add_marker(pytest.mark.xdist_group("three-increments"))
        if "spark" in fixtures:  # a SparkSession: never in the JVM-free tier (`make test-fast`)
            item.add_marker(pytest.mark.spark)

    def rank(item) -> int:
        if item.get_closest_marker("unit"):
            return 0
        if item.get_closest_marker("longest"):
            return 5
        if item.module.__name__.endswith("test_model"):
            return 4
        if item.get_closest_marker("slow"):
            return 3 if item.get_closest_marker("airflow") else 2
        return 1

    several = "PYTEST_XDIST_WORKER" in os.environ  # xdist's workers collect, and set this
    items.sort(key=lambda item: -rank(item) if several else rank(item))


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """The S3 server (``include/scripts/s3_server.py``) for one test module, stopped
    by PID after it.
    """
    from s3_server import S3Server

    server = S3Server(tmp_path_factory.mktemp("s3"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    """The Kafka broker (``include/scripts/kafka_server.py``) for one test module, stopped
    by PID after it.
    """
    from kafka_server import KafkaServer

    server = KafkaServer(tmp_path_factory.mktemp("kafka"))
    server.start()
    yield server
    server.stop()


# -- shared lake set-ups -------------------------------------------------------------------------


@pytest.fixture
def pipelines(tmp_path, monkeypatch):
    """Point LAKEHOUSE_PIPELINES at a copy of the ad_events spec with some knobs changed."""

    def write(**changes) -> Path:
        folder = spec_copy(tmp_path / "pipelines", **changes)
        monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(folder))
        return folder

    return write


@pytest.fixture(scope="session")
def _three_increment_template(spark, tmp_path_factory) -> tuple[Path, Path, Path]:
    """A lake after three increments (runs r0, r1, r2 of every hop; the source log compacts every
    2 batches), built once per test process (its users share one under ``--dist loadgroup``).
    Checkpoints hold absolute paths of landing files, so copies are put back at the path it was
    built at, never elsewhere."""
    base = tmp_path_factory.mktemp("three-increments")
    home, template = base / "lake", base / "template"
    specs = spec_copy(base / "pipelines", source_log_compact_interval=2)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAKEHOUSE_HOME", str(home))
        patch.setenv("LAKEHOUSE_PIPELINES", str(specs))
        patch.setenv("LAKEHOUSE_QUALITY", str(base / "no-suites"))
        for seed in range(3):
            increment(seed, run_id=f"r{seed}")
    shutil.copytree(home, template)
    return home, specs, template


@pytest.fixture
def three_increments(_three_increment_template, spark, monkeypatch) -> Path:
    """A fresh copy of the three-increment lake (see above) as LAKEHOUSE_HOME; returns its path."""
    home, specs, template = _three_increment_template
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(template, home)
    # the JVM's snapshots of the last copy
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    monkeypatch.setenv("LAKEHOUSE_HOME", str(home))
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(specs))
    return home


# -- Airflow -------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory) -> Path:
    """A migrated metadata DB (SQLite) for this test process's Airflow subprocesses: a copy of one
    migrated once per Airflow version in .cache/airflow-db (the test processes share it)."""
    # include/scripts/lakehouse_platform.py
    from lakehouse_platform import migrated_copy, platform_env

    home = tmp_path_factory.mktemp("airflow")
    migrated_copy(platform_env({**os.environ, "AIRFLOW_HOME": str(home)}, port=18080))
    return home


@pytest.fixture
def airflow_env(airflow_home, lake_home) -> dict[str, str]:
    """The environment of an Airflow subprocess on this test's lake."""
    from lakehouse_platform import platform_env

    return platform_env(
        {**os.environ, "AIRFLOW_HOME": str(airflow_home), "LAKEHOUSE_HOME": str(lake_home)},
        port=18080,
    )


@pytest.fixture(autouse=True)
def airflow_stays_out(request):
    """A test that imports Airflow in-process without :func:`airflow_in_process` fails, whatever ran
    before it: Airflow reads its settings once, so the import would spoil that fixture for every
    later test of the process (which ones depends on how pytest-xdist shares the tests out)."""
    before = "airflow.configuration" in sys.modules
    yield
    if (
        not before
        and "airflow.configuration" in sys.modules
        and "airflow_in_process" not in request.fixturenames
    ):
        pytest.fail(
            "this test imported Airflow without the airflow_in_process fixture: ask for it, or "
            "import what needs no Airflow (lakehouse_airflow.ui.render renders the pages)"
        )


@pytest.fixture(scope="session")
def airflow_in_process(airflow_home, tmp_path_factory):
    """Airflow imported into this test process, on its own copy of the migrated metadata DB.

    Airflow reads its configuration once, at import, so every in-process use (the operator
    tests, :func:`dag_test`) goes through this fixture, and it refuses to go on when something
    imported Airflow first with another home."""
    from lakehouse_platform import platform_env

    home = tmp_path_factory.mktemp("airflow-in-process")
    shutil.copy(airflow_home / "airflow.db", home / "airflow.db")
    env = platform_env({**os.environ, "AIRFLOW_HOME": str(home)}, port=18080)
    changed = {key: value for key, value in env.items() if key.startswith("AIRFLOW")}
    saved = {key: os.environ.get(key) for key in changed}
    if "airflow.configuration" in sys.modules:
        pytest.fail(
            "Airflow was imported before the airflow_in_process fixture: its "
            "settings would be wrong"
        )
    os.environ.update(changed)
    from airflow.configuration import conf

    assert (
        conf.get("database", "sql_alchemy_conn") == changed["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    )
    yield home
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
