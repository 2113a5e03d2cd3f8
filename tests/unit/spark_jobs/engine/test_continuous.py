"""``spark_jobs/engine/continuous.py``: an always-on query that failed or stopped by itself fails
the session (a stand-in query, no JVM)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.unit


def test_an_always_on_query_that_stopped_by_itself_fails_the_session():
    """``run --continuous`` checks each query every second: one with an exception fails the
    session, and so does one that is no longer active with none (a query the session did not
    stop). A stand-in for Spark's StreamingQuery: only the two members the check reads."""
    from spark_jobs.engine.continuous import query_failure

    class Query:
        def __init__(self, active: bool, error: Exception | None = None):
            self.isActive, self.error = active, error

        def exception(self):
            return self.error

    assert query_failure("gold", Query(active=True)) is None
    assert (
        query_failure("gold", Query(active=True, error=RuntimeError("boom\nat ...")))
        == "gold failed: boom"
    )
    assert (
        query_failure("gold", Query(active=False, error=RuntimeError("boom")))
        == "gold failed: boom"
    )
    assert query_failure("gold", Query(active=False)).startswith(
        "gold's query stopped without an error"
    )
