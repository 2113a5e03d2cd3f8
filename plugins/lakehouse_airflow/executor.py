"""Airflow's LocalExecutor, with the scheduler's idle wait moved to where a task's end is seen.

Airflow's scheduler sleeps ``scheduler_idle_sleep_time`` after a loop that queued no task and
saw none end, so a task that ends during the sleep is noticed only when the sleep is over: the
next task of the DAG run, or the run's end, waits up to that long. The platform keeps an idle
scheduler cheap with a slow idle loop (docs/benchmarks.md); at a 5-s
sleep a stream DAG run that found nothing new took about 8 s, most of it asleep after a 0.1-s task.

:class:`PromptLocalExecutor` waits in its heartbeat instead, when it sent no work this
heartbeat and no report is waiting: on the queue its workers report on, for at most
``[lakehouse] executor_idle_wait`` seconds (``AIRFLOW__LAKEHOUSE__EXECUTOR_IDLE_WAIT``),
returning as soon as a worker reports, and never past the moment the scheduler's next loop must
begin for the next scheduled DAG run to be created on time (the earliest
``next_dagrun_create_after`` of the DAGs the scheduler may create a run of: asked again once that
moment passed, after a worker reported, and at least once a minute). A run whose time came while
its DAG was at ``max_active_runs`` is created by the scheduler's first loop after the holding run
ended, and so is a run queued meanwhile (triggered, say) started: the wait after the holding
run's last report asks, finds it due, and does not wait (once per due time between reports).
Nor does it wait while a running DAG run has no task the workers or a trigger hold (every task
finished or not yet decided): the scheduler's next loop decides its tasks (trigger rules: a
stream DAG run's ``plan_undo`` and ``undo`` are skipped after its last gate passed) or ends it, and
each of those loops would otherwise begin an idle wait later (up to :data:`QUICK_LOOPS` loops
after a report).
The launcher sets the scheduler's own sleep to 1 s and this wait to 9 s, so an idle loop comes
round every 10 s, a task's end is acted on at once, and a scheduled run starts at its time.

On PostgreSQL the wait also ends when a DAG run is made outside the scheduler (triggered from the
UI, the REST API or the CLI, a backfill's) or a finished run is queued again (its tasks cleared):
the executor installs a trigger on ``dag_run`` that sends a notification (``pg_notify`` on
:data:`WAKE_CHANNEL`; runs the scheduler makes itself send none) and LISTENs on a connection of
its own, so such a run starts about a second after it is made. Without PostgreSQL, or when the
trigger cannot be installed (logged), it starts within one idle loop.
"""

from __future__ import annotations

import time
from multiprocessing.connection import wait

from airflow.configuration import conf
from airflow.executors.local_executor import LocalExecutor
from sqlalchemy.exc import SQLAlchemyError

DUE_REFRESH_S = 60.0  # a DAG unpaused or rescheduled is seen this late at most (it runs anyway)
DUE_MARGIN_S = 0.05  # the loop after the wait begins this long after the run is due, not before
# after a report, this many waits at most are skipped for runs the scheduler decides alone
QUICK_LOOPS = 4
WAKE_CHANNEL = "lakehouse_scheduler_wake"
WAKE_RETRY_S = 60.0  # a lost listening connection is opened again this late at most
# Runs the scheduler creates itself (scheduled) send nothing; a manual, backfill or asset-triggered
# run does when made, and a run does when it is queued again (cleared). The columns are read in the
# function's body, not in the trigger's definition, so Airflow's migrations can still alter them.
WAKE_SQL = f"""
CREATE OR REPLACE FUNCTION lakehouse_wake_scheduler() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (TG_OP = 'INSERT' AND NEW.run_type <> 'scheduled')
       OR (TG_OP = 'UPDATE' AND NEW.state = 'queued' AND OLD.state IS DISTINCT FROM 'queued') THEN
        PERFORM pg_notify('{WAKE_CHANNEL}', NEW.dag_id);
    END IF;
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER lakehouse_wake AFTER INSERT OR UPDATE ON dag_run
    FOR EACH ROW EXECUTE FUNCTION lakehouse_wake_scheduler();
"""


class PromptLocalExecutor(LocalExecutor):
    """LocalExecutor whose idle heartbeat waits (bounded) for a worker's report."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.idle_wait_s = conf.getfloat("lakehouse", "executor_idle_wait", fallback=4.0)
        self.loop_sleep_s = conf.getfloat("scheduler", "scheduler_idle_sleep_time")
        self._sent = False
        self._due: float | None = None  # epoch s of the next scheduled DAG run, None when none
        self._due_asked = float("-inf")
        self._overdue: float | None = None  # the due time past already given a wait of 0
        self._quick_left = 0  # waits still to skip while a run awaits the scheduler's own decisions
        self._wake: RunWake | None = None
        self._wake_tried = float("-inf")

    def start(self) -> None:
        # forks the workers: the listening connection is opened after, in this process only
        super().start()
        self._open_wake(time.time())

    def end(self) -> None:
        super().end()
        if self._wake is not None:
            self._wake.close()
            self._wake = None

    def _open_wake(self, now: float) -> None:
        self._wake_tried = now
        try:
            self._wake = RunWake.open()
            if self._wake is not None:
                self.log.info(
                    "an idle wait ends when a DAG run is made outside the scheduler (LISTEN %s)",
                    WAKE_CHANNEL,
                )
        except Exception as error:  # noqa: BLE001 - any failure only leaves the plain wait
            self.log.warning(
                "runs made outside the scheduler start within one idle loop: no wake (%s)", error
            )

    def _process_workloads(self, workload_list):
        self._sent = self._sent or bool(workload_list)
        super()._process_workloads(workload_list)

    def sync(self) -> None:
        if not self._sent and self.idle_wait_s > 0:
            now = time.time()
            if self._wake is None and now - self._wake_tried > WAKE_RETRY_S:
                self._open_wake(now)
            # The queue's read end is ready when a report is there (nothing is read from it here).
            waiting_on = [self.result_queue._reader] + (
                [self._wake] if self._wake is not None else []
            )
            timeout = 0.0 if self._scheduler_decides() else self._wait_s(now)
            if self._wake in wait(waiting_on, timeout):
                self._drain_wake()
        # a run may end on this report: its DAG's next due time moves
        if not self.result_queue.empty():
            self._due_asked, self._overdue, self._quick_left = float("-inf"), None, QUICK_LOOPS
        self._sent = False
        super().sync()

    def _drain_wake(self) -> None:
        try:
            self._wake.drain()
        except Exception as error:  # noqa: BLE001 - a lost connection: opened again later
            self.log.warning(
                "the wake connection failed (%s): opened again within %.0f s", error, WAKE_RETRY_S
            )
            self._wake.close()
            self._wake = None

    def _scheduler_decides(self) -> bool:
        """Whether a running DAG run awaits only the scheduler's next loop (asked for the first
        :data:`QUICK_LOOPS` waits after a report only)."""
        if self._quick_left <= 0:
            return False
        self._quick_left -= 1
        try:
            return runs_to_decide()
        except SQLAlchemyError as error:  # only a shorter wait is lost
            self.log.warning("running DAG runs not read (%s): waiting as usual", error)
            return False

    def _wait_s(self, now: float) -> float:
        """How long an idle heartbeat may wait: up to ``idle_wait_s``, and no longer than lets the
        scheduler's next loop (after its own sleep) begin once the next scheduled run is due."""
        if now - self._due_asked > DUE_REFRESH_S or (self._due is not None and self._due <= now):
            try:
                earliest, self._due = due_times()
            except SQLAlchemyError as error:  # only a shorter wait is lost: the scheduler goes on
                self.log.warning(
                    "next scheduled run's time not read (%s): waiting up to %.0f s",
                    error,
                    self.idle_wait_s,
                )
                earliest = self._due = None
            self._due_asked = now
            if earliest is not None and earliest != self._due and earliest != self._overdue:
                # Past, and no longer held back (a run of its DAG just ended): the scheduler's next
                # loop creates or starts it. Once per due time between reports: one the scheduler
                # passes over for a reason of its own must not shorten every wait.
                self._overdue = earliest
                return 0.0
        if self._due is None:
            return self.idle_wait_s
        return min(self.idle_wait_s, max(0.0, self._due + DUE_MARGIN_S - self.loop_sleep_s - now))


def due_times() -> tuple[float | None, float | None]:
    """Epoch seconds of the earliest moment a DAG run is due, past or not, and of the earliest one
    still to come. Due: the ``next_dagrun_create_after`` of a DAG the scheduler may create a
    scheduled run of (its own conditions: unpaused, not stale, parsed without error, not at
    ``max_active_runs``), and the ``queued_at`` of a queued run (not a backfill's) the scheduler may
    start (its DAG unpaused, not stale, with fewer running runs than ``max_active_runs``)."""
    from airflow.models.dag import DagModel
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState
    from sqlalchemy import case, func, select
    from sqlalchemy.orm import aliased

    due = DagModel.next_dagrun_create_after
    running = aliased(DagRun)
    startable = (
        select(func.min(DagRun.queued_at))
        .join(DagModel, DagModel.dag_id == DagRun.dag_id)
        .where(
            DagRun.state == DagRunState.QUEUED,
            DagRun.backfill_id.is_(None),
            DagModel.is_paused.is_(False),
            DagModel.is_stale.is_(False),
            select(func.count())
            .where(
                running.dag_id == DagRun.dag_id,
                running.state == DagRunState.RUNNING,
                running.backfill_id.is_(None),
            )
            .scalar_subquery()
            < DagModel.max_active_runs,
        )
    )
    with create_session() as session:
        earliest, future = session.execute(
            select(func.min(due), func.min(case((due > func.now(), due)))).where(
                DagModel.is_paused.is_(False),
                DagModel.is_stale.is_(False),
                DagModel.has_import_errors.is_(False),
                DagModel.exceeds_max_non_backfill.is_(False),
            )
        ).one()
        queued = session.scalar(startable)
    earliest = min((found for found in (earliest, queued) if found is not None), default=None)
    return tuple(found.timestamp() if found is not None else None for found in (earliest, future))


# Task states that something other than the scheduler's next loop ends: the workers, a trigger, a
# retry's or a reschedule's delay, a pool's or a concurrency limit's free slot.
HELD_ELSEWHERE = (
    "scheduled",
    "queued",
    "running",
    "restarting",
    "deferred",
    "up_for_retry",
    "up_for_reschedule",
)


def runs_to_decide() -> bool:
    """Whether a running DAG run has no task in :data:`HELD_ELSEWHERE`: every task of it finished
    or still undecided, so the scheduler's next loop sets its tasks' states or ends it."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState
    from sqlalchemy import exists, select

    held = exists().where(
        TaskInstance.dag_id == DagRun.dag_id,
        TaskInstance.run_id == DagRun.run_id,
        TaskInstance.state.in_(HELD_ELSEWHERE),
    )
    with create_session() as session:
        return bool(
            session.scalar(select(exists().where(DagRun.state == DagRunState.RUNNING, ~held)))
        )


class RunWake:
    """A PostgreSQL connection of the scheduler's own, LISTENing on :data:`WAKE_CHANNEL`; ready to
    read (``fileno``) when a notification came."""

    def __init__(self, connection):
        self.connection = connection  # psycopg2's, in autocommit

    @classmethod
    def open(cls, engine=None) -> RunWake | None:
        """On Airflow's metadata DB (``engine``: Airflow's own by default): the trigger installed,
        then LISTEN; None when the DB is not PostgreSQL through psycopg2."""
        if engine is None:
            from airflow import settings

            engine = settings.engine
        if engine.dialect.name != "postgresql" or engine.dialect.driver != "psycopg2":
            return None
        pooled = engine.raw_connection()
        connection = pooled.driver_connection
        pooled.detach()  # held for good: closing it closes it, never returns it to the pool
        try:
            connection.rollback()
            connection.autocommit = True
            with connection.cursor() as cursor:
                # never hold the scheduler's start for long
                cursor.execute("SET lock_timeout = '5s'")
                cursor.execute(WAKE_SQL)
                cursor.execute(f"LISTEN {WAKE_CHANNEL}")
        except Exception:
            connection.close()
            raise
        return cls(connection)

    def fileno(self) -> int:
        return self.connection.fileno()

    def drain(self) -> int:
        """Read the notifications that came; how many. Raises when the connection is lost."""
        self.connection.poll()
        count = len(self.connection.notifies)
        self.connection.notifies.clear()
        # ready with nothing to read: the server may have ended the connection (poll() says nothing)
        if not count:
            with self.connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        return count

    def close(self) -> None:
        self.connection.close()
