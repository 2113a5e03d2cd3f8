"""Hop kinds: what each kind of hop reads and what it can do, declared once.

The spec's checks, the control layer (rollback, repairs, state rebuilds) and the engine's registry
of a Source and a Sink per kind all ask the kind's :class:`HopKind`, never its name. Adding a kind
is one descriptor here (:func:`register`) and one Sink in the engine (plus a Source when it reads
something new); ``tests/spark/test_kinds.py`` checks that the engine pairs every declared kind, and
only those, with a Source and a Sink.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_jobs.model.errors import UsageError

LANDING, TABLE, TABLES = "landing", "table", "tables"
# What an ingest hop with a ``topic`` reads instead of its landing folder (a Kafka topic).
TOPIC = "topic"


@dataclass(frozen=True)
class HopKind:
    """One kind of hop and its capabilities.

    :param name: the spec's ``kind:`` value.
    :param reads: ``landing`` (landing files, through a file source whose checkpoint logs each
        file), ``table`` (the Delta table of one hop above) or ``tables`` (of two or more).
    :param takes_unique: its table may declare ``unique`` columns (rows whose key it holds are
        left out of a batch).
    :param keyed: its sink merges on ``keys``, which the spec must give.
    :param repairs_after_backfill: a run recomputes, after its stream, the ranges backfilled
        above it that its stream could not pair (a join), and the hops below it follow.
    :param transform_optional: the engine does the hop's work, so the pipeline module may leave
        its transform out (its rows are the upstream's as they are).
    :param feeds_streams: a hop below can stream its table (its batches append rows; a table
        whose batches rewrite rows in place is read by a hop that ``reads_changes``).
    :param reads_changes: it streams a ``changes`` hop's change data feed (the rows each commit
        inserted, updated or deleted), the one kind of upstream it reads.
    """

    name: str
    reads: str
    takes_unique: bool = False
    keyed: bool = False
    repairs_after_backfill: bool = False
    transform_optional: bool = False
    feeds_streams: bool = True
    reads_changes: bool = False

    @property
    def reads_landing(self) -> bool:
        return self.reads == LANDING

    @property
    def reads_several(self) -> bool:
        """It reads two or more upstream tables, and needs ``within`` (how far apart in event time
        two rows it combines can be)."""
        return self.reads == TABLES

    @property
    def state_rebuildable(self) -> bool:
        """Its state can be rebuilt at a past batch from its upstream tables' snapshots (a file
        source keeps no snapshot to rebuild from)."""
        return not self.reads_landing


INGEST = HopKind("ingest", LANDING)
APPEND = HopKind("append", TABLE, takes_unique=True)
AGGREGATE = HopKind("aggregate", TABLE, keyed=True)
JOIN = HopKind("join", TABLES, takes_unique=True, repairs_after_backfill=True)
# A feed of changes applied in sequence order per key (spark_jobs/model/changes.py).
CHANGES = HopKind("changes", TABLE, keyed=True, transform_optional=True, feeds_streams=False)
# Measures of a changes hop's current rows per group, kept exact under updates and deletes
# (spark_jobs/model/summary.py).
SUMMARY = HopKind(
    "summary", TABLE, keyed=True, transform_optional=True, feeds_streams=False, reads_changes=True
)

KINDS: dict[str, HopKind] = {
    kind.name: kind for kind in (INGEST, APPEND, AGGREGATE, JOIN, CHANGES, SUMMARY)
}


def kind_named(name: str, where: str = "") -> HopKind:
    """The kind called ``name``; a :class:`UsageError` naming the valid ones otherwise."""
    if name not in KINDS:
        raise UsageError(f"{where or 'unknown hop '}kind {name!r}: use one of {', '.join(KINDS)}")
    return KINDS[name]


def register(kind: HopKind) -> HopKind:
    """Declare a new kind (the engine must pair it with a Source and a Sink)."""
    if kind.name in KINDS and KINDS[kind.name] != kind:
        raise ValueError(f"hop kind {kind.name!r} is declared already")
    if kind.reads not in (LANDING, TABLE, TABLES):
        raise ValueError(
            f"hop kind {kind.name!r} reads {kind.reads!r}: use one of {LANDING}, {TABLE}, {TABLES}"
        )
    KINDS[kind.name] = kind
    return kind
