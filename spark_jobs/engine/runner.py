"""Run a pipeline's hops: run-once streams (``availableNow``), always-on streams and backfills.

All three call the same transforms (:mod:`spark_jobs.pipelines`); only the first and last
lines differ: ``readStream``/``writeStream`` with a checkpoint, or ``read``/``write`` with
``replaceWhere`` over an event-time range.
"""

from __future__ import annotations

import datetime as dt
import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager

from spark_jobs.control import suites
from spark_jobs.engine import quality
from spark_jobs.logs import checkpoint_log, delta_log
from spark_jobs.logs.fs import filesystem
from spark_jobs.logs.ops import write_record
from spark_jobs.model.errors import CheckpointDamaged, LakehouseError, RunFailed
from spark_jobs.model.lake import Lake
from spark_jobs.model.records import RunRecord, TableChange
from spark_jobs.model.spec import HopSpec
from spark_jobs.model.times import duration_ms, iso
from spark_jobs.pipelines import pipeline_code

Progress = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _table_exists(table: str) -> bool:
    return delta_log.table_version(table) is not None


def _landing_lines(spark, lake: Lake, streaming: bool, max_files_per_trigger: int | None = None):
    from pyspark.sql import functions as F

    filesystem(lake.landing).makedirs(lake.landing, exist_ok=True)
    reader = spark.readStream if streaming else spark.read
    if streaming and max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", int(max_files_per_trigger))
    lines = reader.format("text").load(lake.landing)
    return lines.select("value", F.col("_metadata.file_path").alias("_source_file"))


class HopRun:
    """One hop's run: builds the query, tracks versions and progress, writes the record."""

    def __init__(self, spark, lake: Lake, hop: HopSpec, run_id: str, mode: str, progress: Progress = _stderr):
        self.spark = spark
        self.lake = lake
        self.hop = hop
        self.spec = lake.spec
        self.code = pipeline_code(lake.spec.name)
        self.progress = progress
        self.checkpoint = lake.checkpoint(hop)
        self.record = RunRecord(pipeline=lake.spec.name, hop=hop.name, run_id=run_id, mode=mode)
        self.record.tables = {
            table: TableChange(delta_log.table_version(table), None) for table in lake.tables_of(hop)
        }
        self._seen_batches: set[int] = set()
        self.drop_rules = _drop_rules(lake, hop)

    # -- the record -------------------------------------------------------------------------

    def _close(self, status: str, error: str | None = None) -> RunRecord:
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
            if record.mode == "backfill":  # a batch read has no streaming progress to count lines
                record.rows_in = record.rows_out + record.rows_quarantined
        record.finish(status, error)
        write_record(self.lake, record)
        return record

    def _note_progress(self, query) -> None:
        for progress in query.recentProgress:
            entry = json.loads(progress.json)
            batch_id = entry["batchId"]
            # An idle progress (no batch ran: nothing new) names the next batch id but has no addBatch.
            if batch_id in self._seen_batches or "addBatch" not in entry.get("durationMs", {}):
                continue
            self._seen_batches.add(batch_id)
            rows = int(entry.get("numInputRows") or 0)
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
        inputs = self.code.static_inputs(self.spark, self.lake, self.hop)
        if self.hop.kind == "ingest":
            source = _landing_lines(self.spark, self.lake, True, max_files_per_trigger)
        else:
            # Streams read appends only: commits that rewrite files (a backfill's replaceWhere,
            # a rollback's RESTORE) are skipped, since those change the tables below by other means.
            reader = self.spark.readStream.format("delta").option("skipChangeCommits", "true")
            if max_files_per_trigger:
                reader = reader.option("maxFilesPerTrigger", int(max_files_per_trigger))
            source = reader.load(self.lake.upstream_table(self.hop))
            if self.spec.hop(self.hop.upstream).kind == "ingest":
                from spark_jobs.transforms.lineage import streamed_rows

                source = streamed_rows(source)
        frame = self.code.transform(self.hop, source, self.spec, inputs)
        writer = {"ingest": self._ingest_writer, "append": self._append_writer, "aggregate": self._merge_writer}[
            self.hop.kind
        ](frame, query_id)
        name = f"{self.spec.name}.{self.hop.name}"
        return writer.queryName(name).option("checkpointLocation", self.checkpoint).trigger(**trigger).start()

    def _ingest_writer(self, parsed, query_id: str):
        from pyspark.sql import functions as F

        from spark_jobs.transforms.lineage import add_lineage

        table, quarantine = self.lake.table(self.hop), self.lake.quarantine(self.hop)
        partition_by = list(self.hop.partition_by)
        backfilled = _has_backfill_writes(table) or _has_backfill_writes(quarantine)

        def write_batch(batch, batch_id: int) -> None:
            batch.persist()
            try:
                ingest_time = F.lit(dt.datetime.now(dt.UTC).replace(tzinfo=None)).cast("timestamp")
                valid, invalid = self.code.split_ingested(batch)
                if backfilled:
                    valid, invalid = self._not_backfilled(batch, valid, invalid)
                valid, invalid = self._drop_failing(valid, invalid, ("_source_file",))
                idempotent = {"txnAppId": query_id, "txnVersion": str(batch_id)}
                add_lineage(valid, batch_id, ingest_time).write.format("delta").mode("append").partitionBy(
                    *partition_by
                ).options(**idempotent).save(table)
                add_lineage(invalid, batch_id, ingest_time).write.format("delta").mode("append").options(
                    **idempotent
                ).save(quarantine)
            finally:
                batch.unpersist()

        return parsed.writeStream.foreachBatch(write_batch)

    def _not_backfilled(self, batch, valid, invalid):
        """Leave out the lines a backfill already wrote from this batch's files.

        A backfill reads every landing file, including ones the stream has not reached yet;
        when the stream reaches them, their lines in the backfilled range are in the tables
        already (with batch id -1). Only those files' backfilled rows are compared, and only
        within the batch's event-time span (Delta skips the other files by their statistics).
        """
        from pyspark.sql import functions as F

        from spark_jobs.transforms.lineage import BACKFILL_BATCH, BATCH_ID, not_yet_written

        time_column = self.hop.time_column
        files = [row[0] for row in batch.select("_source_file").distinct().collect()]
        if not files:
            return valid, invalid
        low, high = valid.agg(F.min(time_column), F.max(time_column)).first()

        def written(table: str):
            rows = self.spark.read.format("delta").load(table) if _table_exists(table) else None
            if rows is None:
                return None
            return rows.where((F.col(BATCH_ID) == BACKFILL_BATCH) & F.col("_source_file").isin(files))

        bronze = written(self.lake.table(self.hop))
        if bronze is not None and low is not None:
            valid = not_yet_written(valid, bronze.where(F.col(time_column).between(low, high)))
        quarantined = written(self.lake.quarantine(self.hop))
        if quarantined is not None:
            invalid = not_yet_written(invalid, quarantined)
        return valid, invalid

    def _drop_failing(self, kept, quarantined, keep: tuple[str, ...]):
        """Apply the suite's ``drop`` rules: failing rows join the quarantine rows, with the rule."""
        if not self.drop_rules:
            return kept, quarantined
        kept, dropped = quality.split_by_rules(kept, self.drop_rules)
        dropped = quality.as_quarantine_rows(dropped, kept.columns, keep)
        return kept, dropped if quarantined is None else quarantined.unionByName(dropped)

    def _append_writer(self, frame, query_id: str):
        if self.lake.quarantine(self.hop) is None:
            return (
                frame.writeStream.format("delta")
                .outputMode("append")
                .partitionBy(*self.hop.partition_by)
                .option("path", self.lake.table(self.hop))
            )
        from spark_jobs.transforms.lineage import add_lineage

        table, quarantine = self.lake.table(self.hop), self.lake.quarantine(self.hop)

        def write_batch(batch, batch_id: int) -> None:
            if self.drop_rules:  # two writes read the batch: compute it once
                batch.persist()
            try:
                kept, dropped = self._drop_failing(batch, None, (self.hop.time_column,))
                idempotent = {"txnAppId": query_id, "txnVersion": str(batch_id)}
                kept.write.format("delta").mode("append").partitionBy(*self.hop.partition_by).options(
                    **idempotent).save(table)
                if dropped is None:  # no drop rule: an empty commit keeps one quarantine version per batch
                    dropped = quality.no_quarantine_rows(batch, (self.hop.time_column,))
                add_lineage(dropped, batch_id).write.format("delta").mode("append").options(**idempotent).save(quarantine)
            finally:
                batch.unpersist()

        return frame.writeStream.foreachBatch(write_batch)

    def _merge_writer(self, frame, query_id: str):
        from delta.tables import DeltaTable

        table = self.lake.table(self.hop)
        DeltaTable.createIfNotExists(self.spark).location(table).addColumns(frame.schema).execute()
        condition = " AND ".join(f"t.{key} = s.{key}" for key in self.hop.keys)
        has_rows = False  # once the table has files, MERGE is right for every later batch of this query

        def merge_batch(batch, batch_id: int) -> None:
            nonlocal has_rows
            batch.persist()  # read three times: empty?, its range, its keys
            if batch.isEmpty():  # a no-data batch that only moved the watermark
                batch.unpersist()
                return
            session = batch.sparkSession
            changed = self._recomputed(batch)
            # Idempotent DML (delta-io/delta#1555): a replayed batch with the same id is skipped.
            session.conf.set("spark.databricks.delta.write.txnAppId", query_id)
            session.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
            try:
                target = DeltaTable.forPath(session, table)
                has_rows = has_rows or target.detail().first()["numFiles"] > 0
                if not has_rows:
                    # An empty table (a first load, or one rolled back to its start) has no row to
                    # match, and a batch has each key once: an append writes what MERGE would,
                    # without MERGE's join against the target.
                    changed.write.format("delta").mode("append").options(
                        txnAppId=query_id, txnVersion=str(batch_id)).save(table)
                    has_rows = True
                    return
                target.alias("t").merge(changed.alias("s"), condition).whenMatchedUpdateAll().whenNotMatchedInsertAll(
                ).execute()
            finally:
                session.conf.unset("spark.databricks.delta.write.txnAppId")
                session.conf.unset("spark.databricks.delta.write.txnVersion")
                batch.unpersist()

        return frame.writeStream.outputMode("update").foreachBatch(merge_batch)

    def _recomputed(self, batch):
        """The keys the stream's batch changed, each aggregated again from the whole upstream table.

        The stream's state holds only what the stream read: rows a backfill wrote upstream, and a
        key a backfill wrote here, are not in it, so its count for such a key would be short.
        Reading the upstream rows of the batch's windows (the range a backfill of them would read)
        makes every key the stream touches equal the aggregate of its upstream, whatever wrote it.
        """
        from pyspark.sql import functions as F

        start_ms = F.unix_millis(F.col(self.hop.time_column))
        low, high = batch.agg(F.min(start_ms), F.max(start_ms)).first()
        fresh = self._upstream_range(low, high + duration_ms(self.spec.window), {})
        return fresh.join(batch.select(*self.hop.keys), on=list(self.hop.keys), how="left_semi")

    def _upstream_range(self, start_ms: int, end_ms: int, inputs: dict):
        """The hop's transform over its upstream table's rows in ``[start_ms, end_ms)`` (batch mode)."""
        upstream = self.spark.read.format("delta").load(self.lake.upstream_table(self.hop))
        upstream_time = self.spec.hop(self.hop.upstream).time_column
        upstream = upstream.where(_range_predicate(upstream, upstream_time, start_ms, end_ms))
        return self.code.transform(self.hop, upstream, self.spec, inputs)

    def _upstream_missing(self) -> bool:
        upstream = self.lake.upstream_table(self.hop)
        return upstream is not None and not _table_exists(upstream)

    @contextmanager
    def _failures_recorded(self, action: str):
        """Close the record as failed on any error; a Spark error surfaces as one line."""
        try:
            yield
        except LakehouseError as error:
            self._close("failed", str(error))
            raise
        except Exception as error:
            self._close("failed", _first_line(error))
            raise RunFailed(
                f"{self.hop.name} {action} failed: {_first_line(error)} (run record in {self.lake.runs})"
            ) from error

    def _skip_missing_upstream(self) -> RunRecord:
        upstream = self.lake.upstream_table(self.hop)
        self.progress(f"[{self.hop.name}] nothing to do: upstream table {upstream} does not exist yet")
        return self._close("skipped")

    def refuse_damaged_checkpoint(self) -> None:
        """Spark would fail, skip or redo data on a damaged checkpoint: stop with the diagnosis."""
        from spark_jobs.control.validate import validate_hop

        findings = validate_hop(self.lake, self.hop)
        if findings:
            first = findings[0]
            more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
            raise CheckpointDamaged(
                f"checkpoint of {self.hop.name} is damaged: {first.path}: {first.problem}{more}; fix: {first.fix}; "
                f"see `lakehouse checkpoint validate {self.spec.name}`"
            )

    def run_once(self, max_files_per_trigger: int | None = None) -> RunRecord:
        """Process everything new since the last run (``availableNow``), then stop."""
        if self._upstream_missing():
            return self._skip_missing_upstream()
        self.progress(f"[{self.hop.name}] run-once from {self.checkpoint}")
        with self._failures_recorded("run"):
            self.refuse_damaged_checkpoint()
            query = self.start_stream({"availableNow": True}, max_files_per_trigger)
            while not query.awaitTermination(1):
                self._note_progress(query)
            self._note_progress(query)
            if query.exception() is not None:
                raise RunFailed(f"{self.hop.name} failed: {_first_line(query.exception())}")
        if not self.record.batch_ids:
            self.progress(f"[{self.hop.name}] no new data")
        return self._close("succeeded")

    # -- backfill ---------------------------------------------------------------------------

    def backfill(self, start_ms: int, end_ms: int) -> RunRecord:
        """Recompute ``[start_ms, end_ms)`` in batch mode with the same transforms.

        Writes overwrite exactly that range (``replaceWhere``), so a backfill is idempotent;
        the streaming checkpoint is never read or written.
        """
        record = self.record
        record.range_start, record.range_end = iso(start_ms), iso(end_ms)
        if self._upstream_missing():
            return self._skip_missing_upstream()
        began = time.time()
        with self._failures_recorded("backfill"):
            inputs = self.code.static_inputs(self.spark, self.lake, self.hop)
            if self.hop.kind == "ingest":
                self._backfill_ingest(start_ms, end_ms)
            else:
                if self.hop.kind == "aggregate":
                    start_ms, end_ms = _widen_to_windows(start_ms, end_ms, self.spec.window)
                    record.range_start, record.range_end = iso(start_ms), iso(end_ms)
                frame = self._upstream_range(start_ms, end_ms, inputs)
                in_range = _range_predicate(frame, self.hop.time_column, start_ms, end_ms)
                frame, dropped = self._drop_failing(frame, None, (self.hop.time_column,))
                writer = frame.write.format("delta").mode("overwrite").option("replaceWhere", in_range)
                if self.hop.partition_by:
                    writer = writer.partitionBy(*self.hop.partition_by)
                writer.save(self.lake.table(self.hop))
                if self.lake.quarantine(self.hop):
                    from spark_jobs.transforms.lineage import BACKFILL_BATCH, add_lineage

                    if dropped is None:
                        dropped = quality.no_quarantine_rows(frame, (self.hop.time_column,))
                    add_lineage(dropped, BACKFILL_BATCH).write.format("delta").mode("overwrite").option(
                        "replaceWhere", in_range).save(self.lake.quarantine(self.hop))
        self._close("succeeded")
        elapsed = max(time.time() - began, 1e-6)
        self.progress(
            f"[{self.hop.name}] backfill {record.range_start} .. {record.range_end}: "
            f"{record.rows_out:,} rows written ({record.rows_out / elapsed:,.0f} rows/s)"
            + (f", {record.rows_quarantined:,} quarantined" if self.lake.quarantine(self.hop) else "")
        )
        return record

    def _backfill_ingest(self, start_ms: int, end_ms: int) -> None:
        """Bronze over the range; the quarantine of every landing file read is rebuilt whole.

        Invalid lines have no trustworthy event time, so they are keyed by source file.
        """
        from spark_jobs.transforms.lineage import BACKFILL_BATCH, add_lineage

        lines = _landing_lines(self.spark, self.lake, streaming=False)
        source_files = sorted({row[0] for row in lines.select("_source_file").distinct().collect()})
        parsed = self.code.transform(self.hop, lines, self.spec, {}).persist()
        try:
            valid, invalid = self.code.split_ingested(parsed)
            # Quality drops of every file read join its quarantine rows, which are rebuilt whole.
            valid, invalid = self._drop_failing(valid, invalid, ("_source_file",))
            in_range = _range_predicate(valid, self.hop.time_column, start_ms, end_ms)
            add_lineage(valid.where(in_range), BACKFILL_BATCH).write.format("delta").mode("overwrite").partitionBy(
                *self.hop.partition_by
            ).option("replaceWhere", in_range).save(self.lake.table(self.hop))
            if source_files:
                quoted = ", ".join("'" + path.replace("'", "''") + "'" for path in source_files)
                add_lineage(invalid, BACKFILL_BATCH).write.format("delta").mode("overwrite").option(
                    "replaceWhere", f"_source_file IN ({quoted})"
                ).save(self.lake.quarantine(self.hop))
        finally:
            parsed.unpersist()


def _drop_rules(lake: Lake, hop: HopSpec) -> list[dict]:
    """The hop's ``drop`` quality rules; a hop that drops rows needs a quarantine table."""
    rules = suites.drop_rules(suites.load_suite(lake.spec, hop))
    if rules and (lake.quarantine(hop) is None or hop.kind == "aggregate"):
        raise LakehouseError(
            f"quality suite {suites.suite_path(lake.spec, hop)} drops rows of {hop.name}, which has no quarantine "
            f"table: give the hop `quarantine: tables/quarantine/<name>` in its spec (ingest and append hops only), "
            "or use warn/fail")
    return rules


def _has_backfill_writes(table: str) -> bool:
    """Whether a backfill (a commit without a stream's ``txn``) ever added rows to ``table``.

    When the log's early JSON commits were cleaned up, assume so.
    """
    from spark_jobs.control.batches import commits

    found = commits(table)
    if found and found[0].version > 0:
        return True
    return any(commit.app_id is None and commit.operation == "WRITE" for commit in found)


def _first_line(error: BaseException | object) -> str:
    text = str(getattr(error, "desc", None) or error).strip()
    return text.splitlines()[0][:500] if text else type(error).__name__


def _widen_to_windows(start_ms: int, end_ms: int, window: str) -> tuple[int, int]:
    """Grow a range to whole windows so a backfill never writes half a window's count."""
    size = duration_ms(window)
    return start_ms - start_ms % size, end_ms + (-end_ms) % size


def _range_predicate(frame, column: str, start_ms: int, end_ms: int) -> str:
    """SQL for ``start <= column < end``: timestamps compare with timestamp literals, other
    time columns (epoch milliseconds) with numbers, as ``frame``'s schema says."""
    if frame.schema[column].dataType.typeName() != "timestamp":
        return f"{column} >= {start_ms} AND {column} < {end_ms}"
    return f"{column} >= timestamp'{iso(start_ms)}' AND {column} < timestamp'{iso(end_ms)}'"


def run_continuous(spark, lake: Lake, hops: tuple[HopSpec, ...], run_id: str, trigger_interval: str,
                   stop: threading.Event | None = None, progress: Progress = _stderr) -> list[RunRecord]:
    """Run the hops as always-on queries with a processing-time trigger until stopped.

    A hop whose upstream table does not exist yet starts once it does. SIGINT/SIGTERM or
    ``stop`` end all queries; each hop's record is written then.
    """
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
    runs = [HopRun(spark, lake, hop, run_id, "continuous", progress) for hop in hops]
    queries: dict[str, object] = {}
    try:
        while not stop.is_set():
            for run in runs:
                if run.hop.name not in queries and not run._upstream_missing():
                    progress(f"[{run.hop.name}] always-on, trigger every {trigger_interval}")
                    run.refuse_damaged_checkpoint()
                    queries[run.hop.name] = run.start_stream({"processingTime": trigger_interval})
            for run in runs:
                query = queries.get(run.hop.name)
                if query is not None:
                    run._note_progress(query)
                    if query.exception() is not None:
                        raise RunFailed(f"{run.hop.name} failed: {_first_line(query.exception())}")
            stop.wait(1)
    finally:
        for query in queries.values():
            query.stop()
    return [run._close("succeeded" if run.hop.name in queries else "skipped") for run in runs]
