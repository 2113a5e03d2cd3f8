"""``spark_jobs/model/retention.py``: the batches a checkpoint keeps for a rollback window, counted
by hand from cron schedules and arrival intervals, and the retention mappings refused with the fix
(plain dicts, as a spec's YAML gives them; no JVM)."""

from __future__ import annotations

import pytest

from spark_jobs.model.errors import UsageError
from spark_jobs.model.retention import (
    batches_to_retain,
    check_retention,
    needed_batches,
    records_ms,
)

pytestmark = pytest.mark.unit

MINUTE_MS = 60 * 1000
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS
WHERE = "team.yaml: the pipeline"


def test_a_cron_window_needs_two_batches_per_run_it_holds():
    # every half hour for a day: 24 hours * 2 runs
    assert needed_batches("1 day", "*/30 * * * *", WHERE) == (48, 96)
    # hourly for three days: 3 * 24 runs
    assert needed_batches("3 days", "0 * * * *", WHERE) == (72, 144)
    # a day's window holds the daily run at its far end
    assert needed_batches("24 hours", "0 0 * * *", WHERE) == (1, 2)
    # beyond a week, whole weeks and the most the rest holds: weekdays only make 5 runs a week,
    # and the 3 days left hold at most 3 of them (from a Monday's midnight to Thursday's)
    assert needed_batches("10 days", "0 0 * * 1-5", WHERE) == (8, 16)


def test_a_window_counts_the_most_runs_it_can_hold_wherever_it_starts():
    # Saturday and Sunday at midnight: 2 days from Saturday's midnight hold both
    assert needed_batches("2 days", "0 0 * * 6,0", WHERE) == (2, 4)
    # weekdays at 09:00-17:55 every 5 minutes: 12 hours from 09:00 hold 9 hours * 12 runs
    assert needed_batches("12 hours", "*/5 9-17 * * 1-5", WHERE) == (108, 216)
    # the first of each month: 30 days from 1 February hold 1 March too (28 days on)
    assert needed_batches("30 days", "0 0 1 * *", WHERE) == (2, 4)
    # 29 February, once in four years: a window can still hold it
    assert needed_batches("1 day", "0 0 29 2 *", WHERE) == (1, 2)


def test_an_arrival_window_counts_one_run_per_interval_rounded_up():
    # min_interval 7 minutes and max_wait 5 hours over a day: a day is 1440 minutes,
    # 1440 / 7 = 205.7 -> 206 runs, plus 24 / 5 = 4.8 -> 5 ticks; the schedule is not read
    every = (7 * MINUTE_MS, 5 * HOUR_MS)
    assert needed_batches("1 day", "not a cron", WHERE, every) == (211, 422)
    assert needed_batches("1 day", "not a cron", WHERE, (DAY_MS,)) == (1, 2)


def test_a_window_beyond_the_delta_log_or_with_uncountable_runs_is_refused():
    # 30 days is Delta's log retention, in whatever unit it is written
    assert needed_batches("720 hours", "0 0 * * *", WHERE) == (30, 60)
    with pytest.raises(UsageError) as refused:
        needed_batches("721 hours", "0 0 * * *", WHERE)
    assert str(refused.value) == (
        f"{WHERE} has retention.rollback '721 hours', longer than the 30 days Delta keeps a "
        "table's log: use at most 30 days"
    )
    with pytest.raises(UsageError, match=r"schedule '@continuous', whose runs cannot be counted"):
        needed_batches("1 day", "@continuous", WHERE)


def test_the_batches_kept_are_the_windows_need_or_the_specs_number_when_enough():
    hourly = "0 * * * *"
    # no window: the spec's number (or none) as it is
    assert batches_to_retain({}, hourly, WHERE) is None
    assert batches_to_retain({"min_batches_to_retain": 7, "retention": None}, hourly, WHERE) == 7
    # 2 days hourly: 48 runs, 96 batches, under Spark's default of 100, which is kept
    assert batches_to_retain({"retention": {"rollback": "2 days"}}, hourly, WHERE) == 100
    # 3 days hourly: 72 runs, 144 batches, over it
    assert batches_to_retain({"retention": {"rollback": "3 days"}}, hourly, WHERE) == 144
    # a number of the spec's own that is enough is kept, even under Spark's default
    two_days = {"retention": {"rollback": "2 days"}, "min_batches_to_retain": 96}
    assert batches_to_retain(two_days, hourly, WHERE) == 96
    with pytest.raises(UsageError) as refused:
        batches_to_retain({**two_days, "min_batches_to_retain": 95}, hourly, WHERE)
    assert str(refused.value) == (
        f"{WHERE} keeps 95 batches (min_batches_to_retain), but a rollback window of 2 days at "
        "schedule '0 * * * *' needs 96 (48 runs of up to 2 batches): raise min_batches_to_retain "
        "to 96, or leave it out, or shorten retention.rollback"
    )
    # a monthly run: a 30-day window can hold two, so 2 batches are too few
    monthly = {"retention": {"rollback": "30 days"}, "min_batches_to_retain": 2}
    with pytest.raises(UsageError, match=r"needs 4 \(2 runs of up to 2 batches\)"):
        batches_to_retain(monthly, "0 0 1 * *", WHERE)


def test_records_must_outlive_the_window_and_expired_landing_is_archive_or_delete():
    check_retention({}, WHERE)
    check_retention({"expired_landing": "delete", "landing": "3 days"}, WHERE)
    # the default 90 days of records outlive the longest window Delta allows
    check_retention({"rollback": "30 days"}, WHERE)
    # as long as the window, in another unit, is enough
    check_retention({"rollback": "7 days", "records": "168 hours"}, WHERE)
    with pytest.raises(UsageError) as refused:
        check_retention({"rollback": "7 days", "records": "167 hours"}, WHERE)
    assert str(refused.value) == (
        f"{WHERE} keeps records for 167 hours, less than its rollback window of 7 days: "
        "raise retention.records to at least 7 days"
    )
    with pytest.raises(UsageError, match=r"expired_landing 'shred': use `archive` or `delete`"):
        check_retention({"expired_landing": "shred"}, WHERE)
    # the spec's batches are not worked out around a refused mapping
    with pytest.raises(UsageError, match="raise retention.records to at least 2 days"):
        batches_to_retain(
            {"retention": {"rollback": "2 days", "records": "1 day"}}, "0 * * * *", WHERE
        )


def test_records_are_kept_ninety_days_unless_retention_says_otherwise():
    assert records_ms({}) == 90 * DAY_MS
    assert records_ms({"rollback": "7 days"}) == 90 * DAY_MS
    assert records_ms({"records": "12 hours"}) == 12 * HOUR_MS
