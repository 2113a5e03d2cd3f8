"""``PromptLocalExecutor`` (plugins/lakehouse_airflow/executor.py): an idle heartbeat waits on its
workers' report queue, returns when a report comes, stops waiting in time for the next
scheduled DAG run, and (PostgreSQL) when a run is made outside the scheduler.

Real LocalExecutor queues and worker processes, a real (SQLite) metadata DB for the due time, a real
PostgreSQL server for the wake (its ``dag_run`` table reduced to the columns the trigger reads). One
test replaces the parent class's hand-over to the workers with a recorder (a mock of that call only,
said where it is). The end-to-end proof is the real scheduler: ``test_platform.py`` runs every DAG
through it, and ``python -m bench --only scheduled`` measures the runs.
"""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest

pytestmark = [pytest.mark.unit, pytest.mark.airflow]


@pytest.fixture
def executor(airflow_in_process):
    from lakehouse_airflow.executor import PromptLocalExecutor

    found = PromptLocalExecutor(parallelism=1)
    found.start()
    found._due_asked = time.time()  # no scheduled run: the due-time tests set their own
    yield found
    found.end()


def _timed_sync(executor) -> float:
    began = time.monotonic()
    executor.sync()
    return time.monotonic() - began


def test_an_idle_heartbeat_waits_its_bound_when_nothing_reports(executor):
    executor.idle_wait_s = 0.5
    assert _timed_sync(executor) >= 0.5


def test_a_report_ends_the_wait_and_reaches_the_event_buffer(executor):
    from airflow.models.taskinstancekey import TaskInstanceKey
    from airflow.utils.state import TaskInstanceState
    from lakehouse_airflow.executor import QUICK_LOOPS

    executor.idle_wait_s = 120.0
    executor._due, executor._due_asked = time.time() + 90, time.time()  # known: a run due in 90 s
    executor._overdue = time.time() - 30  # a past due time already given its wait of 0
    key = TaskInstanceKey("dag", "task", "run", 1)
    threading.Timer(
        0.3, lambda: executor.result_queue.put((key, TaskInstanceState.SUCCESS, None))
    ).start()
    assert _timed_sync(executor) < 60  # returned on the report, not after 90 s
    assert executor.get_event_buffer()[key][0] == TaskInstanceState.SUCCESS
    # A run may have ended on that report, moving its DAG's next due time: the next wait asks again.
    now = time.time()
    executor._wait_s(now)
    assert executor._due_asked == now
    assert executor._overdue is None  # and a due time past may end a wait once more
    # and the next waits ask whether a run is the scheduler's alone
    assert executor._quick_left == QUICK_LOOPS


def test_a_heartbeat_that_handed_work_over_does_not_wait(executor, monkeypatch):
    from airflow.executors.local_executor import LocalExecutor

    handed = []
    # A mock of the parent's hand-over to the workers only: no workload is built or run here.
    monkeypatch.setattr(
        LocalExecutor, "_process_workloads", lambda self, workloads: handed.extend(workloads)
    )
    executor.idle_wait_s = 120.0
    executor._process_workloads(["workload"])
    assert handed == ["workload"] and _timed_sync(executor) < 60
    executor.idle_wait_s = 0.3
    assert _timed_sync(executor) >= 0.3  # the next idle heartbeat waits again


def test_the_wait_ends_when_the_next_scheduled_run_is_due(executor):
    executor.idle_wait_s = 120.0
    executor.loop_sleep_s = 1.0
    now = time.time()
    executor._due, executor._due_asked = now + 3.0, now
    # the loop after the 1-s sleep begins at 3.05
    assert executor._wait_s(now) == pytest.approx(2.05)
    executor._due = now + 0.5
    assert executor._wait_s(now) == 0.0  # due sooner than the sleep: no wait at all
    executor._due, executor._due_asked = None, now
    assert executor._wait_s(now) == 120.0


def test_a_due_time_that_cannot_be_read_leaves_the_plain_wait(executor, monkeypatch):
    from lakehouse_airflow import executor as module
    from sqlalchemy.exc import OperationalError

    def unreadable():
        raise OperationalError("SELECT", {}, Exception("the metadata DB went away"))

    # our own query, made to fail as a lost DB would
    monkeypatch.setattr(module, "due_times", unreadable)
    executor.idle_wait_s = 4.0
    executor._due_asked = float("-inf")
    assert executor._wait_s(time.time()) == 4.0


@pytest.fixture
def dag_rows(airflow_in_process):
    """Makes ``DagModel`` rows (dag_id suffix -> paused, seconds from now to its next run, at
    max_active_runs, import errors) in the real metadata DB; removes them after."""
    from airflow.models.dag import DagModel
    from airflow.models.dagbundle import DagBundleModel
    from airflow.utils.session import create_session

    made = []

    def make(rows: dict[str, tuple[bool, float, bool, bool]]) -> dt.datetime:
        now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
        with create_session() as session:
            if session.get(DagBundleModel, "executor-test") is None:
                session.add(DagBundleModel(name="executor-test"))
                session.flush()
            for dag_id, (paused, seconds, at_max, broken) in rows.items():
                made.append(f"executor_test_{dag_id}")
                session.merge(
                    DagModel(
                        dag_id=made[-1],
                        bundle_name="executor-test",
                        is_paused=paused,
                        is_stale=False,
                        exceeds_max_non_backfill=at_max,
                        has_import_errors=broken,
                        next_dagrun_create_after=now + dt.timedelta(seconds=seconds),
                    )
                )
        return now

    yield make
    with create_session() as session:
        session.query(DagModel).filter(DagModel.dag_id.in_(made)).delete()


def test_the_due_times_are_of_dags_the_scheduler_may_make_a_run_of(dag_rows):
    from lakehouse_airflow.executor import due_times

    now = dag_rows(
        {
            "due_later": (False, 300, False, False),
            "due_soon": (False, 120, False, False),
            "paused": (True, 60, False, False),
            "at_max_active_runs": (False, 30, True, False),
            "import_error": (False, 20, False, True),
            "held_overdue": (False, -120, True, False),
            "overdue": (False, -60, False, False),
        }
    )
    assert due_times() == (
        (now - dt.timedelta(seconds=60)).timestamp(),
        (now + dt.timedelta(seconds=120)).timestamp(),
    )


def test_a_run_due_while_its_dag_was_held_back_gets_no_wait_once(executor, dag_rows):
    """A tick passed while the DAG was at max_active_runs: the wait after the holding run's end does
    not wait (the scheduler's next loop creates the run), once for that due time."""
    executor.idle_wait_s, executor.loop_sleep_s = 120.0, 1.0
    now = dag_rows(
        {"held": (False, -30, True, False), "later": (False, 60, False, False)}
    ).timestamp()
    executor._due_asked = float("-inf")
    # held: waits
    assert executor._wait_s(time.time()) == pytest.approx(now + 60.05 - 1.0 - time.time(), abs=1)
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session

    with create_session() as session:  # the holding run ended: the scheduler clears the flag
        session.query(DagModel).filter(DagModel.dag_id == "executor_test_held").update(
            {"exceeds_max_non_backfill": False}
        )
    executor._due_asked = float("-inf")  # as after a worker's report
    assert executor._wait_s(time.time()) == 0.0
    executor._due_asked = float("-inf")  # the scheduler passed over it: not a second time
    assert executor._wait_s(time.time()) == pytest.approx(now + 60.05 - 1.0 - time.time(), abs=1)


def test_a_queued_run_is_due_once_its_dag_has_room(dag_rows):
    """A run triggered while its DAG was at max_active_runs waits queued; once the running run ended
    (before the scheduler starts the queued one), its queued time is the earliest due."""
    from airflow.models.dag import DagModel
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from lakehouse_airflow.executor import due_times

    now = dag_rows({"busy": (False, 3600, True, False)})
    queued_at = now - dt.timedelta(seconds=40)
    with create_session() as session:
        session.query(DagModel).filter(DagModel.dag_id == "executor_test_busy").update(
            {"max_active_runs": 1}
        )
        for run_id, state, at in (
            ("holding", "running", now - dt.timedelta(seconds=90)),
            ("queued", "queued", queued_at),
        ):
            session.add(
                DagRun(
                    dag_id="executor_test_busy",
                    run_id=f"executor_test_{run_id}",
                    run_type="manual",
                    state=state,
                    queued_at=at,
                )
            )
    try:
        assert due_times() == (None, None)  # held: at max_active_runs, one running
        with create_session() as session:
            session.query(DagRun).filter(DagRun.run_id == "executor_test_holding").update(
                {"state": "success"}
            )
        assert due_times() == (queued_at.timestamp(), None)
    finally:
        with create_session() as session:
            session.query(DagRun).filter(DagRun.dag_id == "executor_test_busy").delete()


def test_a_run_whose_tasks_no_one_else_holds_is_the_schedulers_to_decide(executor, dag_rows):
    """After a stream run's last gate: ``plan_undo`` undecided (its trigger rule is the
    scheduler's), nothing queued or running: no wait, for a few waits after a report; a task held
    elsewhere (running, a retry's delay) or no running run: the usual wait."""
    import uuid

    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from lakehouse_airflow.executor import QUICK_LOOPS, runs_to_decide
    from sqlalchemy import insert, update

    dag_rows({"deciding": (False, 3600, True, False)})
    tasks = TaskInstance.__table__

    def set_task(state):
        with create_session() as session:
            session.execute(
                update(tasks)
                .where(tasks.c.dag_id == "executor_test_deciding", tasks.c.task_id == "plan_undo")
                .values(state=state)
            )

    with create_session() as session:
        session.add(
            DagRun(
                dag_id="executor_test_deciding",
                run_id="executor_test_run",
                run_type="manual",
                state="running",
            )
        )
        session.flush()
        for task_id, state in (
            ("gate_gold", "success"),
            ("plan_undo", None),
            ("all_gates_passed", "success"),
        ):
            session.execute(
                insert(tasks).values(
                    id=uuid.uuid4(),
                    dag_id="executor_test_deciding",
                    task_id=task_id,
                    run_id="executor_test_run",
                    map_index=-1,
                    try_number=1,
                    state=state,
                    pool="default_pool",
                    priority_weight=1,
                )
            )
    try:
        assert runs_to_decide()
        executor._quick_left = QUICK_LOOPS  # as after a report
        assert [executor._scheduler_decides() for _ in range(QUICK_LOOPS + 2)] == [
            True
        ] * QUICK_LOOPS + [False] * 2
        for held in ("running", "up_for_retry", "deferred"):
            set_task(held)
            assert not runs_to_decide()
        set_task("skipped")
        with create_session() as session:
            session.query(DagRun).filter(DagRun.run_id == "executor_test_run").update(
                {"state": "success"}
            )
        assert not runs_to_decide()
    finally:
        with create_session() as session:
            session.execute(tasks.delete().where(tasks.c.dag_id == "executor_test_deciding"))
            session.query(DagRun).filter(DagRun.dag_id == "executor_test_deciding").delete()


@pytest.fixture(scope="module")
def postgres(tmp_path_factory):
    """A PostgreSQL server (the launcher's embedded one) with a ``dag_run`` table of the columns
    the wake's trigger reads; a SQLAlchemy engine on it."""
    import metadata_db  # include/scripts (tests/conftest.py puts it on the path)
    from sqlalchemy import create_engine, text

    server = metadata_db.Postgres(tmp_path_factory.mktemp("wake") / "postgres")
    try:
        server.start()
        engine = create_engine(server.url())
        with engine.begin() as connection:
            connection.execute(
                text(
                    "CREATE TABLE dag_run (id serial PRIMARY KEY, dag_id text, "
                    "run_type text, state text)"
                )
            )
        yield engine
        engine.dispose()
    finally:
        server.remove()


def _run_made(engine, run_type: str, state: str = "queued") -> int:
    from sqlalchemy import text

    with engine.begin() as connection:
        return connection.execute(
            text("INSERT INTO dag_run (dag_id, run_type, state) VALUES ('d', :t, :s) RETURNING id"),
            {"t": run_type, "s": state},
        ).scalar()


def _state_set(engine, run: int, state: str) -> None:
    from sqlalchemy import text

    with engine.begin() as connection:
        connection.execute(
            text("UPDATE dag_run SET state = :s WHERE id = :i"), {"s": state, "i": run}
        )


def _woken(wake, timeout: float) -> bool:
    from multiprocessing.connection import wait

    if not wait([wake], timeout):
        return False
    return wake.drain() > 0


def test_the_wake_comes_for_runs_made_outside_the_scheduler_and_cleared_ones(postgres):
    from lakehouse_airflow.executor import RunWake

    wake = RunWake.open(postgres)
    # a second scheduler (or a restart): the trigger replaced, not doubled
    again = RunWake.open(postgres)
    try:
        run = _run_made(postgres, "manual")
        assert _woken(wake, 5) and _woken(again, 5)
        assert not _woken(wake, 0.3)  # drained: one notification per run
        _run_made(postgres, "backfill")
        assert _woken(wake, 5)
        # the scheduler's own: it acts on it in the same loop
        scheduled = _run_made(postgres, "scheduled")
        assert not _woken(wake, 0.5)
        for state in ("running", "success"):  # the scheduler moving runs on: nothing
            _state_set(postgres, scheduled, state)
        assert not _woken(wake, 0.5)
        _state_set(postgres, scheduled, "queued")  # cleared from the UI: queued again
        assert _woken(wake, 5)
        _state_set(postgres, run, "queued")  # already queued: nothing new
        assert not _woken(wake, 0.3)
    finally:
        wake.close()
        again.close()


def test_airflow_migrations_can_still_alter_the_columns_the_wake_reads(postgres):
    """The trigger reads ``run_type`` and ``state`` in its function's body: a migration that
    changes their type (as Airflow's have changed column lengths) is not refused."""
    from lakehouse_airflow.executor import RunWake
    from sqlalchemy import text

    wake = RunWake.open(postgres)
    try:
        with postgres.begin() as connection:
            for column in ("run_type", "state", "dag_id"):
                connection.execute(
                    text(f"ALTER TABLE dag_run ALTER COLUMN {column} TYPE varchar(250)")
                )
        _run_made(postgres, "manual")
        assert _woken(wake, 5)
    finally:
        wake.close()
        with postgres.begin() as connection:
            for column in ("run_type", "state", "dag_id"):
                connection.execute(text(f"ALTER TABLE dag_run ALTER COLUMN {column} TYPE text"))


def test_a_triggered_run_ends_the_idle_wait(executor, postgres):
    from lakehouse_airflow.executor import RunWake

    executor._wake = RunWake.open(postgres)
    executor.idle_wait_s = 120.0
    executor._due, executor._due_asked = time.time() + 90, time.time()
    threading.Timer(0.3, lambda: _run_made(postgres, "manual")).start()
    assert _timed_sync(executor) < 60  # returned on the notification, not after 90 s
    executor.idle_wait_s = 0.3
    assert _timed_sync(executor) >= 0.3  # drained: the next idle heartbeat waits again


def test_a_lost_wake_connection_leaves_the_plain_wait_and_is_opened_again(
    executor, postgres, monkeypatch
):
    from lakehouse_airflow import executor as module
    from sqlalchemy import text

    executor._wake = module.RunWake.open(postgres)
    with postgres.begin() as connection:  # as a restarted PostgreSQL ends it
        connection.execute(
            text("SELECT pg_terminate_backend(:pid)"),
            {"pid": executor._wake.connection.get_backend_pid()},
        )
    executor.idle_wait_s = 5.0
    executor._due, executor._due_asked = None, time.time()
    executor._wake_tried = time.time()
    # the ended connection woke it, then was let go
    assert _timed_sync(executor) < 5 and executor._wake is None
    executor.idle_wait_s = 0.3
    assert _timed_sync(executor) >= 0.3 and executor._wake is None  # the plain wait, no retry yet
    opened = module.RunWake.open
    # Airflow's own metadata DB is SQLite here: the retry is pointed at the test's PostgreSQL.
    monkeypatch.setattr(
        module.RunWake, "open", classmethod(lambda cls, engine=None: opened(postgres))
    )
    executor._wake_tried = time.time() - module.WAKE_RETRY_S - 1
    _timed_sync(executor)
    assert executor._wake is not None
    _run_made(postgres, "manual")
    executor.idle_wait_s = 120.0
    assert _timed_sync(executor) < 60  # woken through the connection opened again
