"""A ``summary`` hop's measures: aggregates of a ``changes`` hop's current rows per group.

The hop reads the change data feed of the ``changes`` hop above it (the rows each of its commits
inserted, updated or deleted) to learn which groups (its ``keys``) a batch touched, and computes
each touched group's ``measures`` again from the rows the changes table holds as of that batch:
so a group's row is always what the measures make of the current rows, under updates, deletes,
truncates, rollbacks and backfills alike. Plain data; the engine computes it
(:mod:`spark_jobs.engine.sinks.summary`).
"""

from __future__ import annotations

from spark_jobs.model.errors import UsageError
from spark_jobs.model.kinds import HopKind


def hop_measures(raw: dict, kind: HopKind, subject: str) -> tuple[tuple[str, str], ...]:
    """A summary hop's ``measures`` (``{name: Spark SQL aggregate}``) as pairs, in order; the key
    on another kind's hop is refused."""
    measures = raw.get("measures")
    if not kind.reads_changes:
        if measures is not None:
            raise UsageError(
                f"{subject} (kind {kind.name}) has measures, which only a summary hop takes: "
                "remove it"
            )
        return ()
    if not isinstance(measures, dict) or not measures:
        raise UsageError(
            f"{subject} (kind {kind.name}) lacks measures: add each column and the Spark SQL "
            "aggregate that makes it from a group's current rows (`measures: {customers: "
            "count(*)}`)"
        )
    for name, expression in measures.items():
        if not isinstance(expression, str) or not expression.strip():
            raise UsageError(
                f"{subject} has measure {name} {expression!r}: give a Spark SQL aggregate, e.g. "
                "`count(*)` or `max(changed_at)`"
            )
    if not raw.get("keys"):
        raise UsageError(
            f"{subject} (kind {kind.name}) lacks keys: add the columns it groups the current "
            "rows by (`keys: [tier]`)"
        )
    return tuple((str(name), str(expression)) for name, expression in measures.items())
