"""Spark executors on another machine: a standalone master and worker in a network namespace of
their own (testkit/hosts.py), reached from the driver's only over a veth pair, so a driver that
listened on loopback could never be reached. With ``LAKEHOUSE_SPARK_DRIVER_HOST`` set to this
side's address, a CLI run, a rollback and its replay, and a stream DAG run by Airflow (``airflow
dags test``, each Spark task a spark-submit) each equal the plain-Python model of the landing
files, and the worker's own work folder holds the executors of every application. Without the
setting the run refuses before it starts. The cluster authenticates with its shared secret."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testkit.expected import assert_tables_match_landing, delta_rows
from testkit.hosts import second_host
from testkit.lakes import spec_copy
from testkit.paths import VENV_BIN

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.airflow]


def _lakehouse(env: dict, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(VENV_BIN / "lakehouse"), *args], env=env, capture_output=True, text=True, timeout=900
    )
    assert not check or done.returncode == 0, (
        f"lakehouse {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}"
    )
    return done


def _executors(cluster) -> dict[str, int]:
    """Per application the worker ran executors of, how many executor folders its
    work folder holds.
    """
    return {
        app.name: len([folder for folder in app.iterdir() if (folder / "stderr").is_file()])
        for app in cluster.applications()
    }


def test_executors_on_another_host_run_roll_back_replay_and_run_the_stream_dag(
    tmp_path, airflow_home
):
    from lakehouse_platform import platform_env
    from spark_cluster import SparkCluster

    with second_host() as host:
        cluster = SparkCluster(
            tmp_path / "cluster",
            workers=1,
            cores=2,
            memory="1g",
            host=host.address,
            prefix=host.prefix,
        )
        began = time.monotonic()
        cluster.start()
        try:
            home = tmp_path / "lake"
            (tmp_path / "no-suites").mkdir()
            base = {
                key: value
                for key, value in os.environ.items()
                if not key.startswith(("SPARK_", "LAKEHOUSE_"))
            }
            env = {
                **base,
                **cluster.env(),
                "LAKEHOUSE_HOME": str(home),
                "LAKEHOUSE_QUALITY": str(tmp_path / "no-suites"),
                "LAKEHOUSE_PIPELINES": str(spec_copy(tmp_path / "pipelines")),
                "PYSPARK_PYTHON": sys.executable,
            }
            _lakehouse(
                env,
                "generate",
                "ad_events",
                "--events",
                "400",
                "--files",
                "2",
                "--seed",
                "1",
                "--start",
                "2026-04-01T00:00:00",
                "--bad-fraction",
                "0.03",
            )

            # No address the executors can reach: refused before a JVM starts, one line
            # naming the setting.
            refused = _lakehouse(env, "run", "ad_events", check=False)
            assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
            assert (
                "LAKEHOUSE_SPARK_DRIVER_HOST" in refused.stderr and not (home / "tables").exists()
            )

            env["LAKEHOUSE_SPARK_DRIVER_HOST"] = host.ours
            _lakehouse(env, "run", "ad_events", "--max-files-per-trigger", "1")
            assert_tables_match_landing(home)
            assert len(_executors(cluster)) == 1 and all(_executors(cluster).values())
            tables = {
                "tables/bronze/ad_events": ("_source_file", "ad_id", "event_time", "_batch_id"),
                "tables/gold/campaign_views_10s": ("campaign_id", "window_start", "views"),
            }
            before = {table: delta_rows(home, table, *columns) for table, columns in tables.items()}

            # Undo bronze's second batch and those below it, then replay: the same tables.
            _lakehouse(env, "rollback", "ad_events", "--hop", "bronze", "--to-batch", "0")
            assert len(delta_rows(home, "tables/bronze/ad_events", "ad_id")) < len(
                before["tables/bronze/ad_events"]
            )
            _lakehouse(env, "run", "ad_events")
            assert {
                table: delta_rows(home, table, *columns) for table, columns in tables.items()
            } == before
            assert_tables_match_landing(home)
            ran = len(_executors(cluster))

            # The stream DAG through Airflow: each Spark task a spark-submit to the cluster.
            _lakehouse(
                env,
                "generate",
                "ad_events",
                "--events",
                "200",
                "--files",
                "1",
                "--seed",
                "2",
                "--start",
                "2026-04-01T00:10:00",
                "--bad-fraction",
                "0.03",
            )
            airflow = platform_env({**env, "AIRFLOW_HOME": str(airflow_home)}, port=18080)
            airflow.update(cluster.env(), LAKEHOUSE_SPARK_DRIVER_HOST=host.ours)
            airflow.pop("SPARK_LOCAL_IP")
            done = subprocess.run(
                [str(VENV_BIN / "airflow"), "dags", "test", "ad_events__stream"],
                env=airflow,
                capture_output=True,
                text=True,
                timeout=1200,
            )
            assert done.returncode == 0 and "state=success" in done.stdout + done.stderr, (
                done.stdout + done.stderr
            )[-4000:]
            assert_tables_match_landing(home)
            assert len(_executors(cluster)) > ran and all(_executors(cluster).values())
            print(f"cross-host test: {time.monotonic() - began:.0f} s with the cluster up")
        finally:
            cluster.stop()
    assert Path(cluster.folder / "work-0").is_dir()
