"""The shared driver (:mod:`spark_jobs.control.coordination.driver`,
:mod:`spark_jobs.shared_driver`).

The wire and the serving loop are tested with real sockets and a plain-Python handler in place
of :func:`spark_jobs.shared_driver.perform_call` (no Spark there to replace: the loop runs
whatever handler it is given); the Spark side with a real ``spark-submit`` driver that the
stream DAG's hop tasks follow, executed in this process as Airflow's task runner would execute
them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from spark_jobs.control.coordination.driver import (
    CLIENT_LEFT_EXIT,
    DriverAddress,
    DriverGone,
    send,
    serve,
    wait_for_address,
)


def _echo(call: dict) -> int:
    """A handler: prints the call's arguments, a line on stderr, and exits with the number its
    first argument is."""
    print("args", *call["args"])
    print("to stderr", end="", file=sys.stderr)
    return int(call["args"][0])


def _serving(path: Path, idle_s: float = 30.0) -> tuple[threading.Thread, DriverAddress]:
    thread = threading.Thread(target=serve, args=(path, _echo, idle_s, "log"), daemon=True)
    thread.start()
    address = wait_for_address(path, thread.is_alive, timeout_s=10)
    assert address is not None
    return thread, address


@pytest.mark.unit
@pytest.mark.parametrize(
    ("setting", "executor", "mode"),
    [
        ("", "LocalExecutor", "shared"),
        ("auto", "lakehouse_airflow.executor.PromptLocalExecutor", "shared"),
        # an alias, as Airflow allows
        ("", "prompt:lakehouse_airflow.executor.PromptLocalExecutor", "shared"),
        ("", "CeleryExecutor", "task"),
        ("", "LocalExecutor,KubernetesExecutor", "task"),  # a DAG may name the distributed one
        ("shared", "CeleryExecutor", "shared"),  # the team says its workers share one machine
        ("task", "LocalExecutor", "task"),
    ],
    ids=["local", "prompt", "alias", "celery", "several", "forced-shared", "forced-task"],
)
def test_the_driver_mode_follows_where_the_executor_runs_tasks(
    airflow_in_process, monkeypatch, setting, executor, mode
):
    from lakehouse_airflow.operators import driver_mode

    monkeypatch.setenv("LAKEHOUSE_DRIVER", setting)
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", executor)
    assert driver_mode() == mode


def test_a_driver_mode_that_does_not_exist_is_refused_naming_the_choices(
    airflow_in_process, monkeypatch
):
    from airflow.sdk.exceptions import AirflowFailException
    from lakehouse_airflow.operators import driver_mode

    monkeypatch.setenv("LAKEHOUSE_DRIVER", "shard")
    with pytest.raises(AirflowFailException, match="set auto, shared or task"):
        driver_mode()


def test_a_driver_serves_commands_in_turn_until_released(tmp_path):
    path = tmp_path / "driver.json"
    thread, address = _serving(path)
    assert oct(path.stat().st_mode & 0o777) == "0o600" and address.pid == os.getpid()
    lines: list[str] = []
    assert send(address, {"args": ["3", "a b"]}, release=False, emit=lines.append) == 3
    # stdout and stderr, a last line without its newline too
    assert lines == ["args 3 a b", "to stderr"]
    lines.clear()
    assert send(address, {"args": ["0"]}, release=True, emit=lines.append) == 0
    thread.join(timeout=10)
    assert not thread.is_alive() and not path.exists() and lines == ["args 0", "to stderr"]
    with pytest.raises(DriverGone):  # nothing listens any more: a client starts another driver
        send(address, {"args": ["0"]}, release=False, emit=lines.append)


@pytest.mark.unit
def test_a_request_without_the_token_gets_nothing_and_an_idle_driver_ends(tmp_path):
    path = tmp_path / "driver.json"
    thread, address = _serving(path, idle_s=1.5)
    with socket.create_connection(("127.0.0.1", address.port), timeout=5) as sock:
        sock.sendall((json.dumps({"token": "guess", "call": {"args": ["0"]}}) + "\n").encode())
        assert sock.recv(100) == b""  # closed without a word
    # still serving
    assert send(address, {"args": ["0"]}, release=False, emit=lambda line: None) == 0
    began = time.monotonic()
    thread.join(timeout=10)
    assert not thread.is_alive() and 1.0 < time.monotonic() - began < 5 and not path.exists()


SLOW_DRIVER = """
import sys, time
from pathlib import Path
from spark_jobs.control.coordination.driver import serve
serve(Path(sys.argv[1]), lambda call: time.sleep(60) or 0, 60, "log")
"""


@pytest.mark.unit
def test_a_driver_ends_at_once_when_its_client_leaves_during_a_command(tmp_path):
    """A killed task's driver must not finish the command on its own (a retry would
    run beside it).
    """
    path = tmp_path / "driver.json"
    process = subprocess.Popen([sys.executable, "-c", SLOW_DRIVER, str(path)])
    try:
        address = wait_for_address(path, lambda: process.poll() is None, timeout_s=30)
        assert address is not None and address.pid == process.pid
        sock = socket.create_connection(("127.0.0.1", address.port), timeout=5)
        sock.sendall((json.dumps({"token": address.token, "call": {}}) + "\n").encode())
        assert json.loads(sock.makefile().readline()) == {"accepted": True}
        # the operator's on_kill; a SIGKILLed task's socket closes the same way
        sock.shutdown(socket.SHUT_RDWR)
        sock.close()
        assert process.wait(timeout=10) == CLIENT_LEFT_EXIT
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _execute(task, context: dict) -> None:
    """Render and execute a task as Airflow's task runner does: its real spark-submit,
    nothing patched.
    """
    task.render_template_fields({"dag": task.dag, **context})
    task.execute(context)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.airflow
def test_the_hop_tasks_of_a_dag_run_follow_one_driver_that_a_killed_one_is_replaced_and_the_last_releases(  # noqa: E501
    airflow_in_process, lake_home, tmp_path, monkeypatch
):
    """Bronze starts the run's driver; it is SIGKILLed (its whole process group) between tasks;
    silver starts another, gold runs on it and releases it; every table equals the landing files."""
    from lakehouse_airflow.dag_factory import build_all
    from lakehouse_platform import stop_drivers  # include/scripts

    from spark_jobs import service
    from testkit.expected import assert_tables_match_landing

    monkeypatch.setenv("LAKEHOUSE_DRIVER_DIR", str(tmp_path / "drivers"))
    # so only the release can end the driver within the test
    monkeypatch.setenv("LAKEHOUSE_DRIVER_IDLE", "600")
    # spark-submit
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"})
    )
    service.generate(
        "ad_events", 300, files=2, seed=7, start_ms=1_775_000_000_000, bad_fraction=0.05
    )
    dag = build_all()["ad_events__stream"]
    run_id = "manual__driver-test"
    context = {
        "run_id": run_id,
        "params": {},
        "dag_run": SimpleNamespace(dag_id=dag.dag_id, run_id=run_id),
    }
    address_file = lambda: dag.get_task("bronze").driver_command(context)[0]  # noqa: E731

    try:
        _run_bronze_kill_then_silver_and_gold(dag, context, address_file)
        assert_tables_match_landing(lake_home)
        records = {hop["hop"]: hop["last_run"] for hop in service.status("ad_events")["hops"]}
        assert {hop: record["run_id"] for hop, record in records.items()} == dict.fromkeys(
            ("bronze", "silver", "gold"), run_id
        )
        # Kept warm (as `make run` does): the next DAG runs follow the first one's driver, and
        # their last hop leaves it running.
        monkeypatch.setenv("LAKEHOUSE_DRIVER_KEEP_WARM", "600")
        pids = []
        for number, hops in ((1, ("bronze",)), (2, ("bronze", "silver", "gold"))):
            service.generate(
                "ad_events", 100, files=1, seed=10 + number, start_ms=1_775_000_100_000
            )
            later = {
                **context,
                "run_id": f"manual__warm-{number}",
                "dag_run": SimpleNamespace(dag_id=dag.dag_id, run_id=f"manual__warm-{number}"),
            }
            for hop in hops:
                _execute(dag.get_task(hop), later)
                pids.append(DriverAddress.read(dag.get_task(hop).driver_command(later)[0]).pid)
        assert len(set(pids)) == 1 and _running(pids[0])
        assert_tables_match_landing(lake_home)
    finally:
        stop_drivers(tmp_path / "drivers")  # a failed assertion leaves none running


def _run_bronze_kill_then_silver_and_gold(dag, context: dict, address_file) -> None:
    _execute(dag.get_task("bronze"), context)
    first = DriverAddress.read(address_file())
    assert first is not None, "bronze's driver should wait for the next hop"
    os.killpg(first.group, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while DriverAddress.read(address_file()) is not None and time.monotonic() < deadline:
        time.sleep(0.2)

    _execute(dag.get_task("silver"), context)
    second = DriverAddress.read(address_file())
    assert second is not None and second.pid != first.pid
    _execute(dag.get_task("gold"), context)  # the run's last hop: the driver ends after it
    deadline = time.monotonic() + 60
    while (address_file().exists() or _running(second.pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not address_file().exists() and not _running(second.pid)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return (
        Path(f"/proc/{pid}").exists()
        and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]
    )


@pytest.mark.unit
def test_the_platform_stops_the_drivers_that_are_still_running(tmp_path):
    """``make run``'s stop (and its watchdog) stops drivers by the process groups in
    their address files.
    """
    from lakehouse_platform import stop_drivers  # include/scripts

    path = tmp_path / "drivers" / "driver.json"
    path.parent.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-c", SLOW_DRIVER, str(path)], start_new_session=True
    )
    try:
        address = wait_for_address(path, lambda: process.poll() is None, timeout_s=30)
        assert address is not None and address.group == process.pid
        # not the platform's child: reaped at once, as by init
        reaper = threading.Thread(target=process.wait)
        reaper.start()
        began = time.monotonic()
        stop_drivers(path.parent)
        reaper.join(timeout=30)
        assert process.returncode == -signal.SIGTERM and time.monotonic() - began < 10
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
