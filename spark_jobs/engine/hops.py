"""Each hop kind's Source and Sink, and the contract between them and the hop run.

A **Source** (:mod:`spark_jobs.engine.sources`) is where a hop's rows come from; there is one
per thing a hop reads (:data:`SOURCES`: landing files, a Kafka topic, one upstream table,
several). A **Sink** (:mod:`spark_jobs.engine.sinks`) is how a hop writes: ``stream_writer()``,
the streaming batch write (idempotent per batch id), and ``backfill()``, the overwrite of
a range; :data:`SINKS` names each kind's. The kinds themselves, and what each can do, are
declared in :mod:`spark_jobs.model.kinds`; a new kind is its descriptor there and its Sink here
(:func:`register_sink`), plus a Source if it reads something new.

Both are made with the :class:`~spark_jobs.engine.contracts.HopContext` they serve (``run``, the
:class:`~spark_jobs.engine.runner.HopRun`): what they may use of it is what that Protocol lists; the
Source protocol and the Sink base class are in :mod:`spark_jobs.engine.contracts`. Every sink calls
``run.fence()`` before its first Delta commit of a batch or a backfill: on an S3 lake a job whose
lease expired or was taken over stops there (:mod:`spark_jobs.control.coordination.lock`).
"""

from __future__ import annotations

from spark_jobs.engine.contracts import HopContext, IngestSource, Sink, Source
from spark_jobs.engine.sinks.append import AppendSink
from spark_jobs.engine.sinks.changes import ChangesSink
from spark_jobs.engine.sinks.ingest import IngestSink
from spark_jobs.engine.sinks.merge import MergeSink
from spark_jobs.engine.sinks.summary import SummarySink
from spark_jobs.engine.sources import KafkaTopic, LandingFiles, UpstreamTable, UpstreamTables
from spark_jobs.model import kinds

__all__ = [
    "SINKS",
    "SOURCES",
    "HopContext",
    "IngestSource",
    "Sink",
    "Source",
    "register_sink",
    "source_and_sink",
]


SOURCES = {
    kinds.LANDING: LandingFiles,
    kinds.TOPIC: KafkaTopic,
    kinds.TABLE: UpstreamTable,
    kinds.TABLES: UpstreamTables,
}


SINKS = {
    "ingest": IngestSink,
    "append": AppendSink,
    "aggregate": MergeSink,
    "join": AppendSink,
    "changes": ChangesSink,
    "summary": SummarySink,
}


def register_sink(kind: str, sink: type) -> None:
    """Pair the declared hop kind ``kind`` (:func:`spark_jobs.model.kinds.register`)
    with its Sink.
    """
    if kind not in kinds.KINDS:
        raise ValueError(f"hop kind {kind!r} is not declared: register its HopKind first")
    if not (isinstance(sink, type) and issubclass(sink, Sink)):
        raise TypeError(
            f"the sink of hop kind {kind!r} must subclass spark_jobs.engine.contracts.Sink"
        )
    SINKS[kind] = sink


def source_and_sink(hop) -> tuple[type, type]:
    """The Source and the Sink classes of ``hop``'s kind."""
    return SOURCES[hop.reads], SINKS[hop.kind]
