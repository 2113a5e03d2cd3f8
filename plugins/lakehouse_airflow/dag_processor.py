"""Airflow's DAG processor, waking less often when it has nothing to parse.

The DAG processor's loop comes round every second whatever its settings (``DagFileProcessorManager
._run_parsing_loop``): each turn asks the metadata DB for parse requests and callbacks, so an
idle platform's DAG processor was its costliest process (about 11 CPU-s per half hour; the
busy-fraction benchmark, docs/benchmarks.md). With ``[lakehouse] dag_processor_idle_wait``
(``AIRFLOW__LAKEHOUSE__DAG_PROCESSOR_IDLE_WAIT``, seconds; 0, Airflow's own loop, by default) a turn
that has no file parsing and none queued waits that much longer for its parsers' sockets, so an idle
loop comes round every ``1 + wait`` seconds; a turn with parsing to do is unchanged. What waits: a
DAG file due for parsing, a parse asked from the UI, a DAG callback, each at most that much later.

A listener (:func:`on_starting`, registered by the lakehouse plugin) applies it when an Airflow
job starts in a process that imported the DAG processor, that is in ``airflow dag-processor``, so
the launcher and ``docker-compose.yaml`` need no command of their own.
"""

from __future__ import annotations

import functools
import logging
import sys

from airflow.listeners import hookimpl

log = logging.getLogger(__name__)
MANAGER_MODULE = "airflow.dag_processing.manager"


def idle_wait_s() -> float:
    from airflow.configuration import conf

    return conf.getfloat("lakehouse", "dag_processor_idle_wait", fallback=0.0)


def wait_longer_when_idle(manager_class: type, extra_s: float) -> bool:
    """Make ``manager_class``'s socket wait ``extra_s`` longer on a turn with no parser running
    and no file queued; False (nothing changed) when already done or ``extra_s`` is 0."""
    original = manager_class._service_processor_sockets
    if extra_s <= 0 or getattr(original, "lakehouse_idle_wait", None) is not None:
        return False

    @functools.wraps(original)
    def service(self, timeout: float | None = 1.0):
        if timeout and not self._processors and not self._file_queue:
            timeout += extra_s
        return original(self, timeout)

    service.lakehouse_idle_wait = extra_s
    manager_class._service_processor_sockets = service
    return True


@hookimpl
def on_starting(component) -> None:
    """An Airflow job starts: in the DAG processor's process, its idle loop waits longer."""
    manager = sys.modules.get(MANAGER_MODULE)
    if manager is None:  # the scheduler, the triggerer, a task: nothing to change
        return
    extra_s = idle_wait_s()
    if wait_longer_when_idle(manager.DagFileProcessorManager, extra_s):
        log.info(
            "DAG processor: a loop with nothing to parse comes round every %.0f s (lakehouse)",
            1 + extra_s,
        )
