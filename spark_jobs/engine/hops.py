"""Each hop kind's Source and Sink, and the contract between them and the hop run.

A **Source** (:mod:`spark_jobs.engine.sources`) is where a hop's rows come from; there is one
per thing a hop reads (:data:`SOURCES`: landing files, a Kafka topic, one upstream table, several). A
**Sink** (:mod:`spark_jobs.engine.sinks`) is how a hop writes: ``stream_writer()``, the
streaming batch write (idempotent per batch id), and ``backfill()``, the overwrite of a range;
:data:`SINKS` names each kind's. The kinds themselves, and what each can do, are declared in
:mod:`spark_jobs.model.kinds`; a new kind is its descriptor there and its Sink here
(:func:`register_sink`), plus a Source if it reads something new.

Both are made with the :class:`HopContext` they serve (``run``, the
:class:`~spark_jobs.engine.runner.HopRun`): what they may use of it is what the Protocol lists.
Every sink calls ``run.fence()`` before its first Delta commit of a batch or a backfill: on an S3
lake a job whose lease expired or was taken over stops there (:mod:`spark_jobs.control.coordination.lock`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from spark_jobs.engine.sinks.append import AppendSink
from spark_jobs.engine.sinks.changes import ChangesSink
from spark_jobs.engine.sinks.ingest import IngestSink
from spark_jobs.engine.sinks.merge import MergeSink
from spark_jobs.engine.sources import KafkaTopic, LandingFiles, UpstreamTable, UpstreamTables
from spark_jobs.model import kinds


class HopContext(Protocol):
    """What a Source or a Sink may use of the hop run it serves."""

    spark: Any  # the SparkSession
    lake: Any  # spark_jobs.model.lake.Lake
    spec: Any  # the pipeline's spec
    hop: Any  # the hop's spec (spark_jobs.model.spec.HopSpec)
    code: Any  # the pipeline's module (spark_jobs.pipelines.PipelineCode)
    checkpoint: str
    source: Source
    drop_rules: list

    def fence(self) -> None: ...
    def each_batch(self, write: Callable) -> Callable: ...
    def read(self, start_ms: int, end_ms: int, version: int | None = None) -> Any: ...
    def transformed_range(self, start_ms: int, end_ms: int, inputs: dict, version: int | None = None) -> Any: ...
    def drop_failing(self, kept: Any, quarantined: Any, keep: tuple[str, ...]) -> tuple: ...
    def counting(self, frame: Any) -> tuple: ...
    def counted(self, counts: Any) -> None: ...
    def count_now(self, frame: Any, keys: tuple) -> None: ...


class Source(Protocol):
    """Where a hop's rows come from."""

    def __init__(self, run: HopContext) -> None: ...
    def stream(self, max_files_per_trigger: int | None = None) -> Any: ...
    def read(self, start_ms: int, end_ms: int, version: int | None = None) -> Any: ...
    def missing(self) -> str | None: ...


class IngestSource(Source, Protocol):
    """An ingest hop's Source also says which quarantine rows a backfill's read rebuilds."""

    def read_scope(self, lines: Any) -> str | None: ...


class Sink(Protocol):
    """How a hop writes: a streaming batch write, idempotent per batch id, and a range's overwrite."""

    def __init__(self, run: HopContext) -> None: ...
    def stream_writer(self, frame: Any, query_id: str) -> Any: ...
    def backfill_range(self, start_ms: int, end_ms: int) -> tuple[int, int]: ...
    def backfill(self, start_ms: int, end_ms: int, inputs: dict) -> None: ...


SOURCES = {kinds.LANDING: LandingFiles, kinds.TOPIC: KafkaTopic, kinds.TABLE: UpstreamTable,
           kinds.TABLES: UpstreamTables}


SINKS = {"ingest": IngestSink, "append": AppendSink, "aggregate": MergeSink, "join": AppendSink,
         "changes": ChangesSink}


def register_sink(kind: str, sink: type) -> None:
    """Pair the declared hop kind ``kind`` (:func:`spark_jobs.model.kinds.register`) with its Sink."""
    if kind not in kinds.KINDS:
        raise ValueError(f"hop kind {kind!r} is not declared: register its HopKind first")
    SINKS[kind] = sink


def source_and_sink(hop) -> tuple[type, type]:
    """The Source and the Sink classes of ``hop``'s kind."""
    return SOURCES[hop.reads], SINKS[hop.kind]
