"""The stream DAG's Spark jobs against a real Spark standalone master and worker on
127.0.0.1 (started with spark-class, stopped by PID): the tables equal the landing files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from spark_jobs.cli import main
from tests.conftest import VENV_BIN, assert_tables_match_landing, free_port
from tests.test_airflow import _dags_test

pytestmark = [pytest.mark.spark, pytest.mark.airflow, pytest.mark.integration, pytest.mark.slow]



def _spark_class(args, log: Path, env) -> subprocess.Popen:
    return subprocess.Popen([str(VENV_BIN / "spark-class"), *args], env=env, stdout=open(log, "wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)


@pytest.fixture
def standalone_cluster(tmp_path):
    import pyspark

    env = {**os.environ, "SPARK_HOME": str(Path(pyspark.__file__).parent), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_MASTER_HOST": "127.0.0.1"}
    port = free_port()
    master = _spark_class(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                           "--webui-port", str(free_port())], tmp_path / "master.log", env)
    worker = _spark_class(["org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host", "127.0.0.1",
                           "--cores", "2", "--memory", "2g", "--webui-port", str(free_port()),
                           "--work-dir", str(tmp_path / "work")], tmp_path / "worker.log", env)
    try:
        deadline = time.time() + 120
        while "Registering worker" not in (tmp_path / "master.log").read_text(errors="replace"):
            assert time.time() < deadline, (tmp_path / "master.log").read_text()[-2000:]
            assert master.poll() is None and worker.poll() is None, "the master or worker exited"
            time.sleep(1)
        yield port, tmp_path
    finally:
        for process in (worker, master):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in (worker, master):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def test_stream_dag_on_a_standalone_cluster(spark, standalone_cluster, airflow_env, lake_home):
    port, logs = standalone_cluster
    main(["generate", "ad_events", "--events", "1200", "--files", "2", "--seed", "31",
          "--start", "2026-03-04T06:00:00", "--bad-fraction", "0.02"])
    env = {**airflow_env, "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
        {"conn_type": "spark", "host": "spark://127.0.0.1", "port": port})}
    code, finished, output = _dags_test(env, "ad_events__stream")
    assert code == 0 and "state=success" in finished, output[-4000:]
    assert f"--master spark://127.0.0.1:{port}" in output
    apps = list((logs / "work").glob("app-*"))
    assert len(apps) == 3, "each hop ran as an application on the cluster's executors"
    assert_tables_match_landing(lake_home)
