"""Times as the CLI, the specs and the logs give them: ISO-8601 in UTC, epoch milliseconds and
window lengths such as ``10 seconds``."""

from __future__ import annotations

import datetime as dt
import time

from spark_jobs.model.errors import UsageError
from spark_jobs.model.settings import CLOCK_SHIFT

_UNIT_MS = {
    "millisecond": 1,
    "second": 1000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": 86_400_000,
}


def parse_time(text: str, flag: str) -> int:
    """ISO-8601 date or datetime (UTC when it has no offset) as epoch milliseconds."""
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"{flag} {text!r} is not an ISO-8601 date or time: use e.g. 2026-01-31 "
            "or 2026-01-31T12:00:00"
        )
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def epoch_seconds(value) -> float | None:
    """A record's time as epoch seconds: a number as it is (records keep floats), ISO text
    parsed (alerts and progress entries keep text); None when it is neither."""
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_time(value, "at") / 1000
    except UsageError:
        return None


def iso(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC without an offset, to the millisecond."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


def duration_ms(text: str) -> int:
    """``10 seconds``, ``1 minute``, ``2 hours`` as milliseconds."""
    amount, unit = text.split()
    return int(amount) * _UNIT_MS[unit.rstrip("s")]


def merged_spans(spans) -> list[tuple[int, int]]:
    """``[start, end)`` spans with the overlapping or touching ones merged, oldest first."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def now_s() -> float:
    """The platform's clock, in seconds: where retention decides what is old, and the times its
    records carry. The real time, moved forward by ``$LAKEHOUSE_CLOCK_SHIFT`` when set (tests
    and benchmarks age a lake with it)."""
    shift = CLOCK_SHIFT.value()
    try:
        moved = duration_ms(shift) if shift else 0
    except (ValueError, KeyError):
        raise UsageError(
            f"{CLOCK_SHIFT.name}={shift!r} is not a duration: use e.g. `8 days`, or unset it"
        ) from None
    return time.time() + moved / 1000


def now_ms() -> int:
    """:func:`now_s` in whole milliseconds."""
    return int(now_s() * 1000)
