"""Run a pipeline's hops: run-once streams (``availableNow``), exact replays of the batches a
rollback kept, and backfills (always-on streams: :mod:`spark_jobs.engine.continuous`).

A hop run is its source, the pipeline's transform and its sink (:mod:`spark_jobs.engine.hops`,
chosen by the hop's kind, through the contracts of :mod:`spark_jobs.engine.contracts`), plus the
run record. All modes call the same transforms (:mod:`spark_jobs.pipelines`); only the ends
differ: ``Source.stream``/``Sink.stream_writer`` with a checkpoint, or
``Source.read``/``Sink.backfill`` over an event-time range. :class:`HopRun` keeps the order of a
run; the counting (:mod:`spark_jobs.engine.run_counts`), the progress
(:mod:`spark_jobs.engine.stream_progress`), the checkpoint checks
(:func:`spark_jobs.control.validate.refuse_damaged`) and everything kind-specific (the Sink)
live elsewhere.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager

from spark_jobs.control import fingerprint as fingerprints
from spark_jobs.control.hop_state import HopState
from spark_jobs.control.rollback import rebuild, replays
from spark_jobs.engine.hops import source_and_sink
from spark_jobs.engine.progress import Progress, first_line, stderr_progress, unfenced
from spark_jobs.engine.run_counts import DropRules, GateCounts, observed_total
from spark_jobs.engine.stream_progress import StreamProgress
from spark_jobs.logs import checkpoint_log, delta_log
from spark_jobs.logs.ops import write_record
from spark_jobs.model.errors import LakehouseError, RunFailed
from spark_jobs.model.lake import Lake
from spark_jobs.model.records import RunRecord, TableChange
from spark_jobs.model.spec import HopSpec
from spark_jobs.model.times import iso
from spark_jobs.pipelines import pipeline_code


class HopRun:
    """One hop's run: builds the query, tracks versions and progress, writes the record."""

    def __init__(
        self,
        spark,
        lake: Lake,
        hop: HopSpec,
        run_id: str,
        mode: str,
        progress: Progress = stderr_progress,
        fence: Callable[[], None] = unfenced,
        gated: bool = True,
    ):
        self.spark = spark
        self._fence = fence
        # A refusal raised inside a batch (the lock's fence, a check of the batch's rows): Spark
        # reports it as a long message of its own, so the run raises it as it was.
        self.refused: LakehouseError | None = None
        self.state = state = HopState(lake, hop)
        self.lake, self.hop, self.spec, self.checkpoint = lake, hop, state.spec, state.checkpoint
        self.code = pipeline_code(lake.spec)
        self.code.check(lake.spec)
        self.progress = progress
        self.record = RunRecord(pipeline=lake.spec.name, hop=hop.name, run_id=run_id, mode=mode)
        self.record.tables = {
            table: TableChange(delta_log.table_version(table), None) for table in state.tables
        }
        self.stream_progress = StreamProgress(self.record, hop.name, progress)
        self._read_observations: list = []  # a backfill's rows read from its source (:meth:`read`)
        self._fingerprint: fingerprints.Fingerprint | None = None
        self.state_only_batch: int | None = None
        source, sink = source_and_sink(hop)
        self.source, self.sink = source(self), sink(self)
        self.gate = GateCounts(self.spec, hop, self.code, gated)
        self.drops = DropRules(lake.spec, hop, self.sink.quarantine)

    def fence(self) -> None:
        """The pipeline lock's check, which the sinks call before each commit (inside a batch, a
        refusal is kept by :meth:`each_batch`)."""
        self._fence()

    # -- the record -------------------------------------------------------------------------

    def close(self, status: str, error: str | None = None) -> RunRecord:
        record = self.record
        for table, change in record.tables.items():
            change.version_after = delta_log.table_version(table)
        main = record.tables[self.state.table]
        record.rows_out = delta_log.rows_written(
            self.state.table, main.version_before, main.version_after
        )
        if self.state.quarantine:
            change = record.tables[self.state.quarantine]
            record.rows_quarantined = delta_log.rows_written(
                self.state.quarantine, change.version_before, change.version_after
            )
        self.sink.finish_record(record, main, status == "succeeded")
        # a batch read has no streaming progress: its reads were observed
        if record.mode == "backfill":
            record.rows_in = observed_total(self._read_observations, "rows")
        record.counted = self.gate.totals
        record.rows_dropped_by_rule = self.drops.by_rule()
        record.finish(status, error)
        write_record(self.lake, record)
        if status == "succeeded" and self._fingerprint is not None:
            # what the checkpoint goes on with
            fingerprints.save(self.state, self._fingerprint)
        return record

    def note_progress(self, query) -> None:
        """What the query's batches did since the last call, into the record."""
        self.stream_progress.note(query)

    # -- streams ----------------------------------------------------------------------------

    def start_stream(self, trigger: dict, max_files_per_trigger: int | None = None):
        """Start the hop's streaming query with ``trigger`` (kwargs of
        ``DataStreamWriter.trigger``).
        """
        query_id = checkpoint_log.ensure_query_id(self.checkpoint)
        self.record.query_id = query_id
        # Read when the query starts; they bound how far back a rollback can reach.
        self.spark.conf.set(
            "spark.sql.streaming.minBatchesToRetain", str(self.spec.min_batches_to_retain)
        )
        self.spark.conf.set(
            "spark.sql.streaming.fileSource.log.compactInterval",
            str(self.spec.source_log_compact_interval),
        )
        # State snapshots and clean-up run every maintenanceInterval (1 min): a run-once job
        # would never clean.
        self.spark.conf.set("spark.sql.streaming.stateStore.maintenanceInterval", "1s")
        frame = self.streaming_frame(max_files_per_trigger)
        self.check_code(frame)
        self.state_only_batch = rebuild.state_only_batch(self.state, query_id)
        writer = self.sink.stream_writer(frame, query_id)
        name = f"{self.spec.name}.{self.hop.name}"
        return (
            writer.queryName(name)
            .option("checkpointLocation", self.checkpoint)
            .trigger(**trigger)
            .start()
        )

    def each_batch(self, write: Callable) -> Callable:
        """The sink's ``write(batch, batch_id)`` for ``foreachBatch``; for the batch a state
        rebuild planned (:mod:`spark_jobs.control.rollback.rebuild`), the query runs to
        fill its state stores and the sink writes an empty batch (its commits keep the
        batch's transaction)."""

        def write_batch(batch, batch_id: int) -> None:
            try:
                if batch_id != self.state_only_batch:
                    return write(batch, batch_id)
                batch.write.format("noop").mode("overwrite").save()
                self.progress(
                    f"[{self.hop.name}] batch {batch_id}: state rebuilt with the "
                    "new code, no row written"
                )
                return write(batch.sparkSession.createDataFrame([], batch.schema), batch_id)
            except LakehouseError as error:
                self.refused = error
                raise

        return write_batch

    def streaming_frame(self, max_files_per_trigger: int | None = None):
        """The hop's transform over its streaming source (no query started)."""
        inputs = self.code.static_inputs(self.spark, self.lake, self.hop)
        return self.code.transform(
            self.hop, self.source.stream(max_files_per_trigger), self.spec, inputs
        )

    def check_code(self, frame) -> None:
        """Refuse a query its checkpoint's state cannot follow; say so when the query changed
        compatibly; the fingerprint goes into the run record."""
        from spark_jobs.engine.code_updates import code_update

        change, new = code_update(self.state, frame, self.code.code_hash(self.spec))
        if change == "compatible":
            self.progress(fingerprints.note(self.hop))
        self.record.fingerprint = new.to_dict()
        self._fingerprint = new

    def read(self, start_ms: int, end_ms: int, version: int | None = None):
        """The source's rows in ``[start_ms, end_ms)`` (batch mode). A backfill counts them as
        they are read, as a stream's progress counts its input ("rows in": before any filter,
        de-duplication or aggregation), with no job of its own."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        frames = self.source.read(start_ms, end_ms, version)
        if self.record.mode != "backfill":
            return frames

        def observed(frame):
            observation = Observation()
            self._read_observations.append(observation)
            return frame.observe(observation, F.count(F.lit(1)).alias("rows"))

        return (
            {name: observed(frame) for name, frame in frames.items()}
            if isinstance(frames, dict)
            else observed(frames)
        )

    def transformed_range(
        self, start_ms: int, end_ms: int, inputs: dict, version: int | None = None
    ):
        """The hop's transform over its source's rows in ``[start_ms, end_ms)`` (batch mode), of
        the source now or as of an upstream table ``version``."""
        return self.code.transform(
            self.hop, self.read(start_ms, end_ms, version), self.spec, inputs
        )

    def upstream_missing(self) -> bool:
        return self.source.missing() is not None

    @contextmanager
    def _failures_recorded(self, action: str):
        """Close the record as failed on any error; a Spark error surfaces as one line."""
        try:
            yield
        except LakehouseError as error:
            self.close("failed", str(error))
            raise
        except Exception as error:
            if self.refused is not None:
                self.close("failed", str(self.refused))
                raise self.refused from error
            self.close("failed", first_line(error))
            raise RunFailed(
                f"{self.hop.name} {action} failed: {first_line(error)} (run record "
                f"in {self.lake.runs})"
            ) from error

    def _skip_missing_upstream(self) -> RunRecord:
        self.progress(
            f"[{self.hop.name}] nothing to do: upstream table "
            f"{self.source.missing()} does not exist yet"
        )
        return self.close("skipped")

    def refuse_damaged_checkpoint(self) -> None:
        """Stop with the diagnosis on a checkpoint Spark would fail, skip or redo data on
        (:func:`spark_jobs.control.validate.refuse_damaged`)."""
        from spark_jobs.control.validate import refuse_damaged

        refuse_damaged(self.state, self.progress)

    def replay_logged(self) -> None:
        """Run again, in order, the batches a rollback undid and kept
        (:mod:`spark_jobs.control.rollback.replays`), put back one at a time and run with
        ``Trigger.Once``, which runs a logged, uncommitted batch with its logged source range and
        watermark and stops right after it; then mark them replayed. None kept: nothing to do."""
        logged = replays.to_replay(self.state, self.progress)
        upstream_commits: dict = {}
        for batch_id, text in logged:
            replays.put_back(self.state, batch_id, text, upstream_commits)
            self.progress(f"[{self.hop.name}] batch {batch_id} again, as it was logged")
            query = self.start_stream({"once": True})
            self._await(query, f"{self.hop.name} failed replaying batch {batch_id}")
        if logged:
            replays.done(self.state)

    def _await(self, query, failed: str) -> None:
        """Wait for ``query`` to stop, noting its progress; :class:`RunFailed` if it failed."""
        while not query.awaitTermination(1):
            self.note_progress(query)
        self.note_progress(query)
        if query.exception() is not None:
            raise RunFailed(f"{failed}: {first_line(query.exception())}")

    def run_once(self, max_files_per_trigger: int | None = None) -> RunRecord:
        """Process everything new since the last run (``availableNow``), then stop."""
        if self.upstream_missing():
            return self._skip_missing_upstream()
        self.progress(f"[{self.hop.name}] run-once from {self.checkpoint}")
        with self._failures_recorded("run"):
            self.refuse_damaged_checkpoint()
            self.replay_logged()
            query = self.start_stream({"availableNow": True}, max_files_per_trigger)
            self._await(query, f"{self.hop.name} failed")
        if not self.record.batch_ids:
            self.progress(f"[{self.hop.name}] no new data")
        return self.close("succeeded")

    # -- backfill ---------------------------------------------------------------------------

    def backfill(self, start_ms: int, end_ms: int) -> RunRecord:
        """Recompute ``[start_ms, end_ms)`` in batch mode with the same transforms.

        Writes overwrite exactly that range (``replaceWhere``), so a backfill is idempotent;
        the streaming checkpoint is never read or written.
        """
        record = self.record
        record.range_start, record.range_end = iso(start_ms), iso(end_ms)
        if self.upstream_missing():
            return self._skip_missing_upstream()
        began = time.time()
        start_ms, end_ms = self.sink.backfill_range(start_ms, end_ms)
        record.range_start, record.range_end = iso(start_ms), iso(end_ms)
        with self._failures_recorded("backfill"):
            self.sink.backfill(
                start_ms, end_ms, self.code.static_inputs(self.spark, self.lake, self.hop)
            )
        self.close("succeeded")
        elapsed = max(time.time() - began, 1e-6)
        self.progress(
            f"[{self.hop.name}] backfill {record.range_start} .. {record.range_end}: "
            f"{record.rows_out:,} rows written ({record.rows_out / elapsed:,.0f} rows/s)"
            + (f", {record.rows_quarantined:,} quarantined" if self.state.quarantine else "")
        )
        return record
