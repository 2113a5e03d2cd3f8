"""Run a pipeline's hops: run-once streams (``availableNow``) and backfills (always-on streams:
:mod:`spark_jobs.engine.continuous`).

A hop run is its source, the pipeline's transform and its sink (:mod:`spark_jobs.engine.hops`, chosen by the
hop's kind), plus the run record. All three modes call the same transforms (:mod:`spark_jobs.pipelines`); only
the ends differ: ``Source.stream``/``Sink.stream_writer`` with a checkpoint, or ``Source.read``/``Sink.backfill``
over an event-time range.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import contextmanager

from spark_jobs.control import fingerprint as fingerprints
from spark_jobs.control import suites
from spark_jobs.control.rollback import rebuild
from spark_jobs.engine import quality
from spark_jobs.engine.hops import source_and_sink
from spark_jobs.engine.progress import Progress, first_line, stderr_progress, unfenced
from spark_jobs.engine.replay import replay_logged
from spark_jobs.engine.sources import LINES_READ
from spark_jobs.logs import checkpoint_log, delta_log
from spark_jobs.logs.ops import write_record
from spark_jobs.model.errors import CheckpointDamaged, LakehouseError, RunFailed
from spark_jobs.model.lake import Lake
from spark_jobs.model.records import RunRecord, TableChange
from spark_jobs.model.spec import HopSpec
from spark_jobs.model.times import iso
from spark_jobs.pipelines import pipeline_code
from spark_jobs.transforms.lineage import RESCUED


class HopRun:
    """One hop's run: builds the query, tracks versions and progress, writes the record."""

    def __init__(self, spark, lake: Lake, hop: HopSpec, run_id: str, mode: str, progress: Progress = stderr_progress,
                 fence: Callable[[], None] = unfenced, gated: bool = True):
        self.spark = spark
        self._fence = fence
        self.fenced: LakehouseError | None = None
        self.lake = lake
        self.hop = hop
        self.spec = lake.spec.for_hop(hop.name)  # the hop's own event time where it sets one
        self.code = pipeline_code(lake.spec)
        self.code.check(lake.spec)
        self.progress = progress
        self.checkpoint = lake.checkpoint(hop)
        self.record = RunRecord(pipeline=lake.spec.name, hop=hop.name, run_id=run_id, mode=mode)
        self.record.tables = {
            table: TableChange(delta_log.table_version(table), None) for table in lake.tables_of(hop)
        }
        self._seen_batches: set[int] = set()
        self._drop_observations: list = []  # the drop rules' counts of each write (quality.observe_drops)
        self._read_observations: list = []  # a backfill's rows read from its source (:meth:`read`)
        self._fingerprint: fingerprints.Fingerprint | None = None
        self.state_only_batch: int | None = None
        source, sink = source_and_sink(hop)
        self.source, self.sink = source(self), sink(self)
        self.drop_rules = suites.hop_drop_rules(lake.spec, hop, getattr(self.sink, "quarantine", None))
        self._counts: dict | None = None  # the gate's counts of the rows written so far (counting)
        # Their columns, once the first batch's frame said if it can; none for a run without a
        # gate (``--quality=off``; a later ``lakehouse quality`` reads the rows back).
        self._counting: list | None = None if gated else []

    def fence(self) -> None:
        """The pipeline lock's check, which the sinks call before each commit; a refusal is kept,
        since Spark reports an error in a batch function as its own long message."""
        try:
            self._fence()
        except LakehouseError as error:
            self.fenced = error
            raise

    # -- the record -------------------------------------------------------------------------

    def close(self, status: str, error: str | None = None) -> RunRecord:
        record = self.record
        for table, change in record.tables.items():
            change.version_after = delta_log.table_version(table)
        main_table = self.lake.table(self.hop)
        main = record.tables[main_table]
        record.rows_out = delta_log.rows_written(main_table, main.version_before, main.version_after)
        quarantine = self.lake.quarantine(self.hop)
        if quarantine:
            change = record.tables[quarantine]
            record.rows_quarantined = delta_log.rows_written(quarantine, change.version_before, change.version_after)
        if self.hop.ingests:
            record.rows_rescued = delta_log.rows_with_value(main_table, RESCUED, main.version_before, main.version_after)
        if self.hop.changes is not None:
            self.sink.count(record, main, status == "succeeded")
        if record.mode == "backfill":  # a batch read has no streaming progress: its reads were observed
            record.rows_in = _observed_total(self._read_observations, "rows")
        record.counted = self._counts if self._counts and self._counts["batches"] else None
        record.rows_dropped_by_rule = self._dropped_by_rule()
        record.finish(status, error)
        write_record(self.lake, record)
        if status == "succeeded" and self._fingerprint is not None:
            fingerprints.save(self.lake, self.hop, self._fingerprint)  # what the checkpoint goes on with
        return record

    def note_progress(self, query) -> None:
        for progress in query.recentProgress:
            entry = json.loads(progress.json)
            batch_id = entry["batchId"]
            # An idle progress (no batch ran: nothing new) names the next batch id but has no addBatch.
            if batch_id in self._seen_batches or "addBatch" not in entry.get("durationMs", {}):
                continue
            self._seen_batches.add(batch_id)
            # A source that reads whole files counts its rows itself (numInputRows would be files).
            lines = entry.get("observedMetrics", {}).get(LINES_READ)
            rows = int(lines["rows"] if lines else entry.get("numInputRows") or 0)
            rate = float(entry.get("processedRowsPerSecond") or 0.0)
            dropped = sum(int(op.get("numRowsDroppedByWatermark") or 0) for op in entry.get("stateOperators", []))
            self.record.batch_ids.append(batch_id)
            self.record.rows_in += rows
            self.record.rows_dropped_late += dropped
            self.record.progress.append(
                {
                    "batch_id": batch_id,
                    "timestamp": entry.get("timestamp"),
                    "rows": rows,
                    "rows_per_second": round(rate, 1),
                    "duration_ms": entry.get("durationMs", {}),
                    "watermark": entry.get("eventTime", {}).get("watermark"),
                    "rows_dropped_late": dropped,
                    "sources": [
                        {"start": source.get("startOffset"), "end": source.get("endOffset")}
                        for source in entry.get("sources", [])
                    ],
                }
            )
            late = f", {dropped} late rows dropped" if dropped else ""
            self.progress(f"[{self.hop.name}] batch {batch_id}: {rows:,} rows ({rate:,.0f} rows/s){late}")

    # -- streams ----------------------------------------------------------------------------

    def start_stream(self, trigger: dict, max_files_per_trigger: int | None = None):
        """Start the hop's streaming query with ``trigger`` (kwargs of ``DataStreamWriter.trigger``)."""
        query_id = checkpoint_log.ensure_query_id(self.checkpoint)
        self.record.query_id = query_id
        # Read when the query starts; they bound how far back a rollback can reach.
        self.spark.conf.set("spark.sql.streaming.minBatchesToRetain", str(self.spec.min_batches_to_retain))
        self.spark.conf.set("spark.sql.streaming.fileSource.log.compactInterval", str(self.spec.source_log_compact_interval))
        # State snapshots and clean-up run every maintenanceInterval (1 min): a run-once job would never clean.
        self.spark.conf.set("spark.sql.streaming.stateStore.maintenanceInterval", "1s")
        frame = self.streaming_frame(max_files_per_trigger)
        self.check_code(frame)
        self.state_only_batch = rebuild.state_only_batch(self.lake, self.hop, query_id)
        writer = self.sink.stream_writer(frame, query_id)
        name = f"{self.spec.name}.{self.hop.name}"
        return writer.queryName(name).option("checkpointLocation", self.checkpoint).trigger(**trigger).start()

    def each_batch(self, write: Callable) -> Callable:
        """The sink's ``write(batch, batch_id)`` for ``foreachBatch``; for the batch a state
        rebuild planned (:mod:`spark_jobs.control.rollback.rebuild`), the query runs to fill its state
        stores and the sink writes an empty batch (its commits keep the batch's transaction)."""
        def write_batch(batch, batch_id: int) -> None:
            if batch_id != self.state_only_batch:
                return write(batch, batch_id)
            batch.write.format("noop").mode("overwrite").save()
            self.progress(f"[{self.hop.name}] batch {batch_id}: state rebuilt with the new code, no row written")
            return write(batch.sparkSession.createDataFrame([], batch.schema), batch_id)

        return write_batch

    def streaming_frame(self, max_files_per_trigger: int | None = None):
        """The hop's transform over its streaming source (no query started)."""
        inputs = self.code.static_inputs(self.spark, self.lake, self.hop)
        return self.code.transform(self.hop, self.source.stream(max_files_per_trigger), self.spec, inputs)

    def check_code(self, frame) -> None:
        """Refuse a query its checkpoint's state cannot follow; say so when the query changed
        compatibly; the fingerprint goes into the run record."""
        from spark_jobs.engine.code_updates import code_update

        change, new = code_update(self.lake, self.hop, frame, self.code.code_hash(self.spec))
        if change == "compatible":
            self.progress(fingerprints.note(self.hop))
        self.record.fingerprint = new.to_dict()
        self._fingerprint = new

    def _count_columns(self, frame, keys: tuple[str, ...]) -> list:
        """The gate's counts as aggregate columns (:func:`quality.counted_rules`), decided on the
        first batch's frame; empty when a rule cannot be counted as rows are written."""
        if self._counting is None:
            suite = suites.load_suite(self.spec, self.hop)
            columns = quality.counted_rules(suite, self.code.quality_frame(self.hop, frame), keys)
            self._counting = [] if columns is None else columns
            self._counts = None if columns is None else {"suite": quality.suite_digest(suite), "batches": 0}
        return self._counting if self._counts is not None else []

    def counting(self, frame):
        """``(frame, observation)``: the rows a batch writes, counted by the hop's suite as they are
        written (``DataFrame.observe``: no job of its own, and the gate then reads nothing back)
        when every rule can be counted so; else ``(frame, None)``. After the write,
        :meth:`counted` takes the counts."""
        columns = self._count_columns(frame, ())
        if not columns:
            return frame, None
        from pyspark.sql import Observation

        observation = Observation()
        checked = self.code.quality_frame(self.hop, frame).observe(observation, *columns)
        return checked.select(*frame.columns), observation

    def _dropped_by_rule(self) -> dict[str, int]:
        """What the ``drop`` rules took out, by rule, summed over the writes that happened (a
        write Delta skipped, a batch committed before, counted nothing)."""
        totals = {suites.rule_name(rule): 0 for rule in self.drop_rules}
        for observation in _completed(self._drop_observations):
            for name, count in observation.get.items():
                totals[name] = totals.get(name, 0) + int(count or 0)
        return totals

    def counted(self, observation) -> None:
        """Add what ``observation`` counted as its batch was written. None came when Delta skipped
        the write (a batch committed before): the run's counts are dropped, and the gate reads the
        rows back."""
        if observation is None or self._counts is None:
            return
        if not observation._jo.future().isCompleted():
            self._counts = None
            return
        self._add_counts(observation.get)

    def count_now(self, frame, keys: tuple[str, ...]) -> None:
        """Count the rows a MERGE just wrote (``frame``, its source, cached: one small job over
        the cache; Spark does not observe a MERGE's source). Its table holds each of ``keys``
        once, but a key two batches change would be counted twice: counts hold for a run of one
        batch only. A MERGE that Delta skipped leaves the counts apart from the table's, so the
        gate reads the rows back."""
        columns = self._count_columns(frame, keys)
        if not columns:
            return
        if self._counts["batches"]:
            self._counts = None
            return
        began = time.time()
        totals = self.code.quality_frame(self.hop, frame).agg(*columns).first().asDict()
        self._add_counts(dict(totals, seconds=round(time.time() - began, 3)))  # the gate's time, spent here

    def _add_counts(self, totals: dict) -> None:
        for name, value in totals.items():
            self._counts[name] = value if self._counts.get(name) is None else self._counts[name] + (value or 0)
        self._counts["batches"] += 1

    def drop_failing(self, kept, quarantined, keep: tuple[str, ...]):
        """Apply the suite's ``drop`` rules: failing rows join the quarantine rows, with the rule."""
        if not self.drop_rules:
            return kept, quarantined
        kept, dropped = quality.split_by_rules(kept, self.drop_rules)
        dropped = quality.as_quarantine_rows(dropped, kept.columns, keep)
        return kept, dropped if quarantined is None else quarantined.unionByName(dropped)

    def counting_drops(self, quarantine_rows):
        """``quarantine_rows`` as the quarantine's write takes them, the drop rules' rows counted
        as that write runs (:func:`~spark_jobs.engine.quality.observe_drops`; what a run's record
        says it dropped by rule)."""
        if not self.drop_rules:
            return quarantine_rows
        quarantine_rows, observation = quality.observe_drops(quarantine_rows, self.drop_rules)
        self._drop_observations.append(observation)
        return quarantine_rows

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

        return {name: observed(frame) for name, frame in frames.items()} if isinstance(frames, dict) else observed(frames)

    def transformed_range(self, start_ms: int, end_ms: int, inputs: dict, version: int | None = None):
        """The hop's transform over its source's rows in ``[start_ms, end_ms)`` (batch mode), of
        the source now or as of an upstream table ``version``."""
        return self.code.transform(self.hop, self.read(start_ms, end_ms, version), self.spec, inputs)

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
            if self.fenced is not None:
                self.close("failed", str(self.fenced))
                raise self.fenced from error
            self.close("failed", first_line(error))
            raise RunFailed(
                f"{self.hop.name} {action} failed: {first_line(error)} (run record in {self.lake.runs})"
            ) from error

    def _skip_missing_upstream(self) -> RunRecord:
        self.progress(f"[{self.hop.name}] nothing to do: upstream table {self.source.missing()} does not exist yet")
        return self.close("skipped")

    def refuse_damaged_checkpoint(self) -> None:
        """Spark would fail, skip or redo data on a damaged checkpoint: stop with the diagnosis.
        First what a stopped run left is mended: a checkpoint a state rebuild was swapping in is
        swapped in, the files of a log write killed half-way are removed."""
        from spark_jobs.control.validate import validate_hop

        checkpoint_log.finish_restart(self.checkpoint)
        for leftover in checkpoint_log.drop_leftovers(self.checkpoint):
            self.progress(f"[{self.hop.name}] removed {leftover}: an interrupted write's")
        findings = validate_hop(self.lake, self.hop)
        if findings:
            first = findings[0]
            more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
            raise CheckpointDamaged(
                f"checkpoint of {self.hop.name} is damaged: {first.path}: {first.problem}{more}; fix: {first.fix}; "
                f"see `lakehouse checkpoint validate {self.spec.name}`"
            )

    def replay_logged(self) -> None:
        """The batches a rollback kept, run again as logged (:func:`spark_jobs.engine.replay.replay_logged`)."""
        replay_logged(self)

    def run_once(self, max_files_per_trigger: int | None = None) -> RunRecord:
        """Process everything new since the last run (``availableNow``), then stop."""
        if self.upstream_missing():
            return self._skip_missing_upstream()
        self.progress(f"[{self.hop.name}] run-once from {self.checkpoint}")
        with self._failures_recorded("run"):
            self.refuse_damaged_checkpoint()
            self.replay_logged()
            query = self.start_stream({"availableNow": True}, max_files_per_trigger)
            while not query.awaitTermination(1):
                self.note_progress(query)
            self.note_progress(query)
            if query.exception() is not None:
                raise RunFailed(f"{self.hop.name} failed: {first_line(query.exception())}")
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
            self.sink.backfill(start_ms, end_ms, self.code.static_inputs(self.spark, self.lake, self.hop))
        self.close("succeeded")
        elapsed = max(time.time() - began, 1e-6)
        self.progress(
            f"[{self.hop.name}] backfill {record.range_start} .. {record.range_end}: "
            f"{record.rows_out:,} rows written ({record.rows_out / elapsed:,.0f} rows/s)"
            + (f", {record.rows_quarantined:,} quarantined" if self.lake.quarantine(self.hop) else "")
        )
        return record


def _completed(observations: list) -> list:
    """The observations whose frame ran (asking one that never ran for its metrics would wait forever)."""
    return [observation for observation in observations if observation._jo.future().isCompleted()]


def _observed_total(observations: list, name: str) -> int:
    """The sum of metric ``name`` over the observations whose frame ran. A metrics row without a
    schema is a frame Spark found empty before running it (its plan pruned to no relation)."""
    total = 0
    for observation in _completed(observations):
        if observation._jo.getRow().schema() is not None:
            total += int(observation.get.get(name) or 0)
    return total

