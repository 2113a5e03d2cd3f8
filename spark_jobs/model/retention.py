"""The rollback window a spec declares (``retention: {rollback: 7 days}``) and what it takes.

A rollback to a batch needs that batch's offsets, commit and state version, which Spark keeps
for the last ``min_batches_to_retain`` batches, and the tables' log versions, which Delta keeps
for ``delta.logRetentionDuration`` (30 days unless a table says otherwise). So a window in time is
a number of batches: the runs the stream DAG's schedule makes in it, times the batches a run
makes (a batch of rows, and for a stateful hop the no-data batch that moves its watermark on).
Runs started by hand between scheduled ones make more batches: the count is a floor.

The other clean-ups ``lakehouse maintain`` makes are bounded by the same window: a landing file
goes only once no rollback inside it reads the file again (and it is older than
``retention.landing``), a record only when it is older than ``retention.records``, which may not
be shorter than the window.
"""

from __future__ import annotations

import datetime as dt

from spark_jobs.model.errors import UsageError
from spark_jobs.model.times import duration_ms

BATCHES_PER_RUN = 2
DELTA_LOG_DAYS = 30  # delta.logRetentionDuration's default
DEFAULT_BATCHES = 100  # Spark's minBatchesToRetain default
DEFAULT_RECORDS = "90 days"
EXPIRED_LANDING = ("archive", "delete")
_WEEK_MS = 7 * 24 * 3600 * 1000
_LEAP_CYCLE_MS = (4 * 365 + 1) * 24 * 3600 * 1000  # four years: a 29 February among them
# a Monday: runs are counted from a fixed point, the same every time
_EPOCH = dt.datetime(2026, 1, 5)
# At most this many fires are listed: at one a minute, more than the 30 days a window may last.
_MOST_LISTED = 50_000


def _fires(schedule: str, span_ms: int) -> list[int]:
    """When ``schedule`` fires in ``[_EPOCH, _EPOCH + span_ms)``, in ms from ``_EPOCH`` (at most
    ``_MOST_LISTED`` of them)."""
    from croniter import croniter

    moments, fires = croniter(schedule, _EPOCH - dt.timedelta(milliseconds=1)), []
    while len(fires) < _MOST_LISTED:
        at = round((moments.get_next(dt.datetime) - _EPOCH).total_seconds() * 1000)
        if at >= span_ms:
            break
        fires.append(at)
    return fires


def _most_in(fires: list[int], window_ms: int) -> int:
    """The most of ``fires`` (in order) that one window of ``window_ms`` holds, wherever it
    starts."""
    most, first = 0, 0
    if window_ms <= 0:
        return 0
    for last, at in enumerate(fires):
        while fires[first] <= at - window_ms:
            first += 1
        most = max(most, last - first + 1)
    return most


def runs_in(schedule: str, window_ms: int, every_ms: tuple[int, ...] = ()) -> int | None:
    """The most times a cron ``schedule`` fires in a window of ``window_ms``, wherever the
    window starts (a schedule that names days of the month or months, over four years; one on
    weekdays and hours, over a week, whole weeks counted as such); None when it is not a cron
    expression. With ``every_ms`` (a stream DAG run on arrival: its ``min_interval`` and
    ``max_wait``), at most one run per each of those."""
    from croniter import croniter

    if every_ms:
        return sum(-(-window_ms // every) for every in every_ms)
    if not croniter.is_valid(schedule):
        return None
    _minutes, _hours, days, months, _weekdays = croniter(schedule).expanded
    weekly = days == ["*"] and months == ["*"]
    weeks, rest = divmod(window_ms, _WEEK_MS) if weekly else (0, window_ms)
    fires = _fires(schedule, (_WEEK_MS if weekly else _LEAP_CYCLE_MS) + rest)
    if len(fires) == _MOST_LISTED:  # dense: the windows within the fires listed
        return _most_in(fires, window_ms)
    per_week = sum(at < _WEEK_MS for at in fires) if weekly else 0
    return weeks * per_week + _most_in(fires, rest)


def needed_batches(
    rollback: str, schedule: str, where: str, every_ms: tuple[int, ...] = ()
) -> tuple[int, int]:
    """The scheduled runs in a rollback window of ``rollback`` and the batches a checkpoint must
    keep for it; a :class:`UsageError` naming the fix when the window cannot be had."""
    window_ms = duration_ms(rollback)
    if window_ms > DELTA_LOG_DAYS * 24 * 3600 * 1000:
        raise UsageError(
            f"{where} has retention.rollback {rollback!r}, longer than the {DELTA_LOG_DAYS} days "
            "Delta keeps a table's log: use at most 30 days"
        )
    runs = runs_in(schedule, window_ms, every_ms)
    if runs is None:
        raise UsageError(
            f"{where} has retention.rollback {rollback!r} and schedule {schedule!r}, whose runs "
            "cannot be counted: give a cron schedule (e.g. `*/30 * * * *`) or "
            "remove retention.rollback"
        )
    return runs, runs * BATCHES_PER_RUN


def check_retention(retention: dict, where: str) -> None:
    """Refuse an ``expired_landing`` that is neither ``archive`` nor ``delete``, and a
    ``records`` retention shorter than the rollback window (a rollback reads its records)."""
    action = retention.get("expired_landing", EXPIRED_LANDING[0])
    if action not in EXPIRED_LANDING:
        raise UsageError(
            f"{where} has retention.expired_landing {action!r}: use `archive` or `delete`"
        )
    rollback, records = retention.get("rollback"), retention.get("records", DEFAULT_RECORDS)
    if rollback is not None and duration_ms(str(records)) < duration_ms(str(rollback)):
        raise UsageError(
            f"{where} keeps records for {records}, less than its rollback window of {rollback}: "
            f"raise retention.records to at least {rollback}"
        )


def records_ms(retention: dict) -> int:
    """How long records are kept (``retention.records``, else 90 days)."""
    return duration_ms(str(retention.get("records", DEFAULT_RECORDS)))


def batches_to_retain(
    raw: dict, schedule: str, where: str, every_ms: tuple[int, ...] = ()
) -> int | None:
    """``min_batches_to_retain`` for a spec's ``raw`` keys: the declared window's need (at least
    Spark's default, 100) when the spec gives no number, the spec's number when it is enough
    (None: neither is given); a :class:`UsageError` with the number needed otherwise (or when
    :func:`check_retention` refuses the ``retention`` mapping)."""
    check_retention(raw.get("retention") or {}, where)
    rollback = (raw.get("retention") or {}).get("rollback")
    given = raw.get("min_batches_to_retain")
    if rollback is None:
        return given
    runs, needed = needed_batches(str(rollback), schedule, where, every_ms)
    if given is not None and given < needed:
        raise UsageError(
            f"{where} keeps {given} batches (min_batches_to_retain), but a rollback window of "
            f"{rollback} at schedule {schedule!r} needs {needed} ({runs} runs of up to "
            f"{BATCHES_PER_RUN} batches): raise min_batches_to_retain to {needed}, or leave it "
            "out, or shorten retention.rollback"
        )
    return given if given is not None else max(DEFAULT_BATCHES, needed)
