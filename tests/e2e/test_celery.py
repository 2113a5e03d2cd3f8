"""Airflow's CeleryExecutor with a worker on another machine: the platform's DAGs, unchanged.

The scheduler, the DAG processor, the API server and PostgreSQL run here; a Redis server is
the broker and result backend; the one Celery worker runs in a network namespace of its own
(testkit/hosts.py), reaching the broker and the API server's execution API over a veth pair only. A
stream DAG run, a rollback DAG run of every batch and its replay, then a backfill of the day each
leave tables equal to the plain-Python model of the landing files. Under a distributed executor each
Spark task submits its own application (``LAKEHOUSE_DRIVER=auto``): no shared driver starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testkit.airflow import Api
from testkit.expected import assert_tables_match_landing, delta_rows
from testkit.hosts import second_host
from testkit.lakes import spec_copy
from testkit.paths import VENV_BIN, free_port
from testkit.redis import redis_server

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.airflow]


def _generate(env: dict, seed: int, start: str, events: int) -> None:
    subprocess.run(
        [
            str(VENV_BIN / "lakehouse"),
            "generate",
            "ad_events",
            "--events",
            str(events),
            "--files",
            "2",
            "--seed",
            str(seed),
            "--start",
            start,
            "--bad-fraction",
            "0.03",
        ],
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )


def _run(api: Api, dag_id: str, conf: dict | None = None) -> str:
    """Trigger ``dag_id`` and wait for the run; returns its id."""
    run_id = api.call(
        "POST", f"/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf or {}}
    )["dag_run_id"]
    assert api.wait_for_run(dag_id, run_id, timeout_s=900) == "success", api.failures(
        dag_id, run_id
    )
    return run_id


def _machine(prefix: tuple[str, ...] = ()) -> str:
    done = subprocess.run(
        [
            *prefix,
            sys.executable,
            "-c",
            "from spark_jobs.control.coordination.driver import machine; print(machine())",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def test_the_dags_run_unchanged_under_celery_with_a_worker_on_another_host(tmp_path):
    import metadata_db  # include/scripts (tests/conftest.py puts it on the path)
    from lakehouse_platform import (
        _password,
        _unpause,
        migrate,
        platform_env,
        start,
        stop,
        stop_groups,
    )

    with (
        second_host() as host,
        redis_server(tmp_path / "redis", bind=("127.0.0.1", host.ours)) as redis,
    ):
        # A shared driver's key names its machine: the namespace is another one.
        assert _machine() != _machine(host.prefix)
        port, home, airflow_home = free_port(), tmp_path / "lake", tmp_path / "airflow"
        base = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("SPARK_", "LAKEHOUSE_", "AIRFLOW"))
        }
        (tmp_path / "no-suites").mkdir()  # the gates have their own tests: here, where tasks run
        env = platform_env(
            {
                **base,
                "AIRFLOW_HOME": str(airflow_home),
                "LAKEHOUSE_HOME": str(home),
                "LAKEHOUSE_PIPELINES": str(spec_copy(tmp_path / "pipelines")),
                "LAKEHOUSE_QUALITY": str(tmp_path / "no-suites"),
            },
            port=port,
        )
        env.update(
            {
                "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
                "AIRFLOW__CELERY__BROKER_URL": redis.url(host.ours, 0),
                "AIRFLOW__CELERY__RESULT_BACKEND": redis.url(host.ours, 1),
                "AIRFLOW__CELERY__WORKER_CONCURRENCY": "2",
                # The worker's tasks reach the execution API over the pair; so does this test.
                "AIRFLOW__API__HOST": host.ours,
                "AIRFLOW__API__BASE_URL": f"http://{host.ours}:{port}",
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://{host.ours}:{port}/execution/",
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            }
        )
        _generate(env, 1, "2026-04-01T00:00:00", 400)
        db = metadata_db.Postgres(airflow_home / "postgres")
        processes: list[subprocess.Popen] = []
        worker = None
        began = time.monotonic()
        try:
            db.start()
            env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = db.url()
            migrate(env, stamp=db.folder / "migrated")
            processes = start(env)
            with open(airflow_home / "logs" / "celery-worker.log", "ab") as log:
                worker = subprocess.Popen(
                    [
                        *host.prefix,
                        "timeout",
                        "1800",
                        str(VENV_BIN / "airflow"),
                        "celery",
                        "worker",
                        "--skip-serve-logs",
                    ],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            base_url = env["AIRFLOW__API__BASE_URL"]
            deadline = time.time() + 240
            while True:
                try:
                    password = _password(airflow_home, "admin")
                    api = Api(base_url, "admin", password)
                    break
                except OSError:
                    assert time.time() < deadline, (airflow_home / "logs/api-server.log").read_text(
                        errors="replace"
                    )[-3000:]
                    time.sleep(2)
            dags = ["ad_events__stream", "ad_events__backfill", "ad_events__rollback"]
            _unpause(base_url, "admin", password, dags, timeout_s=240)

            # (or the scheduler's run on the DAG's unpause, before it)
            _run(api, "ad_events__stream")
            assert_tables_match_landing(home)
            bronze = delta_rows(
                home, "tables/bronze/ad_events", "_source_file", "ad_id", "event_time"
            )
            gold = delta_rows(
                home, "tables/gold/campaign_views_10s", "campaign_id", "window_start", "views"
            )

            # Undo every batch (and below), then the next run replays them as logged.
            _run(
                api,
                "ad_events__rollback",
                {"hop": "bronze", "to_batch": -1, "dry_run": False, "cascade": True},
            )
            assert delta_rows(home, "tables/bronze/ad_events", "ad_id") == []
            _run(api, "ad_events__stream")
            assert (
                delta_rows(home, "tables/bronze/ad_events", "_source_file", "ad_id", "event_time")
                == bronze
            )
            assert (
                delta_rows(
                    home, "tables/gold/campaign_views_10s", "campaign_id", "window_start", "views"
                )
                == gold
            )
            assert_tables_match_landing(home)
            _run(
                api,
                "ad_events__backfill",
                {"start": "2026-04-01T00:00:00", "end": "2026-04-02T00:00:00"},
            )
            assert_tables_match_landing(home)  # the day recomputed in batch: the same rows

            # Every task ran on the worker in the namespace (the scheduler here has no other
            # executor), whose connections the broker saw from the namespace's address; each
            # Spark task was a spark-submit of its own: no shared driver's address file or log.
            assert f"addr={host.address}:" in redis.command("CLIENT", "LIST")
            drivers = airflow_home / "drivers"
            assert not (list(drivers.iterdir()) if drivers.exists() else []), list(
                drivers.iterdir()
            )
            hop_logs = [
                path.read_text(errors="replace")
                for path in (airflow_home / "logs").glob(
                    "dag_id=ad_events__*/run_id=*/task_id=*/attempt=*.log"
                )
                if "task_id=gate_" not in str(path)
            ]
            spark_tasks = [log for log in hop_logs if "Spark-Submit cmd" in log]
            assert len(spark_tasks) >= 7 and not [log for log in hop_logs if "shared driver" in log]
            print(f"celery test: {time.monotonic() - began:.0f} s with Airflow up")
        finally:
            if worker is not None:
                stop_groups([worker.pid], reap=worker.poll)
            stop(processes)
            db.stop()
    assert Path(airflow_home / "logs" / "celery-worker.log").exists()
