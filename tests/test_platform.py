"""``make run``'s launcher, bounded in time on a spare port, and the always-on mode."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import metadata_db  # include/scripts (tests/conftest.py puts it on the path)
import psutil
import pytest

from tests.conftest import ROOT, VENV_BIN, expected_gold, free_port, gold_counter

LAUNCHER = ROOT / "include/scripts/lakehouse_platform.py"

pytestmark = [pytest.mark.integration, pytest.mark.slow]



def _launch(tmp_path, port: int) -> tuple[subprocess.Popen, dict, str]:
    """``make run``'s launcher on a spare port; returns it, its environment and its login line."""
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "LAKEHOUSE_HOME": str(tmp_path / "lake"),
           "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port())}
    for key in [key for key in env if key.startswith("AIRFLOW__") and key != "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"]:
        env.pop(key)
    process = subprocess.Popen(
        [sys.executable, str(LAUNCHER), "run", "--port", str(port), "--duration", "600", "--trickle-every", "10"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.time() + 240
    seen = []
    for line in process.stdout:
        if "login:" in line:
            return process, env, line
        seen.append(line)
        assert time.time() < deadline, "".join(seen)
    raise AssertionError(f"the launcher ended before printing the login (exit {process.wait()}): {''.join(seen)}")


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


def _kill_tree(process: subprocess.Popen, started: list[psutil.Process]) -> None:
    """A test's own clean-up when an assertion failed half-way: the launcher and all it started."""
    if process.poll() is None:
        started = started + _descendants(process.pid)
        process.kill()
        process.wait()
    for child in started:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()


@pytest.mark.airflow
def test_platform_serves_ui_on_loopback_with_auth_and_nothing_outlives_it(tmp_path):
    """The launcher serves the UI behind a login on 127.0.0.1 with the stream DAG unpaused; a
    second launcher refuses while it runs; SIGHUP (a closed terminal) stops every process it
    started. Then a second platform is killed with SIGKILL: its watchdog stops what it started."""
    port = free_port()
    process, env, login = _launch(tmp_path, port)
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
        listening = subprocess.run(["ss", "-ltnp"], capture_output=True, text=True).stdout
        ours = [line for line in listening.splitlines() if f":{port} " in line]
        assert ours and all("127.0.0.1:" in line for line in ours), ours
        assert list((tmp_path / "lake/landing/ad_events").glob("events-*.json"))

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
        assert _left_running(started, 5) == []
        assert not (tmp_path / "airflow/platform.json").exists()
    finally:
        _kill_tree(process, started)

    process, env, _login = _launch(tmp_path, free_port())
    started = []
    try:
        started = _descendants(process.pid)
        os.kill(process.pid, signal.SIGKILL)  # the launcher alone: nothing of it runs to stop its children
        process.wait()
        assert _left_running(started, 40) == []
        stopped = subprocess.run([sys.executable, str(LAUNCHER), "stop"], env=env, capture_output=True, text=True,
                                 timeout=60)
        assert stopped.returncode == 0 and "no platform is running" in stopped.stdout
        assert not (tmp_path / "airflow/platform.json").exists()  # a dead launcher's file is cleared
    finally:
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


@pytest.mark.spark
def test_continuous_mode_keeps_gold_current_until_stopped(spark, lake_home):
    lakehouse = str(VENV_BIN / "lakehouse")
    generate = [lakehouse, "generate", "ad_events", "--events", "500", "--seed"]
    subprocess.run([*generate, "1", "--start", "2026-03-06T00:00:00"], check=True, capture_output=True)
    process = subprocess.Popen([lakehouse, "run", "ad_events", "--continuous", "--trigger-interval", "2 seconds",
                                "--json", "--run-id", "always-on"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        def gold_is_current() -> bool:
            deadline = time.time() + 180
            while time.time() < deadline:
                try:
                    if gold_counter(spark, lake_home) == expected_gold(lake_home):
                        return True
                except Exception:  # gold's table may not exist yet
                    pass
                time.sleep(3)
            return False

        assert gold_is_current()
        subprocess.run([*generate, "2", "--start", "2026-03-06T00:00:30"], check=True, capture_output=True)
        assert gold_is_current()
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C sends; pyspark's JVM ignores it
        out, _ = process.communicate(timeout=120)
        assert process.returncode == 0
        records = json.loads(out)["hops"]
        assert [(r["hop"], r["mode"], r["status"]) for r in records] == [
            ("bronze", "continuous", "succeeded"), ("silver", "continuous", "succeeded"), ("gold", "continuous", "succeeded")]
        assert sum(r["rows_in"] for r in records if r["hop"] == "bronze") == 1000
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
