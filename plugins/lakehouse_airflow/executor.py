"""Airflow's LocalExecutor, with the scheduler's idle wait moved to where a task's end is seen.

Airflow's scheduler sleeps ``scheduler_idle_sleep_time`` after a loop that queued no task and
saw none end, so a task that ends during the sleep is noticed only when the sleep is over: the
next task of the DAG run, or the run's end, waits up to that long. The platform keeps an idle
scheduler cheap with a loop every 5 s (README: "Busy fraction at the default cadence"), and a
stream DAG run that found nothing new took about 8 s, most of it asleep after a 0.1-s task.

:class:`PromptLocalExecutor` waits in its heartbeat instead, when it sent no work this
heartbeat and no report is waiting: on the queue its workers report on, for at most
``[lakehouse] executor_idle_wait`` seconds (``AIRFLOW__LAKEHOUSE__EXECUTOR_IDLE_WAIT``),
returning as soon as a worker reports, and never past the moment the scheduler's next loop must
begin for the next scheduled DAG run to be created on time (the earliest
``next_dagrun_create_after`` of the unpaused DAGs: asked again once that moment passed, after a
worker reported, and at least once a minute). The launcher sets the scheduler's own sleep to 1 s
and this wait to 4 s, so an idle loop still comes round every 5 s (the same idle cost), a task's
end is acted on at once, and a scheduled run starts at its time. A triggered run still starts up
to 5 s after it is made.
"""

from __future__ import annotations

import time

from airflow.configuration import conf
from airflow.executors.local_executor import LocalExecutor
from sqlalchemy.exc import SQLAlchemyError

DUE_REFRESH_S = 60.0  # a DAG unpaused or rescheduled is seen this late at most (it runs anyway)
DUE_MARGIN_S = 0.05  # the loop after the wait begins this long after the run is due, not before


class PromptLocalExecutor(LocalExecutor):
    """LocalExecutor whose idle heartbeat waits (bounded) for a worker's report."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.idle_wait_s = conf.getfloat("lakehouse", "executor_idle_wait", fallback=4.0)
        self.loop_sleep_s = conf.getfloat("scheduler", "scheduler_idle_sleep_time")
        self._sent = False
        self._due: float | None = None  # epoch s of the next scheduled DAG run, None when none
        self._due_asked = float("-inf")

    def _process_workloads(self, workload_list):
        self._sent = self._sent or bool(workload_list)
        super()._process_workloads(workload_list)

    def sync(self) -> None:
        if not self._sent and self.idle_wait_s > 0:
            # The queue's read end: poll() returns when a report is there to read, reading none of it.
            self.result_queue._reader.poll(self._wait_s(time.time()))
        if not self.result_queue.empty():  # a run may end on this report: its DAG's next due time moves
            self._due_asked = float("-inf")
        self._sent = False
        super().sync()

    def _wait_s(self, now: float) -> float:
        """How long an idle heartbeat may wait: up to ``idle_wait_s``, and no longer than lets the
        scheduler's next loop (after its own sleep) begin once the next scheduled run is due."""
        if now - self._due_asked > DUE_REFRESH_S or (self._due is not None and self._due <= now):
            try:
                self._due = next_due()
            except SQLAlchemyError as error:  # only a shorter wait is lost: the scheduler goes on
                self.log.warning("next scheduled run's time not read (%s): waiting up to %.0f s", error,
                                 self.idle_wait_s)
                self._due = None
            self._due_asked = now
        if self._due is None:
            return self.idle_wait_s
        return min(self.idle_wait_s, max(0.0, self._due + DUE_MARGIN_S - self.loop_sleep_s - now))


def next_due() -> float | None:
    """Epoch seconds of the earliest future ``next_dagrun_create_after`` of an unpaused DAG."""
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from sqlalchemy import func, select

    with create_session() as session:
        due = session.scalar(select(func.min(DagModel.next_dagrun_create_after)).where(
            DagModel.is_paused.is_(False), DagModel.is_stale.is_(False),
            DagModel.next_dagrun_create_after > func.now()))
    return due.timestamp() if due is not None else None
