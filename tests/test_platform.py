"""``make run``'s launcher, bounded in time on a spare port, and the always-on mode."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.conftest import ROOT, VENV_BIN, expected_gold, free_port, gold_counter

pytestmark = [pytest.mark.integration, pytest.mark.slow]



@pytest.mark.airflow
def test_platform_serves_ui_on_loopback_with_auth_and_unpaused_stream(tmp_path):
    port = free_port()
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "LAKEHOUSE_HOME": str(tmp_path / "lake"),
           "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port())}
    for key in [key for key in env if key.startswith("AIRFLOW__") and key != "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"]:
        env.pop(key)
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "include/scripts/lakehouse_platform.py"), "run", "--port", str(port),
         "--duration", "45", "--trickle-every", "10"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        login = None
        deadline = time.time() + 240
        for line in process.stdout:
            if "login:" in line:
                login = line
                break
            assert time.time() < deadline
        assert login and f"http://127.0.0.1:{port}" in login, login
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
        rest = process.stdout.read()
        assert process.wait(timeout=120) == 0, rest
        assert "stopping Airflow" in rest
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


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
