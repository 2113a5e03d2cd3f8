"""Airflow's triggerer, coming round less often while no trigger fires.

The triggerer has two loops that come round every second whatever its settings: its supervisor's
(``TriggerRunnerSupervisor.run_once``: each turn asks the metadata DB for triggers to take on, for
the ones it runs and for unused ones to clean) and its trigger runner's (``TriggerRunner.arun``:
each turn tells the supervisor what changed and waits for its answer). Idle with one arrival
watcher, the triggerer is the platform's costliest process: about 150 CPU-s per hour with
Airflow's loops, about 100 with a 4-s wait (``python -m bench --only idle``, docs/benchmarks.md).

With ``[lakehouse] triggerer_idle_wait`` (``AIRFLOW__LAKEHOUSE__TRIGGERER_IDLE_WAIT``, seconds; 0,
Airflow's own loops, by default) both turns wait that much longer, so an idle triggerer comes
round every ``1 + wait`` seconds. A trigger that fires cuts the runner's wait short: its event
(an arrival) goes to the supervisor, which stores it at once, so an arrival starts its run
without waiting for a turn. What waits: a trigger Airflow adds (a deferred task, the watcher of a
DAG it parsed) starts, and one it no longer needs stops, within two turns.

A listener (:func:`on_starting`, registered by the lakehouse plugin) applies it when an Airflow
job starts in a process that imported the triggerer, that is in ``airflow triggerer``; the runner
is forked from that process, so it runs the changed loop too.
"""

from __future__ import annotations

import collections
import functools
import logging
import sys

from airflow.listeners import hookimpl

log = logging.getLogger(__name__)
TRIGGERER_MODULE = "airflow.jobs.triggerer_job_runner"


def idle_wait_s() -> float:
    from airflow.configuration import conf

    return conf.getfloat("lakehouse", "triggerer_idle_wait", fallback=0.0)


class _FiredEvents(collections.deque):
    """The runner's outgoing trigger events: adding one ends the runner's wait."""

    def __init__(self, events, waits: _LongerWaits):
        super().__init__(events)
        self.waits = waits

    def append(self, event) -> None:
        super().append(event)
        self.waits.wake()


class _LongerWaits:
    """``anyio`` as Airflow's triggerer module sees it: its runner's wait between turns (the
    module's one ``move_on_after``) lasts ``extra_s`` longer, or none while an event waits to go,
    and :meth:`wake` ends it."""

    def __init__(self, anyio_module, extra_s: float):
        self.anyio, self.extra_s = anyio_module, extra_s
        self.events: collections.deque = collections.deque()
        self.scope = None  # the wait under way

    def __getattr__(self, name: str):
        return getattr(self.anyio, name)

    def move_on_after(self, delay: float, shield: bool = False):
        self.scope = self.anyio.move_on_after(
            0 if self.events else delay + self.extra_s, shield=shield
        )
        return self.scope

    def wake(self) -> None:
        if self.scope is not None:
            self.scope.cancel()


def wait_longer_when_idle(module, extra_s: float) -> bool:
    """Make the loops of ``module`` (Airflow's triggerer module) wait ``extra_s`` longer per turn,
    the runner's cut short by a fired trigger; False (nothing changed) when already done or
    ``extra_s`` is 0."""
    supervisor, runner = module.TriggerRunnerSupervisor, module.TriggerRunner
    original_service, original_arun = supervisor._service_subprocess, runner.arun
    if extra_s <= 0 or getattr(original_service, "lakehouse_idle_wait", None) is not None:
        return False
    waits = _LongerWaits(module.anyio, extra_s)

    @functools.wraps(original_service)
    def service(self, max_wait_time: float, raise_on_timeout: bool = False, expect_signal=None):
        if expect_signal is None and not raise_on_timeout:  # the loop's wait, not a stop's
            max_wait_time += extra_s
        return original_service(self, max_wait_time, raise_on_timeout, expect_signal)

    @functools.wraps(original_arun)
    async def arun(self):
        self.events = waits.events = _FiredEvents(self.events, waits)
        return await original_arun(self)

    service.lakehouse_idle_wait = extra_s
    supervisor._service_subprocess, runner.arun, module.anyio = service, arun, waits
    return True


@hookimpl
def on_starting(component) -> None:
    """An Airflow job starts: in the triggerer's process, its loops wait longer when idle."""
    module = sys.modules.get(TRIGGERER_MODULE)
    if module is None:  # the scheduler, the DAG processor, a task: nothing to change
        return
    extra_s = idle_wait_s()
    if wait_longer_when_idle(module, extra_s):
        log.info("triggerer: an idle turn comes round every %.0f s (lakehouse)", 1 + extra_s)
