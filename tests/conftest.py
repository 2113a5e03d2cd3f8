"""Shared fixtures: one SparkSession per test process, a fresh lake per test, helpers that
compute expected results from the landing files in plain Python."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT / "include" / "scripts"))
EXAMPLES = ROOT / "examples"
# The reference pipelines, for every test and the processes it starts, unless a test names others.
os.environ.setdefault("LAKEHOUSE_PIPELINES", str(EXAMPLES))

EVENT_TYPES = {"view", "click", "purchase"}
STRING_FIELDS = ("user_id", "page_id", "ad_id", "ad_type", "event_type", "ip_address")


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
TEST_SPARK_DEFAULTS = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


def pytest_configure(config):
    """The JVMs the tests start in subprocesses (``lakehouse`` runs, spark-submit, Airflow's
    tasks, a cluster) compile with C1 only: they live seconds, and C2's compile time is not paid
    back (in CI, the tests made of such runs took about a third less: the two DAGs at once
    344 -> 215 s, the cluster run 199 -> 125 s). The test process's own JVM lives the whole
    session and keeps C2 (see :func:`spark`: with C1 too, the in-process rollback tests took
    half as long again). It changes how fast code runs, never what it computes. Here and not at
    import: the benchmarks import this module and measure the JVM as users run it."""
    os.environ.setdefault("JDK_JAVA_OPTIONS", C1_ONLY)
    os.environ.setdefault("SPARK_SUBMIT_OPTS", " ".join(f"-D{key}={value}" for key, value in TEST_SPARK_DEFAULTS.items()))


@pytest.fixture(scope="session")
def spark():
    from spark_jobs.engine.session import build_session

    ours = os.environ.get("JDK_JAVA_OPTIONS") == C1_ONLY
    if ours:
        # This JVM lives the whole session: C2 pays back here. The serial collector: on the tests'
        # small data G1's concurrent and parallel GC threads cost about a tenth of this JVM's CPU
        # (tests/test_rollback.py alone: 385 s with G1, 333 s with it; docs/limitations.md).
        os.environ["JDK_JAVA_OPTIONS"] = TEST_JVM_GC
    try:
        session = build_session("lakehouse-tests", shuffle_partitions=4)
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
    suite, no check), which keeps each run about 10 s shorter: ``$LAKEHOUSE_QUALITY`` names an
    empty folder."""
    if request.node.get_closest_marker("quality") is not None:
        monkeypatch.delenv("LAKEHOUSE_QUALITY", raising=False)
    else:
        monkeypatch.setenv("LAKEHOUSE_QUALITY", str(tmp_path_factory.mktemp("no-quality-suites")))


@pytest.fixture
def lake_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "lake"
    monkeypatch.setenv("LAKEHOUSE_HOME", str(home))
    return home


def lakehouse(*args: str, env: dict | None = None, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """Run the installed ``lakehouse`` console script in a subprocess."""
    done = subprocess.run([str(VENV_BIN / "lakehouse"), *args], env=env or os.environ.copy(),
                          capture_output=True, text=True, **kwargs)
    if check and done.returncode != 0:
        raise AssertionError(f"lakehouse {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done


def killed_mid_run(argv: list[str], delay_s: float, after: Path | None = None) -> tuple[bool, int, str]:
    """``lakehouse ARGV`` in a process group of its own (the CLI and its JVM), SIGKILLed
    ``delay_s`` seconds after ``after`` exists (after its start when ``None``) unless it ended
    first: whether it was killed, its exit code and its standard output."""
    import signal
    import time

    job = subprocess.Popen([str(VENV_BIN / "lakehouse"), *argv], env=os.environ.copy(), stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    deadline = time.time() + 300
    while after is not None and job.poll() is None and not after.exists() and time.time() < deadline:
        time.sleep(0.1)
    try:
        job.wait(timeout=delay_s)
        killed = False
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        killed = True
    out = job.stdout.read()
    job.stdout.close()
    return killed, job.returncode, out


# -- expected values, computed from the files without the code under test ----------------------

def landing_lines(home: Path | str) -> list[tuple[str, str]]:
    """``(file name, line)`` for every line of every visible landing file (of a local lake, or
    through fsspec of an ``s3a://`` one)."""
    from spark_jobs.logs.fs import filesystem

    folder = f"{home}/landing/ad_events"
    fs = filesystem(folder)
    lines = []
    for path in sorted(fs.ls(folder, detail=False)):
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if name.startswith((".", "_")):
            continue
        lines.extend((name, line) for line in hadoop_lines(fs.cat_file(path)))
    return lines


def hadoop_lines(data: bytes) -> list[str]:
    """Lines as Spark's text source reads them: split at \\r\\n, \\n or \\r (nothing else),
    no empty last line after a final newline, bytes decoded as UTF-8 with U+FFFD for bad ones."""
    if not data:
        return []
    lines = re.split(rb"\r\n|\n|\r", data)
    if lines[-1] == b"":
        lines.pop()
    return [line.decode("utf-8", errors="replace") for line in lines]


def skeleton_events(files) -> list[dict]:
    """The valid events of landing files of a pipeline made by ``lakehouse new`` (its bronze rules:
    an object with a string ``id``, a ``kind`` of a, b or c, a number ``amount``, an integer
    ``event_time``), in file order."""
    events = []
    for path in files:
        for line in Path(path).read_text().splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if (isinstance(event, dict) and isinstance(event.get("id"), str) and event.get("kind") in ("a", "b", "c")
                    and isinstance(event.get("amount"), (int, float)) and isinstance(event.get("event_time"), int)):
                events.append(event)
    return events


def valid_event(line: str) -> dict | None:
    """The event in a line, or None when the rules of DESIGN/issue make it invalid."""
    if "\ufffd" in line or len(line.encode("utf-8")) > 1 << 20:
        return None  # bytes that are not UTF-8 (hadoop_lines made them U+FFFD), or longer than 1 MiB
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if not isinstance(event, dict) or any(event.get(key) is None for key in ("ad_id", "event_type", "event_time")):
        return None
    if any(event.get(key) is not None and not isinstance(event[key], str) for key in STRING_FIELDS):
        return None
    number = event["event_time"]
    if isinstance(number, bool) or not isinstance(number, (int, float)) or event["event_type"] not in EVENT_TYPES:
        return None
    if not 946_684_800_000 <= number < 4_102_444_800_000:  # [2000-01-01, 2100-01-01)
        return None
    return event


def campaigns_of(home: Path | str) -> dict[str, str]:
    from spark_jobs.logs.fs import filesystem

    path = f"{home}/landing/campaigns/campaigns.csv"
    text = filesystem(path).cat_file(path).decode()
    return {row["ad_id"]: row["campaign_id"] for row in csv.DictReader(text.splitlines())}


def expected_gold(home: Path | str) -> Counter:
    """Views per (campaign_id, window start ms) over every valid view in the landing files."""
    campaigns = campaigns_of(home)
    counts: Counter = Counter()
    for _name, line in landing_lines(home):
        event = valid_event(line)
        if event and event["event_type"] == "view" and event["ad_id"] in campaigns:
            time_ms = int(event["event_time"])
            counts[(campaigns[event["ad_id"]], time_ms - time_ms % 10_000)] += 1
    return counts


def gold_counter(spark, home: Path) -> Counter:
    rows = spark.read.format("delta").load(str(home / "tables" / "gold" / "campaign_views_10s")).collect()
    counter: Counter = Counter()
    for row in rows:
        window_ms = int(row.window_start.replace(tzinfo=__import__("datetime").UTC).timestamp() * 1000)
        assert (row.window_end - row.window_start).total_seconds() == 10
        assert (row.campaign_id, window_ms) not in counter, "gold has a duplicate key"
        counter[(row.campaign_id, window_ms)] = row.views
    return counter


BUSINESS = {
    "bronze": ("tables/bronze/ad_events", ["user_id", "page_id", "ad_id", "ad_type", "event_type", "event_time",
                                           "event_ts", "ip_address", "event_date", "_source_file"]),
    "silver": ("tables/silver/ad_views", ["campaign_id", "ad_id", "user_id", "page_id", "ad_type", "event_time",
                                          "event_ts", "ip_address", "event_date"]),
    "gold": ("tables/gold/campaign_views_10s", ["campaign_id", "window_start", "window_end", "views"]),
}


def table_rows(home: Path, hop: str, strip_home: bool = True) -> list[tuple]:
    """A hop's table as sorted tuples of its business columns (lineage columns left out), read by delta-rs."""
    relative, columns = BUSINESS[hop]
    rows = delta_rows(home, relative, *columns)
    if strip_home and "_source_file" in columns:
        index = columns.index("_source_file")
        rows = [row[:index] + (row[index].rsplit("/", 1)[-1],) + row[index + 1:] for row in rows]
    return sorted(rows, key=repr)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    """In one process, fast tests first (unit, then Spark, then slow ones), so a broken transform
    fails in seconds. In several (``make test`` runs pytest-xdist), the longest first (the model
    test, then the slow Airflow and Spark tests; the platform walk before all), so no process is left alone with a long test at
    the end while the other idles; and the tests of the three-increment lake in one group
    (``--dist loadgroup``), so one process builds that lake, not each."""
    for item in items:
        if "three_increments" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("three-increments"))

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
    """The S3 server (``include/scripts/s3_server.py``) for one test module, stopped by PID after it."""
    from s3_server import S3Server

    server = S3Server(tmp_path_factory.mktemp("s3"))
    server.start()
    yield server
    server.stop()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def delta_rows(home: Path | str, relative: str, *columns: str) -> list[tuple]:
    """A table's rows (these columns), sorted, as delta-rs reads them: another Delta implementation
    (Rust, no JVM), so a reader independent of the Spark and Delta code that wrote the table, and
    one that costs milliseconds where a Spark read costs about a second per check. An S3 lake's
    store comes from the standard ``AWS_*`` variables."""
    from deltalake import DeltaTable

    options = {}
    if str(home).startswith(("s3://", "s3a://")):
        options = {key: os.environ[key] for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL",
                                                    "AWS_REGION") if os.environ.get(key)}
        options["AWS_ALLOW_HTTP"] = str(options.get("AWS_ENDPOINT_URL", "").startswith("http://")).lower()
        home = "s3://" + str(home).split("://", 1)[1]
    table = DeltaTable(f"{home}/{relative}", storage_options=options).to_pyarrow_table(columns=list(columns))
    return sorted(zip(*(table.column(column).to_pylist() for column in columns), strict=True), key=repr)


def assert_tables_match_landing(home: Path | str) -> None:
    """Every table holds exactly what the landing files say, no row missing or twice.

    Bronze: one row per valid line (keyed by file, ad, type and time); quarantine: every
    invalid line; silver: one row per valid view with its campaign (None when the ad has
    none); gold: the plain-Python window counts, each key once. Read by delta-rs
    (:func:`delta_rows`); the model test's settle points read with Spark too and compare.
    """
    campaigns = campaigns_of(home)
    bronze, silver, quarantine = [], [], []
    for name, line in landing_lines(home):
        event = valid_event(line)
        if event is None:
            quarantine.append((line,))
            continue
        bronze.append((name, event["ad_id"], event["event_type"], int(event["event_time"])))
        if event["event_type"] == "view":
            silver.append((event["ad_id"], int(event["event_time"]), campaigns.get(event["ad_id"])))
    stored = [(path.rsplit("/", 1)[-1], *rest) for path, *rest in
              delta_rows(home, "tables/bronze/ad_events", "_source_file", "ad_id", "event_type", "event_time")]
    assert sorted(stored, key=repr) == sorted(bronze, key=repr), "bronze differs from the landing files"
    assert delta_rows(home, "tables/quarantine/ad_events", "raw_line") == sorted(quarantine, key=repr)
    assert delta_rows(home, "tables/silver/ad_views", "ad_id", "event_time", "campaign_id") == sorted(silver, key=repr)
    gold: Counter = Counter()
    for campaign, start, end, views in delta_rows(home, "tables/gold/campaign_views_10s", "campaign_id", "window_start",
                                                  "window_end", "views"):
        assert (end - start).total_seconds() == 10
        key = (campaign, int(start.replace(tzinfo=__import__("datetime").UTC).timestamp() * 1000))
        assert key not in gold, f"gold has the key {key} twice"
        gold[key] = views
    assert gold == expected_gold(home)


# -- shared lake set-ups -------------------------------------------------------------------------

@pytest.fixture
def pipelines(tmp_path, monkeypatch):
    """Point LAKEHOUSE_PIPELINES at a copy of the ad_events spec with some knobs changed."""
    def write(**changes) -> Path:
        folder = spec_copy(tmp_path / "pipelines", **changes)
        monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(folder))
        return folder
    return write


def spec_copy(folder: Path, **changes) -> Path:
    """``folder`` with a copy of the ad_events pipeline folder, some knobs of its spec changed;
    returns the folder (a pipelines folder)."""
    pipeline = example_copy(folder, "ad_events")
    spec = yaml.safe_load((pipeline / "ad_events.yaml").read_text())
    spec.update(changes)
    (pipeline / "ad_events.yaml").write_text(yaml.safe_dump(spec))
    return folder


def suites_copy(folder: Path) -> Path:
    """``folder`` holding a copy of every example's suites as ``<pipeline>/<hop>.json`` (the
    layout of ``$LAKEHOUSE_QUALITY``); returns it."""
    for pipeline in sorted(EXAMPLES.iterdir()):
        if (pipeline / "quality").is_dir():
            shutil.copytree(pipeline / "quality", folder / pipeline.name, dirs_exist_ok=True)
    return folder


def example_copy(folder: Path, name: str) -> Path:
    """A copy of the example pipeline ``name``'s folder in the pipelines folder ``folder``; returns
    the copy's path."""
    target = folder / name
    shutil.copytree(EXAMPLES / name, target, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    return target


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
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # the JVM's snapshots of the last copy
    monkeypatch.setenv("LAKEHOUSE_HOME", str(home))
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(specs))
    return home


def increment(seed: int, hop: str = "all", run_id: str | None = None, events: int = 240) -> None:
    """New landing files (two, from minute ``seed`` of 2026-04-01, 3% bad lines), then a run: through the service API."""
    from spark_jobs import service
    from spark_jobs.model.times import parse_time

    service.generate("ad_events", events, files=2, seed=seed, start_ms=parse_time(f"2026-04-01T00:{seed:02d}:00", "start"),
                     bad_fraction=0.03)
    service.run("ad_events", hop, run_id=run_id, progress=lambda line: None).raise_for_gate()


def file_tree(home: Path) -> dict[str, tuple[int, int]]:
    return {str(path.relative_to(home)): (path.stat().st_size, path.stat().st_mtime_ns)
            for path in sorted(home.rglob("*")) if path.is_file() and "_ops/locks" not in str(path)}


# -- Airflow -------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory) -> Path:
    """A migrated metadata DB (SQLite) for this test process's Airflow subprocesses: a copy of one
    migrated once per Airflow version in .cache/airflow-db (the test processes share it)."""
    from lakehouse_platform import migrated_copy, platform_env  # include/scripts/lakehouse_platform.py

    home = tmp_path_factory.mktemp("airflow")
    migrated_copy(platform_env({**os.environ, "AIRFLOW_HOME": str(home)}, port=18080))
    return home


@pytest.fixture
def airflow_env(airflow_home, lake_home) -> dict[str, str]:
    """The environment of an Airflow subprocess on this test's lake."""
    from lakehouse_platform import platform_env

    return platform_env({**os.environ, "AIRFLOW_HOME": str(airflow_home), "LAKEHOUSE_HOME": str(lake_home)},
                        port=18080)


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
        pytest.fail("Airflow was imported before the airflow_in_process fixture: its settings would be wrong")
    os.environ.update(changed)
    from airflow.configuration import conf

    assert conf.get("database", "sql_alchemy_conn") == changed["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    yield home
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


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
            code = main(argv[argv.index(application) + 1:])
        except SystemExit as exit_:
            code = exit_.code
    if code != 0:
        raise AirflowException(f"Cannot execute: {argv}. Error code is: {code}.")


def dag_test(dag_id: str, logical_date: str | None = None, conf: dict | None = None) -> tuple[str, str, dict[str, str]]:
    """Run one DAG run with ``dag.test()`` in this process (needs the ``airflow_in_process``
    fixture): Airflow's own dependency and trigger-rule loop, XCom and templates, with the Spark
    tasks' CLI commands run here (see :func:`_submit_in_this_process`). The run's id, its state
    and each task's state."""
    from unittest import mock

    import pendulum
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from lakehouse_airflow.dag_factory import build_all

    dag = build_all()[dag_id]
    dag.deadline = None  # as under `airflow dags test` (lakehouse_airflow.freshness.in_dag_test says why)
    date = pendulum.parse(logical_date, tz="UTC") if logical_date else None
    with mock.patch.object(SparkSubmitHook, "submit", _submit_in_this_process), \
            mock.patch.dict(os.environ, {"LAKEHOUSE_DRIVER": "task"}):
        run = dag.test(logical_date=date, run_conf=conf)
    return run.run_id, str(run.state), {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


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
    # Each task submits its own application (the shared driver's tests: tests/test_driver.py).
    with mock.patch.object(SparkSubmitHook, "submit", submit), mock.patch.dict(os.environ, {"LAKEHOUSE_DRIVER": "task"}):
        task.execute(context)
