"""The contracts between a hop run and what it runs: the :class:`HopContext` a Source or a Sink
is made with, the :class:`Source` protocol and the :class:`Sink` base class.

The runner (:class:`~spark_jobs.engine.runner.HopRun`) knows a hop only through
these: it has no branch on a hop's kind. What differs by kind sits in the kind's
Sink (:mod:`spark_jobs.engine.sinks`) and the Source of what the hop reads
(:mod:`spark_jobs.engine.sources`); :mod:`spark_jobs.engine.hops` pairs each kind with them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeAlias

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamWriter

    from spark_jobs.control.hop_state import HopState
    from spark_jobs.engine.run_counts import DropRules, GateCounts
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.records import RunRecord, TableChange
    from spark_jobs.model.spec import HopSpec, PipelineSpec
    from spark_jobs.pipelines import PipelineCode

# What a Source reads: one frame, or one per upstream (a join's).
Frames: TypeAlias = "DataFrame | dict[str, DataFrame]"


class HopContext(Protocol):
    """What a Source or a Sink may use of the hop run it serves."""

    spark: SparkSession
    lake: Lake
    spec: PipelineSpec  # the pipeline's spec, with the hop's own event time where it sets one
    hop: HopSpec
    state: HopState  # the hop in its lake: its paths and checkpoint's batch ids
    code: PipelineCode  # the pipeline's own module
    checkpoint: str
    source: Source
    gate: GateCounts  # the quality gate's counts, taken as rows are written
    drops: DropRules  # the suite's ``drop`` rules

    def fence(self) -> None:
        """The pipeline lock's check: called before each Delta commit."""

    def each_batch(
        self, write: Callable[[DataFrame, int], None]
    ) -> Callable[[DataFrame, int], None]:
        """``write`` for ``foreachBatch``, with the state-rebuild batch handled."""

    def read(self, start_ms: int, end_ms: int, version: int | None = None) -> Frames:
        """The source's rows in ``[start_ms, end_ms)`` (batch mode), counted as read."""

    def transformed_range(
        self, start_ms: int, end_ms: int, inputs: dict, version: int | None = None
    ) -> DataFrame:
        """The hop's transform over :meth:`read`."""


class Source(Protocol):
    """Where a hop's rows come from."""

    def __init__(self, run: HopContext) -> None: ...

    def stream(self, max_files_per_trigger: int | None = None) -> Frames:
        """The streaming read (no query started)."""

    def read(self, start_ms: int, end_ms: int, version: int | None = None) -> Frames:
        """The batch read of an event-time range."""

    def missing(self) -> str | None:
        """What is not there yet to read (an upstream table not yet written), or None."""


class IngestSource(Source, Protocol):
    """An ingest hop's Source also says which quarantine rows a backfill's read rebuilds."""

    def read_scope(self, lines: DataFrame) -> str | None: ...


class Sink:
    """How a hop writes: a streaming batch write, idempotent per batch id, and the overwrite of a
    range. One subclass per kind; each calls ``run.fence()`` before its first Delta commit."""

    quarantine: str | None = None  # the hop's quarantine table, for a sink that writes one

    def __init__(self, run: HopContext) -> None:
        self.run = run
        self.table = run.lake.table(run.hop)

    def stream_writer(self, frame: DataFrame, query_id: str) -> DataStreamWriter:
        raise NotImplementedError

    def backfill_range(self, start_ms: int, end_ms: int) -> tuple[int, int]:
        """The range a backfill of ``[start_ms, end_ms)`` writes (a sink may widen it)."""
        return start_ms, end_ms

    def backfill(self, start_ms: int, end_ms: int, inputs: dict) -> None:
        raise NotImplementedError

    def finish_record(self, record: RunRecord, main: TableChange, succeeded: bool) -> None:
        """Add what only this kind counts to the run's ``record`` (``main``: the table's change)."""
