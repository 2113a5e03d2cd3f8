"""The backfill DAG's timetable: daily data intervals that Airflow's backfills (UI, REST API,
CLI) and manual runs use, and no run of its own.

A plain ``CronDataIntervalTimetable`` makes the scheduler run the latest interval as soon as
the DAG is unpaused, and then every day: a batch recompute of yesterday nobody asked for
(unpausing is needed for a backfill's runs to start). Airflow's ``allowed_run_types`` cannot
leave scheduled runs out of a DAG with a schedule, and a backfill needs one, so this timetable
answers the scheduler's question (asked with the DAG's ``catchup=False``) with no run, and a
backfill's (asked with ``catchup=True`` over its range) with the range's intervals.
"""

from __future__ import annotations

from airflow.timetables.base import DagRunInfo, DataInterval, TimeRestriction
from airflow.timetables.interval import CronDataIntervalTimetable


class BackfillOnlyTimetable(CronDataIntervalTimetable):
    """Data intervals of a cron expression for backfills and manual runs only."""

    @property
    def summary(self) -> str:
        return f"backfills only ({self._expression})"

    def next_dagrun_info(
        self, *, last_automated_data_interval: DataInterval | None, restriction: TimeRestriction
    ) -> DagRunInfo | None:
        if not restriction.catchup:  # the scheduler's own run: never (the DAG has catchup=False)
            return None
        return super().next_dagrun_info(
            last_automated_data_interval=last_automated_data_interval, restriction=restriction
        )
