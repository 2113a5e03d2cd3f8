"""``make run``'s launcher, bounded in time on a spare port, and the always-on mode."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import metadata_db  # include/scripts (tests/conftest.py puts it on the path)
import psutil
import pytest

from testkit.airflow import Api
from testkit.paths import ROOT, VENV_BIN, free_port
from testkit.platform import (
    LAUNCHER,
    command_of,
    descendants,
    drivers_left,
    kill_tree,
    launch,
    left_running,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


SCREENSHOTS = ROOT / "tests" / "output" / "screenshots"


USER_DAG = """
import pendulum
from airflow.sdk import DAG, task

from lakehouse_airflow.assets import table_asset

GOLD = table_asset("ad_events", "gold")

with DAG("team__on_gold", schedule=[GOLD], start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False):

    @task(inlets=[GOLD])
    def report(*, inlet_events=None):
        print("gold changed:", inlet_events[GOLD][-1].extra)

    report()
"""  # noqa: E501


def _dag_parsed(api: Api, dag_id: str) -> bool:
    try:
        api.call("GET", f"/dags/{dag_id}")
        return True
    except urllib.error.HTTPError as error:
        if error.code != 404:
            raise
        return False


def _stream_run_in_bronze(api: Api, timeout_s: float = 300) -> str:
    """The id of the stream DAG's run whose bronze task is running (the scheduler's or ours)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        for run in api.call("GET", "/dags/ad_events__stream/dagRuns?limit=20")["dag_runs"]:
            if api.task_state("ad_events__stream", run["dag_run_id"], "bronze") == "running":
                return run["dag_run_id"]
        time.sleep(1)
    raise AssertionError("no stream run's bronze task ran")


def _assets_graph(api: Api) -> int:
    """Airflow's assets: every hop's table of the pipeline the platform serves (``launch`` serves
    ad_events alone) is an asset of group ``lakehouse`` with its producing tasks (the stream's
    gate, the backfill's hop task), and gold's graph (the route Airflow's asset page draws) runs
    landing -> bronze -> silver -> gold through the gates. Returns gold's asset id."""
    from spark_jobs.model.spec import get_spec

    assets = {asset["name"]: asset for asset in api.call("GET", "/assets?limit=1000")["assets"]}
    tables = {f"ad_events.{hop.name}": "ad_events" for hop in get_spec("ad_events").hops}
    assert set(tables) <= set(assets), sorted(set(tables) - set(assets))
    for name, pipeline in tables.items():
        asset = assets[name]
        producers = sorted((task["dag_id"], task["task_id"]) for task in asset["producing_tasks"])
        hop = name.split(".", 1)[1]
        assert asset["group"] == "lakehouse" and producers == [
            (f"{pipeline}__backfill", hop),
            (f"{pipeline}__stream", f"gate_{hop}"),
        ], asset
    ours = [asset for asset in assets.values() if asset["uri"].startswith("lakehouse://")]
    assert {asset["group"] for asset in ours} == {"lakehouse"}, ours
    gold = assets["ad_events.gold"]["id"]
    # The asset page's "Task Dependencies" view (its other, "Scheduling", is DAG to DAG).
    graph = api.call("GET", f"/dependencies?node_id=asset:{gold}&dependency_type=data", api="/ui")
    labels = {node["id"]: node["label"] for node in graph["nodes"]}
    into = {}  # each node's sources
    for edge in graph["edges"]:
        into.setdefault(edge["target_id"], set()).add(edge["source_id"])
    chain, node = [], f"asset:{gold}"
    while node in into:  # up from gold: asset <- its stream gate <- the asset that gate reads
        chain.append(labels[node])
        gate = next(
            (source for source in into[node] if labels[source].startswith("ad_events__stream.")),
            None,
        )
        assert gate is not None, (labels[node], graph)
        chain.append(labels[gate])
        node = next(iter(into.get(gate, ())), None)
    chain.append(labels.get(node, node))
    assert chain[::-1] == [
        "ad_events.landing",
        "ad_events__stream.gate_bronze",
        "ad_events.bronze",
        "ad_events__stream.gate_silver",
        "ad_events.silver",
        "ad_events__stream.gate_gold",
        "ad_events.gold",
    ], chain
    return gold


def _walk_the_ui(
    base: str, user: str, password: str, lake, held: contextlib.ExitStack, spark
) -> None:
    """What a person does in the browser (docs/guides/lakehouse-page.md), with screenshots in
    tests/output/screenshots/: log in through Airflow's login page; with a stream DAG run done
    (a backfill of the days its files hold created through the REST API while its bronze task was
    held in its Spark application, waiting for the pipeline's lock, which ``held`` holds), open the
    Lakehouse view, each hop with its figures, a hop's charts, the Data Docs page behind a gate
    task's extra link; plan a rollback, confirm it, and the rollback DAG run it triggered
    succeeds. Between the two, every table equals the landing files, and a stream run that found
    nothing new emits no asset event, so the team's DAG does not run on it."""
    from testkit.browser import Browser
    from testkit.expected import assert_tables_match_landing

    api = Api(base, user, password)
    deadline = time.time() + 180
    while not _dag_parsed(api, "team__on_gold"):  # the team's DAG (USER_DAG), in its own bundle
        assert time.time() < deadline, "the team's DAG was not parsed"
        time.sleep(2)
    api.call("PATCH", "/dags/team__on_gold", {"is_paused": False})
    # unless the schedule's comes first
    api.call("POST", "/dags/ad_events__stream/dagRuns", {"logical_date": None})
    stream = _stream_run_in_bronze(api)
    deadline = time.time() + 180
    while "waits for the pipeline's lock: held by the test" not in api.task_log(
        "ad_events__stream", stream, "bronze"
    ):
        assert time.time() < deadline, "the stream run's bronze task never waited for the lock"
        time.sleep(1)
    # While bronze's Spark application waits for the lock: a backfill of the day it is about to
    # stream, through the REST API as the UI makes one (with "Unpause on trigger": Airflow runs
    # nothing of a paused DAG, a backfill's runs included).
    api.call("PATCH", "/dags/ad_events__backfill", {"is_paused": False})
    backfill = api.call(
        "POST",
        "/backfills",
        {
            "dag_id": "ad_events__backfill",
            "from_date": "2026-03-01T00:00:00Z",
            "to_date": "2026-03-01T00:00:00Z",
            "max_active_runs": 1,
        },
    )
    # it was created mid-task
    assert api.task_state("ad_events__stream", stream, "bronze") == "running"
    # The stream DAG's freshness deadline (10 seconds here) passes while bronze waits: the executor
    # runs the callback, which writes the alert the page shows (held until then, whatever the
    # machine's speed: a run done within its deadline raises none).
    deadline = time.time() + 180
    while not (
        alerts := [
            alert
            for path in (lake / "_ops/alerts/ad_events").glob("*.json")
            if (alert := json.loads(path.read_text()))["dag_run"] == stream
        ]
    ):
        assert time.time() < deadline, "no freshness alert from the stream run's deadline"
        time.sleep(1)
    assert alerts[0]["freshness"] == "10 seconds", alerts
    held.close()  # the lock: bronze goes on, and the backfill's tasks take the lock in turn
    assert api.wait_for_run("ad_events__stream", stream) == "success", api.failures(
        "ad_events__stream", stream
    )
    # The team's DAG scheduled on gold's asset ran on a gold event, which names gold's version. The
    # stream's or the backfill's: the two can change gold within one scheduler loop, and then
    # Airflow's asset-triggered run consumes the events up to its queue row's first time and deletes
    # the row, so the later event waits for gold's next change (seen in CI: 60 ms apart).
    backfill_runs = api.call("GET", "/dags/ad_events__backfill/dagRuns?limit=10")["dag_runs"]
    gold_writers = [
        ("ad_events__stream", stream),
        *[("ad_events__backfill", run["dag_run_id"]) for run in backfill_runs],
    ]
    gold = api.wait_for_asset_run("team__on_gold", *gold_writers)
    commits = sorted(
        int(path.stem)
        for path in (lake / "tables/gold/campaign_views_10s/_delta_log").glob("*.json")
    )
    assert gold["extra"]["version"] in commits and gold["extra"]["rows"] > 0
    # the stream's gate, the backfill's hop task
    assert gold["source_task_id"] in ("gate_gold", "gold")
    # 2026-03-01 only: unpausing the DAG scheduled no run of its own (its timetable). A backfill of
    # several days makes one run each (test_airflow, through Airflow's CLI).
    assert backfill["id"] and [run["run_type"] for run in backfill_runs] == ["backfill"], (
        backfill_runs
    )
    for run in backfill_runs:
        run_id = run["dag_run_id"]
        assert api.wait_for_run("ad_events__backfill", run_id) == "success", api.failures(
            "ad_events__backfill", run_id
        )
    # The stream and the backfill over the same days, each task under the lock in turn:
    # every line once.
    assert_tables_match_landing(lake)
    # Nothing new: the stream run skips its Spark tasks, emits no asset event, and so the team's DAG
    # does not run on it (given a few scheduler loops to show it would not). Whether gold had work
    # left depends on which writer took the lock first: silver rows a backfill added (none streamed)
    # are new to gold's stream. So a first run may still have work; the second cannot.
    for _ in range(2):
        idle = api.call("POST", "/dags/ad_events__stream/dagRuns", {"logical_date": None})[
            "dag_run_id"
        ]
        assert api.wait_for_run("ad_events__stream", idle) == "success", api.failures(
            "ad_events__stream", idle
        )
        if api.task_state("ad_events__stream", idle, "bronze") == "skipped":
            break
    assert api.task_state("ad_events__stream", idle, "bronze") == "skipped"
    # an asset event is written as its task ends, before the run's success: a few loops more
    time.sleep(5)
    assert (
        api.call("GET", f"/assets/events?source_run_id={urllib.parse.quote(idle, safe='')}")[
            "asset_events"
        ]
        == []
    )
    assert api.runs_on_events_of("team__on_gold", ("ad_events__stream", idle)) == []
    assert api.runs_on_events_of("team__on_gold", *gold_writers)  # as the runs that wrote gold did

    gold_asset = _assets_graph(api)

    with Browser() as browser:
        browser.goto(f"{base}/")
        browser.wait_for("location.pathname.includes('/auth/login')", what="the login page")
        browser.type_into("input[name='username']", user)
        browser.type_into("input[name='password']", password)
        browser.screenshot(SCREENSHOTS / "01-login.png")
        browser.click("button[type='submit']")
        browser.wait_for(
            "!location.pathname.includes('/auth/login') && document.cookie.includes('_token')",
            what="the login to finish",
        )

        browser.goto(f"{base}/plugin/lakehouse")  # the navigation entry: the app in an iframe
        framed = "(document.querySelector('iframe') || {}).contentDocument"
        browser.wait_for(
            f"{framed} && {framed}.querySelectorAll('tr.hop').length === 3", what="the framed page"
        )
        browser.screenshot(SCREENSHOTS / "02-lakehouse-in-airflow.png")

        # The alert the stream run's missed deadline wrote (above).
        browser.goto(f"{base}/lakehouse/")
        assert "Freshness deadline missed" in browser.text("#pipeline-ad_events p.alert")
        rows = browser.eval(
            "[...document.querySelectorAll('#pipeline-ad_events tr.hop')].map(r => r.innerText)"
        )
        assert [row.split()[0] for row in rows] == ["bronze", "silver", "gold"], rows
        for row in rows:  # the last committed batch is at least the one the stream run committed
            hop, cells = row.split()[0], row.split("\t")
            record = json.loads((lake / f"_ops/runs/ad_events/{stream}.{hop}.json").read_text())
            assert (
                int(cells[1].split()[0]) >= max(record["batch_ids"], default=0)
                and "succeeded" in row
            ), (row, record)
        browser.screenshot(SCREENSHOTS / "03-pipelines.png")

        browser.click("tr.hop[data-hop='silver'] a")
        browser.wait_for(
            "document.querySelectorAll('svg.chart').length === 4", what="the hop's charts"
        )
        assert browser.eval("document.querySelectorAll('#rows-per-second rect.bar').length") >= 1
        browser.screenshot(SCREENSHOTS / "04-hop-silver.png")

        links = api.call(
            "GET",
            f"/dags/ad_events__stream/dagRuns/{urllib.parse.quote(stream, safe='')}"
            "/taskInstances/gate_silver/links",
        )
        # the gate task's extra link, as the UI shows it
        docs = links["extra_links"].get("Data Docs")
        assert docs and docs.startswith(f"{base}/lakehouse/pipelines/ad_events/quality/"), links
        browser.goto(docs)
        browser.wait_for(
            "document.body.innerText.includes('ad_events.silver')", what="the Data Docs page"
        )
        browser.screenshot(SCREENSHOTS / "05-data-docs.png")

        # the event log, as the stream run's commands appended it: its hops' runs are there
        browser.goto(f"{base}/lakehouse/pipelines/ad_events/events")
        browser.wait_for(
            "document.querySelectorAll('tr.event').length > 0", what="the events page's rows"
        )
        shown = browser.eval("document.querySelector('table.events').innerText")
        for hop in ("bronze", "silver", "gold"):
            assert f"{hop}: run-once {stream} succeeded" in shown.replace("\t", " "), shown[:2000]
        browser.screenshot(SCREENSHOTS / "12-events.png")

        browser.goto(f"{base}/assets")  # Airflow's assets view: every table from the first parse
        browser.wait_for(
            "document.body.innerText.includes('ad_events.gold')", what="the assets view"
        )
        browser.screenshot(SCREENSHOTS / "08-assets.png")
        # gold's graph, landing -> bronze -> silver -> gold
        browser.goto(f"{base}/assets/{gold_asset}")
        browser.wait_for(
            "[...document.querySelectorAll('button')].some(b => "
            "b.innerText.includes('Task Dependencies'))",
            what="gold's asset page",
        )
        browser.eval(
            "[...document.querySelectorAll('button')].find(b => b.innerText.includes('Task "
            "Dependencies')).click()"
        )
        browser.wait_for(
            "document.querySelectorAll('.react-flow__node').length >= 7",
            what="gold's task dependencies",
        )
        browser.screenshot(SCREENSHOTS / "09-asset-graph.png")

        browser.goto(
            f"{base}/lakehouse/pipelines/ad_events/rollback?hop=bronze&to_run={urllib.parse.quote(stream)}"
        )
        plan = browser.text("#plan-text")
        assert "undo batches" in plan and "bronze" in plan and "gold" in plan, plan
        browser.screenshot(SCREENSHOTS / "06-rollback-plan.png")
        browser.click("#confirm")
        browser.wait_for("!!document.querySelector('#link')", what="the triggered rollback")
        rollback_run = urllib.parse.unquote(browser.eval("location.search").split("triggered=")[1])
        browser.screenshot(SCREENSHOTS / "07-rollback-triggered.png")
    assert api.wait_for_run("ad_events__rollback", rollback_run) == "success", api.failures(
        "ad_events__rollback", rollback_run
    )
    journals = [
        json.loads(path.read_text()) for path in (lake / "_ops/rollbacks/ad_events").glob("*.json")
    ]
    assert [journal["status"] for journal in journals] == ["succeeded"], journals


@pytest.mark.airflow
@pytest.mark.quality
@pytest.mark.longest
def test_platform_serves_ui_on_loopback_with_auth_and_nothing_outlives_it(tmp_path, spark):
    """The launcher serves the UI behind a login on 127.0.0.1 with the stream and rollback DAGs
    unpaused, and a person can work from it (:func:`_walk_the_ui`); a second launcher refuses while
    it runs; SIGHUP (a closed terminal) stops every process it started. Then a second platform is
    killed with SIGKILL: its watchdog stops what it started."""
    from spark_jobs.control.coordination.lock import pipeline_lock
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.spec import get_spec

    lake = tmp_path / "lake"
    # Events of 2026-03-01 (the walk backfills that day), beside the launcher's sample file of
    # today; then no more files (a trickle of one every hour), so a later stream run finds nothing.
    subprocess.run(
        [
            str(VENV_BIN / "lakehouse"),
            "generate",
            "ad_events",
            "--events",
            "400",
            "--files",
            "2",
            "--seed",
            "5",
            "--start",
            "2026-03-01T12:00:00",
            "--bad-fraction",
            "0.02",
        ],
        env={**os.environ, "LAKEHOUSE_HOME": str(lake)},
        check=True,
        capture_output=True,
    )
    held = contextlib.ExitStack()  # the pipeline's lock, as a writer holds it: the walk lets it go
    held.enter_context(pipeline_lock(Lake(str(lake), get_spec("ad_events")), "held by the test"))
    port = free_port()
    # A freshness of 10 seconds: the first stream run, held by the lock, misses its deadline.
    process, env, login = launch(
        tmp_path,
        port,
        user_dags={"on_gold.py": USER_DAG},
        freshness="10 seconds",
        trickle_every=3600,
    )
    started: list[psutil.Process] = []
    try:
        assert f"http://127.0.0.1:{port}" in login, login
        user, password = login.split("login:")[1].strip().split(" / ")
        base = f"http://127.0.0.1:{port}"
        # Authentication is on: the REST API refuses without a token, accepts with one.
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{base}/api/v2/dags", timeout=10)
        assert refused.value.code in (401, 403)
        request = urllib.request.Request(
            f"{base}/auth/token",
            data=json.dumps({"username": user, "password": password}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        token = json.load(urllib.request.urlopen(request, timeout=10))["access_token"]
        authorised = urllib.request.Request(
            f"{base}/api/v2/dags/ad_events__stream", headers={"Authorization": f"Bearer {token}"}
        )
        dag = json.load(urllib.request.urlopen(authorised, timeout=10))
        assert dag["is_paused"] is False
        # the Lakehouse page triggers it
        authorised.full_url = f"{base}/api/v2/dags/ad_events__rollback"
        assert json.load(urllib.request.urlopen(authorised, timeout=10))["is_paused"] is False
        listening = subprocess.run(["ss", "-ltnp"], capture_output=True, text=True).stdout
        ours = [line for line in listening.splitlines() if f":{port} " in line]
        assert ours and all("127.0.0.1:" in line for line in ours), ours
        assert list((tmp_path / "lake/landing/ad_events").glob("events-*.json"))
        try:
            _walk_the_ui(base, user, password, lake, held, spark)
        # what Airflow's scheduler said meanwhile, for CI's excerpt
        except AssertionError as failed:
            log = tmp_path / "airflow/logs/scheduler.log"
            said = [
                line
                for line in (log.read_text(errors="replace") if log.exists() else "").splitlines()
                if any(word in line for word in ("ERROR", "WARNING", "team__on_gold", "Traceback"))
            ]
            raise AssertionError(f"{failed}\nscheduler.log:\n" + "\n".join(said[-40:])) from failed
        # The DAG processor's idle loop was stretched by the plugin's listener (IDLE_SETTINGS).
        assert "comes round every 5 s" in (tmp_path / "airflow/logs/dag-processor.log").read_text(
            errors="replace"
        )
        # The scheduler's executor listens for runs made outside it (the walk triggered some).
        assert "LISTEN lakehouse_scheduler_wake" in (
            tmp_path / "airflow/logs/scheduler.log"
        ).read_text(errors="replace")

        second = subprocess.run(
            [sys.executable, str(LAUNCHER), "run", "--port", str(free_port())],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 2 and f"already running (pid {process.pid}" in second.stderr, (
            second.stderr
        )
        assert "make stop" in second.stderr and len(second.stderr.strip().splitlines()) == 1

        started = descendants(process.pid)
        assert len(started) >= 5, started  # the watchdog and Airflow's four processes, at least
        process.send_signal(signal.SIGHUP)
        rest = process.stdout.read()
        assert process.wait(timeout=120) == 0, rest
        assert "stopping Airflow" in rest
        assert left_running(started, 5) == [] and drivers_left(tmp_path, 5) == []
        assert not (tmp_path / "airflow/platform.json").exists()
    finally:
        held.close()
        kill_tree(process, started, tmp_path / "airflow")

    _walk_the_cluster(tmp_path)


def _screenshot_the_arrival_run(base: str, user: str, password: str, run: dict) -> None:
    """The stream DAG run the watcher started, as Airflow's run page shows it: run type "Asset
    Triggered"."""
    from testkit.browser import Browser

    with Browser() as browser:
        browser.goto(f"{base}/")
        browser.wait_for("location.pathname.includes('/auth/login')", what="the login page")
        browser.type_into("input[name='username']", user)
        browser.type_into("input[name='password']", password)
        browser.click("button[type='submit']")
        browser.wait_for(
            "!location.pathname.includes('/auth/login') && document.cookie.includes('_token')",
            what="the login to finish",
        )
        run_id = urllib.parse.quote(run["dag_run_id"], safe="")
        browser.goto(f"{base}/dags/ad_events__stream/runs/{run_id}")
        browser.wait_for(
            "document.body.innerText.includes('Asset Triggered')",
            what="the run's page with its run type",
        )
        browser.screenshot(SCREENSHOTS / "10-arrival-run.png")
        # the Lakehouse page says when the DAG runs and what the watcher last saw
        browser.goto(f"{base}/lakehouse/pipelines/ad_events")
        browser.wait_for(
            "document.body.innerText.includes('Last arrival')", what="the last arrival's line"
        )
        browser.screenshot(SCREENSHOTS / "11-arrival-lakehouse.png")


def _second_scheduler(launcher: int, log: Path) -> subprocess.Popen:
    """A second ``airflow scheduler`` beside the one the launcher started (Airflow's HA
    schedulers), in that one's environment (the metadata DB's address included), in a process
    group of its own; the test stops it by PID."""
    [first] = [child for child in descendants(launcher) if "airflow scheduler" in command_of(child)]
    environ = dict(
        entry.split("=", 1)
        for entry in Path(f"/proc/{first.pid}/environ").read_text().split("\0")
        if "=" in entry
    )
    with open(log, "ab") as out:
        return subprocess.Popen(
            [str(VENV_BIN / "airflow"), "scheduler", "--skip-serve-logs"],
            env=environ,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _stop_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _walk_the_cluster(tmp_path) -> None:
    """The second platform is the production topology as processes (``make run-cluster``) with
    Kafka and runs on arrival (``make run SOURCE=kafka TRIGGER=arrival``): the lake on the
    embedded S3 server, every Spark task submitted to a standalone master with two workers behind
    Spark's shared secret, bronze fed by a topic on the embedded broker that the sample trickle
    produces to, the stream DAG started by the triggerer's watcher of that topic. The records
    arrive, a stream DAG run starts on its own and every table equals the topic's records (the
    backfill DAG's tasks submit theirs the same way: the first platform runs that DAG); ``env``
    gives another shell what reads the same lake and topic. Nothing listens beyond 127.0.0.1; a
    SIGKILLed launcher's watchdog stops everything. Without quality suites (the first platform
    ran the gates; on cold executors each costs seconds)."""
    from spark_cluster import spark_home  # include/scripts

    from spark_jobs.model.kafka import KafkaConnection
    from testkit.expected import assert_tables_match_landing, topic_records

    port = free_port()
    (tmp_path / "no-suites").mkdir()
    launched = dt.datetime.now(dt.UTC)  # the first platform's runs are in the same metadata DB
    process, env, login = launch(
        tmp_path,
        port,
        trickle_every=3600,
        lake="s3",
        spark="cluster",
        quality=tmp_path / "no-suites",
        source="kafka",
        trigger="arrival",
    )
    started, intruder = [], None
    try:
        user, password = login.split("login:")[1].strip().split(" / ")
        api = Api(f"http://127.0.0.1:{port}", user, password)
        cluster = tmp_path / "airflow/spark"
        master = int(
            re.search(
                r"Starting Spark master at spark://127\.0\.0\.1:(\d+)",
                (cluster / "master.log").read_text(),
            )[1]
        )
        # A driver without the cluster's secret is refused (the tasks' drivers have it in their
        # environment): the master fails its SASL handshake, while the DAG runs.
        intruder = subprocess.Popen(
            [
                str(VENV_BIN / "spark-submit"),
                "--master",
                f"spark://127.0.0.1:{master}",
                "--conf",
                "spark.authenticate=true",
                "--conf",
                "spark.authenticate.secret=guess",
                "--conf",
                "spark.driver.host=127.0.0.1",
                str(ROOT / "tests/spark_hello.py"),
            ],
            env={
                **os.environ,
                "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_HOME": spark_home(),
                "PYSPARK_PYTHON": sys.executable,
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        # its output, read as it comes (it would retry for a minute before giving up)
        said: list[str] = []
        reader = threading.Thread(target=lambda: said.extend(intruder.stdout), daemon=True)
        reader.start()
        # the launcher's first sample, produced to the topic's 3 partitions once the DAG was
        # unpaused, starts a run
        run, event = api.wait_for_arrival_run("ad_events__stream")
        # the triggerer's idle loops were stretched by the plugin's listener (IDLE_SETTINGS), and
        # the watcher's event still started the run
        assert "an idle turn comes round every 5 s" in (
            tmp_path / "airflow/logs/triggerer.log"
        ).read_text(errors="replace")
        reason = event["extra"]["payload"]["reason"]
        assert re.fullmatch(r"records arrived in [123] partitions? for bronze", reason), reason
        _screenshot_the_arrival_run(f"http://127.0.0.1:{port}", user, password, run)
        page = api.call("GET", "/pipelines/ad_events?format=json", api="/lakehouse")
        assert page["cadence"] == "on arrival, at most once per 1 minute", page["cadence"]
        last = page["last_arrival"]  # the watcher's newest event: this one, or one announced again
        assert re.fullmatch(
            r"(still waiting: )?records arrived in [123] partitions? for bronze", last["reason"]
        ), last
        assert all(one.startswith("asset_triggered__") for one in last["runs"]), last
        assert last["reason"] != reason or run["dag_run_id"] in last["runs"], (last, run)
        # The three hop tasks followed one application (the DAG run's shared driver), with
        # executors on both workers.
        applications = {
            worker.name: {app.name for app in worker.glob("app-*")}
            for worker in cluster.glob("work-*")
        }
        assert len(set().union(*applications.values())) == 1 and all(applications.values()), (
            applications
        )
        exported = subprocess.run(
            [sys.executable, str(LAUNCHER), "env"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        shell = dict(line.removeprefix("export ").split("=", 1) for line in exported.splitlines())
        shell = {key: json.loads(value) for key, value in shell.items()}
        assert shell["LAKEHOUSE_HOME"] == "s3a://lakehouse/lake" and shell[
            "AWS_ENDPOINT_URL"
        ].startswith("http://127.0.0.1:")
        assert shell["LAKEHOUSE_PIPELINES"] == str(tmp_path / "airflow" / "pipelines-kafka")
        # Airflow's HA schedulers: with a second scheduler running beside the launcher's, what
        # arrives next starts one run, not one per scheduler.
        second = _second_scheduler(process.pid, tmp_path / "airflow/logs/scheduler-2.log")
        try:
            time.sleep(10)  # its first loop
            subprocess.run(
                [str(VENV_BIN / "lakehouse"), "generate", "ad_events", "--events", "60"],
                env={**env, **shell},
                check=True,
                capture_output=True,
            )
            deadline = time.time() + 300
            while not (
                later := [
                    one
                    for one in api.call("GET", "/dags/ad_events__stream/dagRuns?limit=50")[
                        "dag_runs"
                    ]
                    if one["run_type"] == "asset_triggered"
                    and one["dag_run_id"] != run["dag_run_id"]
                    and dt.datetime.fromisoformat(one["queued_at"]) > launched
                ]
            ) or any(one["state"] not in ("success", "failed") for one in later):
                assert time.time() < deadline, "no run on the second arrival"
                time.sleep(2)
            time.sleep(15)  # a scheduler loop more: a second run of the same event would be made
        finally:
            _stop_group(second)
        with pytest.MonkeyPatch.context() as patch:
            for key, value in shell.items():
                patch.setenv(key, value)
            records = topic_records(KafkaConnection.from_env().client_config(), "ad_events.bronze")
            assert records  # the launcher's first sample, produced to the topic
            # tables read from S3 by delta-rs
            assert_tables_match_landing(shell["LAKEHOUSE_HOME"], records)
        deadline = time.time() + 120
        while not any("SaslException" in line for line in said) and intruder.poll() is None:
            assert time.time() < deadline, "".join(said)[-3000:]
            time.sleep(0.5)
        # refused at its first try: no need to wait for its retries
        with contextlib.suppress(ProcessLookupError):
            os.killpg(intruder.pid, signal.SIGKILL)
        intruder.wait()
        reader.join(timeout=10)
        refused = any("SaslException" in line for line in said)
        assert refused and not any("hello from the cluster" in line for line in said), "".join(
            said
        )[-3000:]
        ours = {child.pid for child in descendants(process.pid)}
        listening = [
            line
            for line in subprocess.run(
                ["ss", "-ltnpH"], capture_output=True, text=True
            ).stdout.splitlines()
            if any(f"pid={pid}," in line for pid in ours)
        ]
        # the local address: 127.0.0.1:P, or [::ffff:127.0.0.1]:P from a JVM
        beyond = [
            line
            for line in listening
            if line.split()[3].rsplit(":", 1)[0] not in ("127.0.0.1", "[::ffff:127.0.0.1]")
        ]
        assert len(listening) >= 8 and beyond == [], beyond
        status = subprocess.run(
            [str(VENV_BIN / "lakehouse"), "status", "ad_events", "--json"],
            env={**env, **shell},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        hops = {hop["hop"]: hop for hop in json.loads(status)["hops"]}
        assert all(
            hops[name]["batches"] >= 1 and hops[name]["last_run"]["status"] == "succeeded"
            for name in ("bronze", "silver", "gold")
        ), hops
        assert all(hop["checkpoint"].startswith("s3a://lakehouse/lake/") for hop in hops.values())
        # A `lakehouse` command of that shell runs its driver against the cluster, with its secret
        # (as the benchmark suite's cluster part does, in CI's smoke run).
        assert shell["LAKEHOUSE_SPARK_MASTER"] == f"spark://127.0.0.1:{master}"
        assert shell["LAKEHOUSE_SPARK_PROPERTIES"] == str(cluster / "spark.conf")
        started = descendants(process.pid)
        commands = [command_of(child) for child in started]
        assert (
            any("weed" in command for command in commands)
            and sum("deploy.worker.Worker" in c for c in commands) == 2
        )
        assert any(
            command.endswith("kafka.Kafka " + str(tmp_path / "airflow/kafka/server.properties"))
            for command in commands
        )
        # Every stream run of this platform was started by what arrived (no schedule), the first
        # among them.
        runs = [
            one
            for one in api.call("GET", "/dags/ad_events__stream/dagRuns?limit=50")["dag_runs"]
            if dt.datetime.fromisoformat(one["queued_at"]) > launched
        ]
        assert run["dag_run_id"] in [one["dag_run_id"] for one in runs]
        assert {(one["run_type"], one["state"]) for one in runs} == {
            ("asset_triggered", "success")
        }, runs
        # each run consumed events of the watcher, and no event started two runs (the second
        # scheduler ran while the second sample arrived)
        consumed = {
            one["dag_run_id"]: [
                event["id"]
                for event in api.upstream_events("ad_events__stream", one["dag_run_id"])
                if event["extra"].get("from_trigger")
            ]
            for one in runs
        }
        assert len(runs) >= 2 and all(consumed.values()), consumed
        events = [event for ids in consumed.values() for event in ids]
        assert len(events) == len(set(events)), consumed
        # the launcher alone: nothing of it runs to stop its children
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        assert left_running(started, 40) == [] and drivers_left(tmp_path, 5) == []
        stopped = subprocess.run(
            [sys.executable, str(LAUNCHER), "stop"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert stopped.returncode == 0 and "no platform is running" in stopped.stdout
        # a dead launcher's file is cleared
        assert not (tmp_path / "airflow/platform.json").exists()
    finally:
        if intruder is not None and intruder.poll() is None:
            os.killpg(intruder.pid, signal.SIGKILL)
            intruder.wait()
        kill_tree(process, started, tmp_path / "airflow")
        # as root its data is outside tmp_path
        metadata_db.Postgres(tmp_path / "airflow/postgres").remove()
