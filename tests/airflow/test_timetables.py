"""``plugins/lakehouse_airflow/timetables.py``: the backfill DAG's timetable, asked Airflow's own
questions in-process on the real backfill DAG as the scheduler holds it (serialized, the timetable
found again through the plugin): the scheduler's (the DAG's ``catchup=False``) gets no run, a
backfill's (its range, with catchup) one run per UTC day.

``test_airflow.py`` has the CLI's ``backfill create`` and the scheduler's first look after
``dags reserialize``; here, the scheduler's look after a run, and the intervals themselves.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

pytestmark = [pytest.mark.unit, pytest.mark.airflow]

DAY = timedelta(days=1)


@pytest.fixture(scope="module")
def backfill_dag(airflow_in_process):
    """ad_events' backfill DAG after a round trip through Airflow's serialization."""
    from airflow.serialization.serialized_objects import DagSerialization
    from lakehouse_airflow import dag_factory

    from spark_jobs.model.spec import get_spec

    dag = dag_factory.build_backfill_dag(get_spec("ad_events"))
    return DagSerialization.from_dict(DagSerialization.to_dict(dag))


def test_the_scheduler_makes_no_run_before_or_after_a_backfill_run(backfill_dag):
    from airflow.timetables.base import DataInterval, TimeRestriction
    from airflow.timetables.interval import CronDataIntervalTimetable
    from lakehouse_airflow.timetables import BackfillOnlyTimetable

    timetable, first = backfill_dag.timetable, backfill_dag.start_date
    assert isinstance(timetable, BackfillOnlyTimetable) and not backfill_dag.catchup
    # What the scheduler asks (the DAG's start and catchup), first and after a backfill's run
    # (the DAG's latest automated one), answered by a plain daily timetable: a run each time.
    asked = TimeRestriction(first, None, catchup=backfill_dag.catchup)
    plain = CronDataIntervalTimetable("@daily", timezone="UTC")
    for last in (None, DataInterval(first, first + DAY)):
        assert plain.next_dagrun_info(last_automated_data_interval=last, restriction=asked)
        assert (
            timetable.next_dagrun_info(last_automated_data_interval=last, restriction=asked) is None
        )
    # the scheduler's own call, on the DAG
    assert backfill_dag.next_dagrun_info(last_automated_run_info=None) is None
    # what the DAG list shows as its schedule
    assert timetable.summary.startswith("backfills only")


def test_a_backfill_gets_one_run_per_utc_day_of_its_range_and_a_manual_run_the_day_before(
    backfill_dag,
):
    first = backfill_dag.start_date.replace(hour=0, minute=0, second=0, microsecond=0)
    days = 3
    runs = list(backfill_dag.iter_dagrun_infos_between(first, first + (days - 1) * DAY))
    assert [(run.data_interval.start, run.data_interval.end) for run in runs] == [
        (first + index * DAY, first + (index + 1) * DAY) for index in range(days)
    ]
    assert all(run.data_interval.start.utcoffset() == timedelta(0) for run in runs)
    # Triggered by hand with no range (its tasks then cover the run's data interval): the last
    # whole day before it.
    later = first + days * DAY + timedelta(hours=9, minutes=30)
    manual = backfill_dag.timetable.infer_manual_data_interval(run_after=later)
    assert (manual.start, manual.end) == (first + (days - 1) * DAY, first + days * DAY)
