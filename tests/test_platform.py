"""``make run``'s launcher, bounded in time on a spare port, and the always-on mode."""

from __future__ import annotations

import contextlib
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

from tests.conftest import ROOT, VENV_BIN, example_copy, free_port

LAUNCHER = ROOT / "include/scripts/lakehouse_platform.py"

pytestmark = [pytest.mark.integration, pytest.mark.slow]



def _launch(tmp_path, port: int, user_dags: dict[str, str] | None = None, freshness: str | None = None,
            trickle_every: int = 10, lake: str = "local", spark: str = "local",
            quality: Path | None = None) -> tuple[subprocess.Popen, dict, str]:
    """``make run``'s launcher on a spare port, with a team's own DAG files (by name), the
    example spec alone (with another ``freshness`` if given), a sample file every ``trickle_every``
    seconds, its ``--lake`` and ``--spark``, and the quality suites of ``quality`` if given;
    returns it, its environment and its login line."""
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "LAKEHOUSE_HOME": str(tmp_path / "lake"),
           "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port())}
    if quality is not None:
        env["LAKEHOUSE_QUALITY"] = str(quality)
    # The example pipeline alone (shop's DAGs, unpaused, would run beside the walk's on 2 cores;
    # tests/test_shop.py runs its stream DAG).
    specs = tmp_path / f"pipelines-{port}"
    specs.mkdir()
    spec = example_copy(specs, "ad_events") / "ad_events.yaml"
    text = spec.read_text()
    assert "freshness: 45 minutes" in text
    spec.write_text(text.replace("freshness: 45 minutes", f"freshness: {freshness or '45 minutes'}"))
    env["LAKEHOUSE_PIPELINES"] = str(specs)
    if user_dags:
        folder = tmp_path / "team-dags"
        folder.mkdir()
        for name, text in user_dags.items():
            (folder / name).write_text(text)
        env["LAKEHOUSE_USER_DAGS"] = str(folder)
    for key in [key for key in env if key.startswith("AIRFLOW__") and key != "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"]:
        env.pop(key)
    process = subprocess.Popen(
        [sys.executable, str(LAUNCHER), "run", "--port", str(port), "--duration", "1800", "--trickle-every", str(trickle_every),
         "--lake", lake, "--spark", spark],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.time() + 240
    seen = []
    for line in process.stdout:
        if "login:" in line:
            return process, env, line
        seen.append(line)
        assert time.time() < deadline, "".join(seen)
    raise AssertionError(f"the launcher ended before printing the login (exit {process.wait()}): {''.join(seen)}")


def _command(process: psutil.Process) -> str:
    """A process's command line; empty for one that ended or is a zombie (an executor a finished
    application left, a task process not reaped yet)."""
    try:
        return " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):  # ZombieProcess is a NoSuchProcess
        return ""


def _descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def _left_running(processes: list[psutil.Process], within_s: float) -> list[str]:
    """The processes of ``processes`` still running (zombies do not count) after ``within_s``."""
    deadline = time.time() + within_s
    while True:
        alive = []
        for process in processes:
            try:
                if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{process.pid} {' '.join(process.cmdline())[:120]}")
            except psutil.NoSuchProcess:
                pass
        if not alive or time.time() > deadline:
            return alive
        time.sleep(0.5)


def _drivers_left(tmp_path: Path, within_s: float) -> list[str]:
    """Shared Spark drivers of this test's DAG runs (``submit.py serve`` with an address file
    under ``tmp_path``) still running after ``within_s``: their own process groups, so not
    descendants of the launcher; the platform stops them by their address files."""
    deadline = time.time() + within_s
    while True:
        left = [command for command in map(_command, psutil.process_iter())
                if "submit.py serve" in command and str(tmp_path) in command]
        if not left or time.time() > deadline:
            return left
        time.sleep(0.5)


def _kill_tree(process: subprocess.Popen, started: list[psutil.Process]) -> None:
    """A test's own clean-up when an assertion failed half-way: the launcher and all it started."""
    if process.poll() is None:
        started = started + _descendants(process.pid)
        process.kill()
        process.wait()
    for child in started:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()


SCREENSHOTS = ROOT / "tests" / "output" / "screenshots"


class Api:
    """Airflow's REST API of a running platform, as one user."""

    def __init__(self, base: str, user: str, password: str):
        self.base = base
        body = json.dumps({"username": user, "password": password}).encode()
        request = urllib.request.Request(f"{base}/auth/token", data=body, headers={"Content-Type": "application/json"},
                                         method="POST")
        self.token = json.load(urllib.request.urlopen(request, timeout=30))["access_token"]

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(f"{self.base}/api/v2{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"Bearer {self.token}",
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)

    def wait_for_run(self, dag_id: str, run_id: str, timeout_s: float = 600) -> str:
        quoted = urllib.parse.quote(run_id, safe="")
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            state = self.call("GET", f"/dags/{dag_id}/dagRuns/{quoted}")["state"]
            if state in ("success", "failed"):
                return state
            time.sleep(1)  # a run's end is seen within a second (a poll costs the API server milliseconds)
        tasks = self.call("GET", f"/dags/{dag_id}/dagRuns/{quoted}/taskInstances")["task_instances"]
        raise AssertionError(f"{dag_id} {run_id} did not finish: {[(t['task_id'], t['state']) for t in tasks]}")

    def runs_on_events_of(self, dag_id: str, *sources: tuple[str, str]) -> list[tuple[dict, dict]]:
        """The runs of ``dag_id`` that an asset event of one of ``sources`` (DAG id, run id) triggered, each with that event."""
        found = []
        for run in self.call("GET", f"/dags/{dag_id}/dagRuns?limit=50")["dag_runs"]:
            quoted = urllib.parse.quote(run["dag_run_id"], safe="")
            events = self.call("GET", f"/dags/{dag_id}/dagRuns/{quoted}/upstreamAssetEvents")["asset_events"]
            found += [(run, event) for event in events
                      if (event["source_dag_id"], event["source_run_id"]) in sources]
        return found

    def wait_for_asset_run(self, dag_id: str, *sources: tuple[str, str], timeout_s: float = 300) -> dict:
        """Wait for a successful run of ``dag_id`` triggered by an asset event of one of ``sources``
        (DAG id, run id; the first one's events and gate logs are shown when none came); that event."""
        source_dag, source_run = sources[0]
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            for run, event in self.runs_on_events_of(dag_id, *sources):
                assert run["state"] != "failed", run
                if run["state"] == "success":
                    return event
            time.sleep(3)
        quoted = urllib.parse.quote(source_run, safe="")
        runs = [(run["dag_run_id"], run["state"]) for run in self.call("GET", f"/dags/{dag_id}/dagRuns?limit=50")["dag_runs"]]
        events = self.call("GET", f"/assets/events?source_run_id={quoted}")["asset_events"]
        tasks = self.call("GET", f"/dags/{source_dag}/dagRuns/{quoted}/taskInstances")["task_instances"]
        logs = [self.log_lines(source_dag, source_run, task["task_id"], max(task["try_number"], 1))
                for task in tasks if task["task_id"].startswith("gate_")]
        raise AssertionError(f"no run of {dag_id} after an asset event of {source_dag} {source_run}: its runs {runs}; "
                             f"the source run's events {[(e['asset_id'], e['extra']) for e in events]}; "
                             + "\n".join(line for log in logs for line in log[-15:]))

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        """What the UI shows of a task's log so far (empty before the task wrote any)."""
        quoted = urllib.parse.quote(run_id, safe="")
        try:
            return json.dumps(self.call("GET", f"/dags/{dag_id}/dagRuns/{quoted}/taskInstances/{task_id}/logs/{try_number}"))
        except urllib.error.HTTPError as error:
            if error.code != 404:
                raise
            return ""

    def log_lines(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> list[str]:
        """A task's log, one line per event, under a header naming the task."""
        log = self.task_log(dag_id, run_id, task_id, try_number)
        content = json.loads(log)["content"] if log else []
        return [f"--- {task_id}:", *(entry.get("event", "") if isinstance(entry, dict) else str(entry) for entry in content)]

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
"""


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


def _walk_the_ui(base: str, user: str, password: str, lake, held: contextlib.ExitStack, spark) -> None:
    """What a person does in the browser (docs/guides/lakehouse-page.md), with screenshots in
    tests/output/screenshots/: log in through Airflow's login page; with a stream DAG run done
    (a backfill of the days its files hold created through the REST API while its bronze task was
    held in its Spark application, waiting for the pipeline's lock, which ``held`` holds), open the
    Lakehouse view, each hop with its figures, a hop's charts, the Data Docs page behind a gate
    task's extra link; plan a rollback, confirm it, and the rollback DAG run it triggered
    succeeds. Between the two, every table equals the landing files, and a stream run that found
    nothing new emits no asset event, so the team's DAG does not run on it."""
    from tests.browser import Browser
    from tests.conftest import assert_tables_match_landing

    api = Api(base, user, password)
    deadline = time.time() + 180
    while not _dag_parsed(api, "team__on_gold"):  # the team's DAG (USER_DAG), in its own bundle
        assert time.time() < deadline, "the team's DAG was not parsed"
        time.sleep(2)
    api.call("PATCH", "/dags/team__on_gold", {"is_paused": False})
    api.call("POST", "/dags/ad_events__stream/dagRuns", {"logical_date": None})  # unless the schedule's comes first
    stream = _stream_run_in_bronze(api)
    deadline = time.time() + 180
    while "waits for the pipeline's lock: held by the test" not in api.task_log("ad_events__stream", stream, "bronze"):
        assert time.time() < deadline, "the stream run's bronze task never waited for the lock"
        time.sleep(1)
    # While bronze's Spark application waits for the lock: a backfill of the day it is about to
    # stream, through the REST API as the UI makes one (with "Unpause on trigger": Airflow runs nothing
    # of a paused DAG, a backfill's runs included).
    api.call("PATCH", "/dags/ad_events__backfill", {"is_paused": False})
    backfill = api.call("POST", "/backfills", {"dag_id": "ad_events__backfill", "from_date": "2026-03-01T00:00:00Z",
                                               "to_date": "2026-03-01T00:00:00Z", "max_active_runs": 1})
    assert api.task_state("ad_events__stream", stream, "bronze") == "running"  # it was created mid-task
    # The stream DAG's freshness deadline (10 seconds here) passes while bronze waits: the executor
    # runs the callback, which writes the alert the page shows (held until then, whatever the
    # machine's speed: a run done within its deadline raises none).
    deadline = time.time() + 180
    while not (alerts := [alert for path in (lake / "_ops/alerts/ad_events").glob("*.json")
                          if (alert := json.loads(path.read_text()))["dag_run"] == stream]):
        assert time.time() < deadline, "no freshness alert from the stream run's deadline"
        time.sleep(1)
    assert alerts[0]["freshness"] == "10 seconds", alerts
    held.close()  # the lock: bronze goes on, and the backfill's tasks take the lock in turn
    assert api.wait_for_run("ad_events__stream", stream) == "success", api.failures("ad_events__stream", stream)
    # The team's DAG scheduled on gold's asset ran on a gold event, which names gold's version. The
    # stream's or the backfill's: the two can change gold within one scheduler loop, and then
    # Airflow's asset-triggered run consumes the events up to its queue row's first time and deletes
    # the row, so the later event waits for gold's next change (seen in CI: 60 ms apart).
    backfill_runs = api.call("GET", "/dags/ad_events__backfill/dagRuns?limit=10")["dag_runs"]
    gold_writers = [("ad_events__stream", stream), *[("ad_events__backfill", run["dag_run_id"]) for run in backfill_runs]]
    gold = api.wait_for_asset_run("team__on_gold", *gold_writers)
    commits = sorted(int(path.stem) for path in (lake / "tables/gold/campaign_views_10s/_delta_log").glob("*.json"))
    assert gold["extra"]["version"] in commits and gold["extra"]["rows"] > 0
    assert gold["source_task_id"] in ("gate_gold", "gold")  # the stream's gate, the backfill's hop task
    # 2026-03-01 only: unpausing the DAG scheduled no run of its own (its timetable). A backfill of
    # several days makes one run each (test_airflow, through Airflow's CLI).
    assert backfill["id"] and [run["run_type"] for run in backfill_runs] == ["backfill"], backfill_runs
    for run in backfill_runs:
        run_id = run["dag_run_id"]
        assert api.wait_for_run("ad_events__backfill", run_id) == "success", api.failures("ad_events__backfill", run_id)
    # The stream and the backfill over the same days, each task under the lock in turn: every line once.
    assert_tables_match_landing(lake)
    # Nothing new: the stream run skips its Spark tasks, emits no asset event, and so the team's DAG
    # does not run on it (given a few scheduler loops to show it would not). Whether gold had work
    # left depends on which writer took the lock first: silver rows a backfill added (none streamed)
    # are new to gold's stream. So a first run may still have work; the second cannot.
    for _ in range(2):
        idle = api.call("POST", "/dags/ad_events__stream/dagRuns", {"logical_date": None})["dag_run_id"]
        assert api.wait_for_run("ad_events__stream", idle) == "success", api.failures("ad_events__stream", idle)
        if api.task_state("ad_events__stream", idle, "bronze") == "skipped":
            break
    assert api.task_state("ad_events__stream", idle, "bronze") == "skipped"
    time.sleep(5)  # an asset event is written as its task ends, before the run's success: a few loops more
    assert api.call("GET", f"/assets/events?source_run_id={urllib.parse.quote(idle, safe='')}")["asset_events"] == []
    assert api.runs_on_events_of("team__on_gold", ("ad_events__stream", idle)) == []
    assert api.runs_on_events_of("team__on_gold", *gold_writers)  # as the runs that wrote gold did

    with Browser() as browser:
        browser.goto(f"{base}/")
        browser.wait_for("location.pathname.includes('/auth/login')", what="the login page")
        browser.type_into("input[name='username']", user)
        browser.type_into("input[name='password']", password)
        browser.screenshot(SCREENSHOTS / "01-login.png")
        browser.click("button[type='submit']")
        browser.wait_for("!location.pathname.includes('/auth/login') && document.cookie.includes('_token')",
                         what="the login to finish")

        browser.goto(f"{base}/plugin/lakehouse")  # the navigation entry: the app in an iframe
        framed = "(document.querySelector('iframe') || {}).contentDocument"
        browser.wait_for(f"{framed} && {framed}.querySelectorAll('tr.hop').length === 3", what="the framed page")
        browser.screenshot(SCREENSHOTS / "02-lakehouse-in-airflow.png")

        # The alert the stream run's missed deadline wrote (above).
        browser.goto(f"{base}/lakehouse/")
        assert "Freshness deadline missed" in browser.text("#pipeline-ad_events p.alert")
        rows = browser.eval("[...document.querySelectorAll('#pipeline-ad_events tr.hop')].map(r => r.innerText)")
        assert [row.split()[0] for row in rows] == ["bronze", "silver", "gold"], rows
        for row in rows:  # the last committed batch is at least the one the stream run committed
            hop, cells = row.split()[0], row.split("\t")
            record = json.loads((lake / f"_ops/runs/ad_events/{stream}.{hop}.json").read_text())
            assert int(cells[1].split()[0]) >= max(record["batch_ids"], default=0) and "succeeded" in row, (row, record)
        browser.screenshot(SCREENSHOTS / "03-pipelines.png")

        browser.click("tr.hop[data-hop='silver'] a")
        browser.wait_for("document.querySelectorAll('svg.chart').length === 4", what="the hop's charts")
        assert browser.eval("document.querySelectorAll('#rows-per-second rect.bar').length") >= 1
        browser.screenshot(SCREENSHOTS / "04-hop-silver.png")

        links = api.call("GET", f"/dags/ad_events__stream/dagRuns/{urllib.parse.quote(stream, safe='')}"
                                "/taskInstances/gate_silver/links")
        docs = links["extra_links"].get("Data Docs")  # the gate task's extra link, as the UI shows it
        assert docs and docs.startswith(f"{base}/lakehouse/pipelines/ad_events/quality/"), links
        browser.goto(docs)
        browser.wait_for("document.body.innerText.includes('ad_events.silver')", what="the Data Docs page")
        browser.screenshot(SCREENSHOTS / "05-data-docs.png")

        browser.goto(f"{base}/lakehouse/pipelines/ad_events/rollback?hop=bronze&to_run={urllib.parse.quote(stream)}")
        plan = browser.text("#plan-text")
        assert "undo batches" in plan and "bronze" in plan and "gold" in plan, plan
        browser.screenshot(SCREENSHOTS / "06-rollback-plan.png")
        browser.click("#confirm")
        browser.wait_for("!!document.querySelector('#link')", what="the triggered rollback")
        rollback_run = urllib.parse.unquote(browser.eval("location.search").split("triggered=")[1])
        browser.screenshot(SCREENSHOTS / "07-rollback-triggered.png")
    assert api.wait_for_run("ad_events__rollback", rollback_run) == "success", api.failures("ad_events__rollback", rollback_run)
    journals = [json.loads(path.read_text()) for path in (lake / "_ops/rollbacks/ad_events").glob("*.json")]
    assert [journal["status"] for journal in journals] == ["succeeded"], journals


@pytest.mark.airflow
@pytest.mark.quality
@pytest.mark.longest
def test_platform_serves_ui_on_loopback_with_auth_and_nothing_outlives_it(tmp_path, spark):
    """The launcher serves the UI behind a login on 127.0.0.1 with the stream and rollback DAGs
    unpaused, and a person can work from it (:func:`_walk_the_ui`); a second launcher refuses while it runs;
    SIGHUP (a closed terminal) stops every process it started. Then a second platform is killed
    with SIGKILL: its watchdog stops what it started."""
    from spark_jobs.control.lock import pipeline_lock
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.spec import get_spec

    lake = tmp_path / "lake"
    # Events of 2026-03-01 (the walk backfills that day), beside the launcher's
    # sample file of today; then no more files (a trickle of one every hour), so a later stream run finds nothing.
    subprocess.run([str(VENV_BIN / "lakehouse"), "generate", "ad_events", "--events", "400", "--files", "2", "--seed", "5",
                    "--start", "2026-03-01T12:00:00", "--bad-fraction", "0.02"],
                   env={**os.environ, "LAKEHOUSE_HOME": str(lake)}, check=True, capture_output=True)
    held = contextlib.ExitStack()  # the pipeline's lock, as a writer holds it: the walk lets it go
    held.enter_context(pipeline_lock(Lake(str(lake), get_spec("ad_events")), "held by the test"))
    port = free_port()
    # A freshness of 10 seconds: the first stream run, held by the lock, misses its deadline.
    process, env, login = _launch(tmp_path, port, user_dags={"on_gold.py": USER_DAG}, freshness="10 seconds",
                                  trickle_every=3600)
    started: list[psutil.Process] = []
    try:
        assert f"http://127.0.0.1:{port}" in login, login
        user, password = login.split("login:")[1].strip().split(" / ")
        base = f"http://127.0.0.1:{port}"
        # Authentication is on: the REST API refuses without a token, accepts with one.
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{base}/api/v2/dags", timeout=10)
        assert refused.value.code in (401, 403)
        request = urllib.request.Request(f"{base}/auth/token", data=json.dumps({"username": user, "password": password}).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        token = json.load(urllib.request.urlopen(request, timeout=10))["access_token"]
        authorised = urllib.request.Request(f"{base}/api/v2/dags/ad_events__stream",
                                            headers={"Authorization": f"Bearer {token}"})
        dag = json.load(urllib.request.urlopen(authorised, timeout=10))
        assert dag["is_paused"] is False
        authorised.full_url = f"{base}/api/v2/dags/ad_events__rollback"  # the Lakehouse page triggers it
        assert json.load(urllib.request.urlopen(authorised, timeout=10))["is_paused"] is False
        listening = subprocess.run(["ss", "-ltnp"], capture_output=True, text=True).stdout
        ours = [line for line in listening.splitlines() if f":{port} " in line]
        assert ours and all("127.0.0.1:" in line for line in ours), ours
        assert list((tmp_path / "lake/landing/ad_events").glob("events-*.json"))
        try:
            _walk_the_ui(base, user, password, lake, held, spark)
        except AssertionError as failed:  # what Airflow's scheduler said meanwhile, for CI's excerpt
            log = tmp_path / "airflow/logs/scheduler.log"
            said = [line for line in (log.read_text(errors="replace") if log.exists() else "").splitlines()
                    if any(word in line for word in ("ERROR", "WARNING", "team__on_gold", "Traceback"))]
            raise AssertionError(f"{failed}\nscheduler.log:\n" + "\n".join(said[-40:])) from failed
        # The DAG processor's idle loop was stretched by the plugin's listener (IDLE_SETTINGS).
        assert "comes round every 5 s" in (tmp_path / "airflow/logs/dag-processor.log").read_text(errors="replace")
        # The scheduler's executor listens for runs made outside it (the walk triggered some).
        assert "LISTEN lakehouse_scheduler_wake" in (tmp_path / "airflow/logs/scheduler.log").read_text(errors="replace")

        second = subprocess.run([sys.executable, str(LAUNCHER), "run", "--port", str(free_port())], env=env,
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 2 and f"already running (pid {process.pid}" in second.stderr, second.stderr
        assert "make stop" in second.stderr and len(second.stderr.strip().splitlines()) == 1

        started = _descendants(process.pid)
        assert len(started) >= 5, started  # the watchdog and Airflow's four processes, at least
        process.send_signal(signal.SIGHUP)
        rest = process.stdout.read()
        assert process.wait(timeout=120) == 0, rest
        assert "stopping Airflow" in rest
        assert _left_running(started, 5) == [] and _drivers_left(tmp_path, 5) == []
        assert not (tmp_path / "airflow/platform.json").exists()
    finally:
        held.close()
        _kill_tree(process, started)

    _walk_the_cluster(tmp_path)


def _walk_the_cluster(tmp_path) -> None:
    """The second platform is the production topology as processes (``make run-cluster``): the lake
    on the embedded S3 server, every Spark task submitted to a standalone master with two workers
    behind Spark's shared secret. A stream DAG run, and every table equals the landing files (the
    backfill DAG's tasks submit theirs the same way: the first platform runs that DAG); ``env``
    gives another shell what reads the same lake. Nothing listens beyond 127.0.0.1; a SIGKILLed
    launcher's watchdog stops everything. Without quality suites (the first platform ran the
    gates; on cold executors each costs seconds)."""
    from spark_cluster import spark_home  # include/scripts

    from tests.conftest import assert_tables_match_landing

    port = free_port()
    (tmp_path / "no-suites").mkdir()
    process, env, login = _launch(tmp_path, port, trickle_every=3600, lake="s3", spark="cluster",
                                  quality=tmp_path / "no-suites")
    started, intruder = [], None
    try:
        user, password = login.split("login:")[1].strip().split(" / ")
        api = Api(f"http://127.0.0.1:{port}", user, password)
        cluster = tmp_path / "airflow/spark"
        master = int(re.search(r"Starting Spark master at spark://127\.0\.0\.1:(\d+)",
                               (cluster / "master.log").read_text())[1])
        # A driver without the cluster's secret is refused (the tasks' drivers have it in their
        # environment): the master fails its SASL handshake, while the DAG runs.
        intruder = subprocess.Popen([str(VENV_BIN / "spark-submit"), "--master", f"spark://127.0.0.1:{master}",
                                     "--conf", "spark.authenticate=true", "--conf", "spark.authenticate.secret=guess",
                                     "--conf", "spark.driver.host=127.0.0.1", str(ROOT / "tests/spark_hello.py")],
                                    env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": spark_home(),
                                         "PYSPARK_PYTHON": sys.executable}, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, start_new_session=True)
        said: list[str] = []  # its output, read as it comes (it would retry for a minute before giving up)
        reader = threading.Thread(target=lambda: said.extend(intruder.stdout), daemon=True)
        reader.start()
        stream = api.call("POST", "/dags/ad_events__stream/dagRuns", {"logical_date": None})["dag_run_id"]
        assert api.wait_for_run("ad_events__stream", stream) == "success", api.failures("ad_events__stream", stream)
        # The three hop tasks followed one application (the DAG run's shared driver), with
        # executors on both workers.
        applications = {worker.name: {app.name for app in worker.glob("app-*")} for worker in cluster.glob("work-*")}
        assert len(set().union(*applications.values())) == 1 and all(applications.values()), applications
        exported = subprocess.run([sys.executable, str(LAUNCHER), "env"], env=env, capture_output=True, text=True,
                                  check=True).stdout
        shell = dict(line.removeprefix("export ").split("=", 1) for line in exported.splitlines())
        shell = {key: json.loads(value) for key, value in shell.items()}
        assert shell["LAKEHOUSE_HOME"] == "s3a://lakehouse/lake" and shell["AWS_ENDPOINT_URL"].startswith("http://127.0.0.1:")
        with pytest.MonkeyPatch.context() as patch:
            for key, value in shell.items():
                patch.setenv(key, value)
            assert_tables_match_landing(shell["LAKEHOUSE_HOME"])  # read from S3 by delta-rs and s3fs
        deadline = time.time() + 120
        while not any("SaslException" in line for line in said) and intruder.poll() is None:
            assert time.time() < deadline, "".join(said)[-3000:]
            time.sleep(0.5)
        with contextlib.suppress(ProcessLookupError):  # refused at its first try: no need to wait for its retries
            os.killpg(intruder.pid, signal.SIGKILL)
        intruder.wait()
        reader.join(timeout=10)
        refused = any("SaslException" in line for line in said)
        assert refused and not any("hello from the cluster" in line for line in said), "".join(said)[-3000:]
        ours = {child.pid for child in _descendants(process.pid)}
        listening = [line for line in subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout.splitlines()
                     if any(f"pid={pid}," in line for pid in ours)]
        beyond = [line for line in listening  # the local address: 127.0.0.1:P, or [::ffff:127.0.0.1]:P from a JVM
                  if line.split()[3].rsplit(":", 1)[0] not in ("127.0.0.1", "[::ffff:127.0.0.1]")]
        assert len(listening) >= 8 and beyond == [], beyond
        status = subprocess.run([str(VENV_BIN / "lakehouse"), "status", "ad_events", "--json"], env={**env, **shell},
                                capture_output=True, text=True, check=True).stdout
        hops = {hop["hop"]: hop for hop in json.loads(status)["hops"]}
        assert all(hops[name]["batches"] >= 1 and hops[name]["last_run"]["status"] == "succeeded"
                   for name in ("bronze", "silver", "gold")), hops
        assert all(hop["checkpoint"].startswith("s3a://lakehouse/lake/") for hop in hops.values())
        # A `lakehouse` command of that shell runs its driver against the cluster, with its secret
        # (as the benchmark suite's cluster part does, in CI's smoke run).
        assert shell["LAKEHOUSE_SPARK_MASTER"] == f"spark://127.0.0.1:{master}"
        assert shell["LAKEHOUSE_SPARK_PROPERTIES"] == str(cluster / "spark.conf")
        started = _descendants(process.pid)
        commands = [_command(child) for child in started]
        assert any("weed" in command for command in commands) and sum("deploy.worker.Worker" in c for c in commands) == 2
        os.kill(process.pid, signal.SIGKILL)  # the launcher alone: nothing of it runs to stop its children
        process.wait()
        assert _left_running(started, 40) == [] and _drivers_left(tmp_path, 5) == []
        stopped = subprocess.run([sys.executable, str(LAUNCHER), "stop"], env=env, capture_output=True, text=True,
                                 timeout=60)
        assert stopped.returncode == 0 and "no platform is running" in stopped.stdout
        assert not (tmp_path / "airflow/platform.json").exists()  # a dead launcher's file is cleared
    finally:
        if intruder is not None and intruder.poll() is None:
            os.killpg(intruder.pid, signal.SIGKILL)
            intruder.wait()
        _kill_tree(process, started)
        metadata_db.Postgres(tmp_path / "airflow/postgres").remove()  # as root its data is outside tmp_path


def test_embedded_postgres_listens_on_loopback_behind_a_password_and_stops_by_pid(tmp_path):
    """The metadata DB server of ``make run``: on 127.0.0.1 only, a login needs the generated
    password, never runs as root (as root: as nobody), keeps its cluster across restarts, and
    its PID's end is the server's end."""
    import psycopg2

    server = restarted = metadata_db.Postgres(tmp_path / "postgres")
    try:
        process = server.start()
        listening = [line for line in subprocess.run(["ss", "-ltnH"], capture_output=True, text=True).stdout.splitlines()
                     if f":{server.port} " in line]
        assert listening and all("127.0.0.1:" in line for line in listening), listening
        assert psutil.Process(process.pid).username() != "root"
        with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
            psycopg2.connect(host="127.0.0.1", port=server.port, user="airflow", password="guess", dbname="airflow")
        password = server.password()
        assert (tmp_path / "postgres/password").stat().st_mode & 0o077 == 0
        connection = psycopg2.connect(host="127.0.0.1", port=server.port, user="airflow", password=password,
                                      dbname="airflow")
        with connection, connection.cursor() as cursor:
            cursor.execute("CREATE TABLE kept (n int)")
        connection.close()
        server.stop()
        assert process.poll() is not None and not psutil.pid_exists(process.pid)

        restarted = metadata_db.Postgres(tmp_path / "postgres")
        restarted.start()
        assert restarted.password() == password
        connection = psycopg2.connect(host="127.0.0.1", port=restarted.port, user="airflow", password=password,
                                      dbname="airflow")
        with connection, connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM kept")
            assert cursor.fetchone() == (0,)
        connection.close()
    finally:
        restarted.stop()
        server.remove()
