"""The triggerer's idle loops (plugins/lakehouse_airflow/triggerer.py): with
``[lakehouse] triggerer_idle_wait`` the supervisor's and the runner's turns wait that much longer;
a fired trigger's event ends the runner's wait at once.

Airflow's real triggerer module, its ``anyio`` waits run on a real event loop; the supervisor's
socket wait is replaced by a recorder (a unit test of the arguments it is given: starting a real
supervisor needs a runner process). The real triggerer runs with the setting in the platform's
cluster walk (``tests/e2e/test_platform.py``: its log says so, and an arrival starts a run);
``python -m bench --only idle`` measures what it saves.
"""

from __future__ import annotations

import asyncio
import time

import pytest

pytestmark = [pytest.mark.unit, pytest.mark.airflow]


@pytest.fixture
def triggerer_module(airflow_in_process, monkeypatch):
    """Airflow's triggerer module, its classes and ``anyio`` restored after the test; the
    supervisor's socket wait records its arguments instead of waiting."""
    from airflow.jobs import triggerer_job_runner as module

    waited: list[tuple] = []

    def recorded(self, max_wait_time, raise_on_timeout=False, expect_signal=None):
        waited.append((max_wait_time, raise_on_timeout, expect_signal))

    from lakehouse_airflow.triggerer import _LongerWaits

    # Airflow's own loops, even where an Airflow job started earlier in this process (a DAG run
    # in process) applied the launcher's setting; put back as found after the test.
    anyio = module.anyio.anyio if isinstance(module.anyio, _LongerWaits) else module.anyio
    arun = getattr(module.TriggerRunner.arun, "__wrapped__", module.TriggerRunner.arun)
    monkeypatch.setattr(module, "anyio", anyio)
    monkeypatch.setattr(module.TriggerRunner, "arun", arun)
    monkeypatch.setattr(module.TriggerRunnerSupervisor, "_service_subprocess", recorded)
    module.waited = waited
    yield module
    del module.waited


async def _timed_wait(module, delay: float, fire_after: float | None = None, events=None) -> float:
    """Seconds the runner's wait between turns (``anyio.move_on_after(delay)`` around an event
    that never comes, as ``TriggerRunner.arun`` has it) lasted; ``fire_after``: a trigger fires
    then (an event added to ``events``)."""
    import anyio

    async def fire():
        await asyncio.sleep(fire_after)
        events.append("an event")

    if fire_after is not None:
        firing = asyncio.create_task(fire())
    began = time.monotonic()
    with module.anyio.move_on_after(delay):
        await anyio.Event().wait()
    took = time.monotonic() - began
    if fire_after is not None:
        await firing
    return took


def test_idle_turns_wait_longer_and_a_fired_trigger_ends_the_wait(triggerer_module):
    from lakehouse_airflow.triggerer import wait_longer_when_idle

    module = triggerer_module
    assert asyncio.run(_timed_wait(module, 0.1)) < 0.4  # Airflow's own wait
    assert wait_longer_when_idle(module, 0.6)
    assert not wait_longer_when_idle(module, 0.6)  # once: the wait does not grow per job

    # The runner's events become the queue that wakes it (its own comms fail here: no supervisor).
    runner = module.TriggerRunner()

    async def no_comms():
        raise ConnectionError("no supervisor")

    runner.init_comms = no_comms
    with pytest.raises(ConnectionError):
        asyncio.run(runner.arun())
    events = runner.events
    assert asyncio.run(_timed_wait(module, 0.1)) >= 0.7  # idle: longer
    assert asyncio.run(_timed_wait(module, 0.1, fire_after=0.05, events=events)) < 0.4
    assert list(events) == ["an event"]
    assert asyncio.run(_timed_wait(module, 0.1)) < 0.05  # an event still to go: no wait at all
    events.clear()
    assert asyncio.run(_timed_wait(module, 0.1)) >= 0.7

    # The supervisor's loop waits longer for its runner; stopping it waits as Airflow asked.
    supervisor = object.__new__(module.TriggerRunnerSupervisor)
    supervisor._service_subprocess(1)
    supervisor._service_subprocess(max_wait_time=5.0, raise_on_timeout=False, expect_signal=15)
    supervisor._service_subprocess(2.0, raise_on_timeout=True)
    assert module.waited == [(pytest.approx(1.6), False, None), (5.0, False, 15), (2.0, True, None)]


def test_zero_changes_nothing(triggerer_module):
    from lakehouse_airflow.triggerer import wait_longer_when_idle

    module = triggerer_module
    before = (module.anyio, module.TriggerRunner.arun)
    assert not wait_longer_when_idle(module, 0)
    assert (module.anyio, module.TriggerRunner.arun) == before
    assert module.TriggerRunnerSupervisor._service_subprocess.__name__ == "recorded"


def test_the_plugin_listener_applies_the_setting_when_a_job_starts(triggerer_module, monkeypatch):
    from airflow.listeners.listener import get_listener_manager

    monkeypatch.setenv("AIRFLOW__LAKEHOUSE__TRIGGERER_IDLE_WAIT", "0.5")
    get_listener_manager().hook.on_starting(component=None)  # what Airflow's Job() calls
    assert triggerer_module.TriggerRunnerSupervisor._service_subprocess.lakehouse_idle_wait == 0.5
    assert asyncio.run(_timed_wait(triggerer_module, 0.1)) >= 0.6
