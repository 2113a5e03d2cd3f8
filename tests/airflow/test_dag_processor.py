"""The DAG processor's idle loop (plugins/lakehouse_airflow/dag_processor.py): a turn with nothing
to parse waits ``[lakehouse] dag_processor_idle_wait`` longer; a turn with parsing does not.

A real ``DagFileProcessorManager`` (its own selector, no parser), and the listener reached through
Airflow's own listener manager, which loads the lakehouse plugin. The real DAG processor's log
says it in ``test_platform.py``; ``python -m bench --only busy`` measures what it saves.
"""

from __future__ import annotations

import time

import pytest

pytestmark = [pytest.mark.unit, pytest.mark.airflow]


@pytest.fixture
def manager_class(airflow_in_process, monkeypatch):
    """Airflow's DAG processor manager class, restored after the test."""
    from airflow.dag_processing.manager import DagFileProcessorManager

    monkeypatch.setattr(
        DagFileProcessorManager,
        "_service_processor_sockets",
        DagFileProcessorManager._service_processor_sockets,
    )
    return DagFileProcessorManager


def _manager(manager_class):
    import selectors

    manager = manager_class(max_runs=1)
    manager.selector = selectors.DefaultSelector()  # as its run() does before the loop
    return manager


def _timed_turn(manager, timeout: float) -> float:
    began = time.monotonic()
    manager._service_processor_sockets(timeout=timeout)
    return time.monotonic() - began


def test_a_turn_with_nothing_to_parse_waits_longer_and_one_with_parsing_does_not(manager_class):
    from lakehouse_airflow.dag_processor import wait_longer_when_idle

    manager = _manager(manager_class)
    assert _timed_turn(manager, 0.1) < 0.4  # Airflow's own wait
    assert wait_longer_when_idle(manager_class, 0.5)
    assert not wait_longer_when_idle(manager_class, 0.5)  # once: the wait does not grow per job
    assert _timed_turn(manager, 0.1) >= 0.6
    manager._processors["a file"] = object()  # a parser running: the turn waits as Airflow asked
    assert _timed_turn(manager, 0.1) < 0.4
    manager._processors.clear()
    manager._file_queue["a file"] = None  # a file queued for parsing: likewise
    assert _timed_turn(manager, 0.1) < 0.4


def test_zero_changes_nothing(manager_class):
    from lakehouse_airflow.dag_processor import wait_longer_when_idle

    original = manager_class._service_processor_sockets
    assert not wait_longer_when_idle(manager_class, 0)
    assert manager_class._service_processor_sockets is original


def test_the_plugin_listener_applies_the_setting_when_a_job_starts(manager_class, monkeypatch):
    from airflow.listeners.listener import get_listener_manager

    monkeypatch.setenv("AIRFLOW__LAKEHOUSE__DAG_PROCESSOR_IDLE_WAIT", "0.5")
    get_listener_manager().hook.on_starting(component=None)  # what Airflow's Job() calls
    assert manager_class._service_processor_sockets.lakehouse_idle_wait == 0.5
    assert _timed_turn(_manager(manager_class), 0.1) >= 0.6
