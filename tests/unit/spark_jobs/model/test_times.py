"""``spark_jobs/model/times.py``: times parse as UTC, an offset converted, a wrong one refused."""

from __future__ import annotations

import pytest

from spark_jobs.model.errors import UsageError
from spark_jobs.model.times import parse_time

pytestmark = pytest.mark.unit


def test_parse_time_is_utc_without_offset():
    assert parse_time("2026-03-01", "--start") == 1_772_323_200_000
    assert parse_time("2026-03-01T01:00:00+01:00", "--start") == 1_772_323_200_000
    with pytest.raises(UsageError, match="not an ISO-8601"):
        parse_time("yesterday", "--start")
