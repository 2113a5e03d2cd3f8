"""Each hop kind's Source and Sink.

A **Source** is where a hop's rows come from: ``stream()`` for the run-once and always-on query,
``read(start_ms, end_ms)`` for a backfill; there is one per thing a kind reads
(:data:`SOURCES`: landing files, one upstream table, several). A **Sink** is how a hop writes:
``stream_writer()``, the streaming batch write (idempotent per batch id), and ``backfill()``, the
overwrite of a range; :data:`SINKS` names each kind's. The kinds themselves, and what each can
do, are declared in :mod:`spark_jobs.model.kinds`; a new kind is its descriptor there and its
Sink here (:func:`register_sink`), plus a Source if it reads something new.

Both get the :class:`~spark_jobs.engine.runner.HopRun` they serve (``run``): its session, lake,
hop, pipeline code, drop rules and fence. Every sink writes through ``foreachBatch`` and calls
``run.fence()`` before its first Delta commit of a batch or a backfill: on an S3 lake a job whose
lease expired or was taken over stops there (:mod:`spark_jobs.control.lock`).
"""

from __future__ import annotations

import datetime as dt
from contextlib import contextmanager, nullcontext

from spark_jobs.control.batches import commits
from spark_jobs.engine import quality
from spark_jobs.logs import checkpoint_log, delta_log
from spark_jobs.logs.fs import filesystem
from spark_jobs.model import kinds
from spark_jobs.model.times import duration_ms, iso
from spark_jobs.transforms.lineage import BACKFILL_BATCH, BATCH_ID, add_lineage, not_yet_written, streamed_rows


def range_predicate(frame, column: str, start_ms: int, end_ms: int) -> str:
    """SQL for ``start <= column < end``: timestamps compare with timestamp literals, other time
    columns (epoch milliseconds) with numbers, as ``frame``'s schema says."""
    if frame.schema[column].dataType.typeName() != "timestamp":
        return f"{column} >= {start_ms} AND {column} < {end_ms}"
    return f"{column} >= timestamp'{iso(start_ms)}' AND {column} < timestamp'{iso(end_ms)}'"


def table_exists(table: str) -> bool:
    return delta_log.table_version(table) is not None


def has_backfill_writes(table: str) -> bool:
    """Whether a backfill (a commit without a stream's ``txn``) ever added rows to ``table``.

    When the log's early JSON commits were cleaned up, assume so.
    """
    found = commits(table)
    if found and found[0].version > 0:
        return True
    return any(commit.app_id is None and commit.operation == "WRITE" for commit in found)


# Spark's in-memory cache compresses each column as it fills; on bronze's batch of 2 M parsed
# lines that took 6-8 s of a 23-s write of its two tables, about a quarter (bench/HISTORY.md).
# Uncompressed, a held batch takes more memory (past the cache's share it goes to
# local disk, persist()'s MEMORY_AND_DISK) for as long as its writes read it.
_CACHE_COMPRESSED = "spark.sql.inMemoryColumnarStorage.compressed"


@contextmanager
def held(frame):
    """``frame`` cached, uncompressed, while the block's writes read it more than once."""
    conf = frame.sparkSession.conf
    before = conf.get(_CACHE_COMPRESSED, None)
    conf.set(_CACHE_COMPRESSED, "false")  # read when the first action fills the cache
    frame.persist()
    try:
        yield frame
    finally:
        frame.unpersist()
        if before is None:
            conf.unset(_CACHE_COMPRESSED)
        else:
            conf.set(_CACHE_COMPRESSED, before)


# How many files a Delta stream's batch admits when maxFilesPerTrigger is not set (Delta's default).
DELTA_FILES_PER_BATCH = 1000


# -- sources -----------------------------------------------------------------------------------------

class LandingFiles:
    """The ingest hop's landing folder, line by line, with each line's source file."""

    def __init__(self, run):
        self.run = run

    def _lines(self, streaming: bool, max_files_per_trigger: int | None = None):
        from pyspark.sql import functions as F

        landing = self.run.lake.landing_of(self.run.hop)
        filesystem(landing).makedirs(landing, exist_ok=True)
        reader = self.run.spark.readStream if streaming else self.run.spark.read
        if streaming and max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", int(max_files_per_trigger))
        lines = reader.format("text").load(landing)
        return lines.select("value", F.col("_metadata.file_path").alias("_source_file"))

    def stream(self, max_files_per_trigger: int | None = None):
        return self._lines(True, max_files_per_trigger)

    def read(self, start_ms: int, end_ms: int, version: int | None = None):
        """Every line of every file: lines carry no trustworthy time until parsed, so the ingest
        sink applies the range to the parsed rows. (Landing files have no versions.)"""
        return self._lines(False)

    def missing(self) -> str | None:
        return None


class UpstreamTable:
    """The Delta table of the hop above (or of ``name``, one of a join's upstreams): its appends
    as a stream, a time range as a batch read."""

    def __init__(self, run, name: str | None = None):
        self.run = run
        self.upstream = run.spec.hop(name or run.hop.upstream)
        self.table = run.lake.table(self.upstream)

    def stream(self, max_files_per_trigger: int | None = None):
        # Streams read appends only: commits that rewrite files (a backfill's replaceWhere, a
        # rollback's RESTORE) are skipped, since those change the tables below by other means.
        reader = self.run.spark.readStream.format("delta").option("skipChangeCommits", "true")
        if self._first_batch_reads_all(max_files_per_trigger):
            reader = reader.option("startingVersion", "0")
        if max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", int(max_files_per_trigger))
        frame = reader.load(self.table)
        if self.upstream.reads_landing:
            frame = streamed_rows(frame)
        return frame

    def _first_batch_reads_all(self, max_files_per_trigger: int | None) -> bool:
        """Whether a new query's first batch can read the table's commits from version 0 rather
        than a snapshot of it, with the same rows and offsets.

        A new query reads a snapshot of the table, whose files Delta lists, sorts and numbers in
        about ten small Spark jobs (0.6-0.9 s for each of ad_events' silver and gold on a first
        run; bench/HISTORY.md). A table that was only appended to holds exactly the files its commits
        added, so reading those commits reads the same files. When the batch takes them all
        (as many as a batch admits: ``maxFilesPerTrigger``, Delta's default 1,000), its end
        offset is the one a snapshot read ends at (the version after the last, nothing of it
        read), so a restart from it or a rollback reads it as before.
        """
        if checkpoint_log.offset_batch_ids(self.run.checkpoint):
            return False
        added = delta_log.appended_files(self.table)
        return added is not None and added <= (max_files_per_trigger or DELTA_FILES_PER_BATCH)

    def read(self, start_ms: int, end_ms: int, version: int | None = None):
        """The rows of ``[start_ms, end_ms)``, of the table now or as of ``version``."""
        reader = self.run.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", int(version))
        frame = reader.load(self.table)
        return frame.where(range_predicate(frame, self.upstream.time_column, start_ms, end_ms))

    def missing(self) -> str | None:
        """The upstream table's path while it does not exist yet (nothing to read)."""
        return None if table_exists(self.table) else self.table


class UpstreamTables:
    """A join's upstream tables, each read as :class:`UpstreamTable` reads one: its transform gets
    ``{upstream hop name: frame}``, in the spec's order (the order it should join them in).

    A backfill of ``[start, end)`` reads each upstream over the range widened by the hop's
    ``within`` on both sides, so every pair the join can make for a row of the range is there;
    the sink keeps the joined rows of the range.
    """

    def __init__(self, run):
        self.run = run
        self.sources = {name: UpstreamTable(run, name) for name in run.hop.upstreams}

    def stream(self, max_files_per_trigger: int | None = None) -> dict:
        return {name: source.stream(max_files_per_trigger) for name, source in self.sources.items()}

    def read(self, start_ms: int, end_ms: int, version: int | None = None) -> dict:
        within = self.run.hop.within_ms
        return {name: source.read(start_ms - within, end_ms + within) for name, source in self.sources.items()}

    def missing(self) -> str | None:
        return next((source.missing() for source in self.sources.values() if source.missing()), None)


# -- sinks -------------------------------------------------------------------------------------------

class IngestSink:
    """Valid rows to the hop's table (with lineage), every other line to its quarantine."""

    def __init__(self, run):
        self.run = run
        self.table, self.quarantine = run.lake.table(run.hop), run.lake.quarantine(run.hop)

    def stream_writer(self, parsed, query_id: str):
        run, table, quarantine = self.run, self.table, self.quarantine
        partition_by = list(run.hop.partition_by)
        backfilled = has_backfill_writes(table) or has_backfill_writes(quarantine)

        def write_batch(batch, batch_id: int) -> None:
            from pyspark.sql import functions as F

            with held(batch):
                ingest_time = F.lit(dt.datetime.now(dt.UTC).replace(tzinfo=None)).cast("timestamp")
                valid, invalid = run.code.split_ingested(batch)
                if backfilled:
                    valid, invalid = self._not_backfilled(batch, valid, invalid)
                valid, invalid = run.drop_failing(valid, invalid, ("_source_file",))
                idempotent = {"txnAppId": query_id, "txnVersion": str(batch_id)}
                run.fence()
                # mergeSchema: a column the parse gained (``_rescued``) joins a table written before it.
                add_lineage(valid, batch_id, ingest_time).write.format("delta").mode("append").partitionBy(
                    *partition_by).options(**idempotent).option("mergeSchema", "true").save(table)
                add_lineage(invalid, batch_id, ingest_time).write.format("delta").mode("append").options(
                    **idempotent).save(quarantine)

        return parsed.writeStream.foreachBatch(run.each_batch(write_batch))

    def _not_backfilled(self, batch, valid, invalid):
        """Leave out the lines a backfill already wrote from this batch's files.

        A backfill reads every landing file, including ones the stream has not reached yet;
        when the stream reaches them, their lines in the backfilled range are in the tables
        already (with batch id -1). Only those files' backfilled rows are compared, and only
        within the batch's event-time span (Delta skips the other files by their statistics).
        """
        from pyspark.sql import functions as F

        time_column = self.run.hop.time_column
        files = [row[0] for row in batch.select("_source_file").distinct().collect()]
        if not files:
            return valid, invalid
        low, high = valid.agg(F.min(time_column), F.max(time_column)).first()

        def written(table: str):
            if not table_exists(table):
                return None
            rows = self.run.spark.read.format("delta").load(table)
            return rows.where((F.col(BATCH_ID) == BACKFILL_BATCH) & F.col("_source_file").isin(files))

        bronze = written(self.table)
        if bronze is not None and low is not None:
            valid = not_yet_written(valid, bronze.where(F.col(time_column).between(low, high)))
        quarantined = written(self.quarantine)
        if quarantined is not None:
            invalid = not_yet_written(invalid, quarantined)
        return valid, invalid

    def backfill_range(self, start_ms: int, end_ms: int) -> tuple[int, int]:
        return start_ms, end_ms

    def backfill(self, start_ms: int, end_ms: int, inputs: dict) -> None:
        """Bronze over the range; the quarantine of every landing file read is rebuilt whole.

        Invalid lines have no trustworthy event time, so they are keyed by source file.
        """
        run = self.run
        lines = run.source.read(start_ms, end_ms)
        source_files = sorted({row[0] for row in lines.select("_source_file").distinct().collect()})
        with held(run.code.transform(run.hop, lines, run.spec, inputs)) as parsed:
            valid, invalid = run.code.split_ingested(parsed)
            # Quality drops of every file read join its quarantine rows, which are rebuilt whole.
            valid, invalid = run.drop_failing(valid, invalid, ("_source_file",))
            in_range = range_predicate(valid, run.hop.time_column, start_ms, end_ms)
            run.fence()
            add_lineage(valid.where(in_range), BACKFILL_BATCH).write.format("delta").mode("overwrite").partitionBy(
                *run.hop.partition_by).option("replaceWhere", in_range).option("mergeSchema", "true").save(self.table)
            if source_files:
                quoted = ", ".join("'" + path.replace("'", "''") + "'" for path in source_files)
                add_lineage(invalid, BACKFILL_BATCH).write.format("delta").mode("overwrite").option(
                    "replaceWhere", f"_source_file IN ({quoted})").save(self.quarantine)


class AppendSink:
    """Appends the transformed rows; rows a ``drop`` rule fails go to the hop's quarantine, if it has one."""

    def __init__(self, run):
        self.run = run
        self.table, self.quarantine = run.lake.table(run.hop), run.lake.quarantine(run.hop)

    def stream_writer(self, frame, query_id: str):
        run, hop, table, quarantine = self.run, self.run.hop, self.table, self.quarantine

        def write_batch(batch, batch_id: int) -> None:
            with held(batch) if run.drop_rules or hop.unique else nullcontext():  # read twice: computed once
                kept, dropped = run.drop_failing(self._not_held(batch) if hop.unique else batch, None,
                                                 (hop.time_column,))
                kept, counts = run.counting(kept)
                # The transaction a Delta sink would write: a replayed batch id is skipped.
                idempotent = {"txnAppId": query_id, "txnVersion": str(batch_id)}
                run.fence()
                kept.write.format("delta").mode("append").partitionBy(*hop.partition_by).options(
                    **idempotent).save(table)
                run.counted(counts)
                if quarantine is None:
                    return
                if dropped is None:  # no drop rule: an empty commit keeps one quarantine version per batch
                    dropped = quality.no_quarantine_rows(batch, (hop.time_column,))
                add_lineage(dropped, batch_id).write.format("delta").mode("append").options(**idempotent).save(quarantine)

        return frame.writeStream.foreachBatch(run.each_batch(write_batch))

    def _not_held(self, batch):
        """The batch without the rows whose ``unique`` key the table holds already.

        A stream over a table reads appends only, not the rows a backfill wrote (the hops below
        are backfilled too), so its de-duplication's state never saw them: a resend landing after
        a backfill of its original would be written a second time (shop's model, seed 41). Only
        the batch's event-time span of the table is read (Delta skips the other files).
        """
        from pyspark.sql import functions as F

        hop = self.run.hop
        if not table_exists(self.table):
            return batch
        low, high = batch.agg(F.min(hop.time_column), F.max(hop.time_column)).first()
        if low is None:
            return batch
        held = self.run.spark.read.format("delta").load(self.table)
        held = held.where(F.col(hop.time_column).between(low, high)).select(*hop.unique).distinct()
        return batch.join(held, on=list(hop.unique), how="left_anti")

    def backfill_range(self, start_ms: int, end_ms: int) -> tuple[int, int]:
        return start_ms, end_ms

    def backfill(self, start_ms: int, end_ms: int, inputs: dict) -> None:
        """Overwrite exactly the range (``replaceWhere``), in the table and in the quarantine."""
        run, hop = self.run, self.run.hop
        frame = run.transformed_range(start_ms, end_ms, inputs)
        in_range = range_predicate(frame, hop.time_column, start_ms, end_ms)
        # A join read its upstreams around the range (UpstreamTables.read): keep the range's rows.
        frame, dropped = run.drop_failing(frame.where(in_range), None, (hop.time_column,))
        writer = frame.write.format("delta").mode("overwrite").option("replaceWhere", in_range)
        if hop.partition_by:
            writer = writer.partitionBy(*hop.partition_by)
        run.fence()
        writer.save(self.table)
        if self.quarantine:
            if dropped is None:
                dropped = quality.no_quarantine_rows(frame, (hop.time_column,))
            add_lineage(dropped, BACKFILL_BATCH).write.format("delta").mode("overwrite").option(
                "replaceWhere", in_range).save(self.quarantine)


class MergeSink:
    """An aggregate kept current by MERGE on the hop's keys, each changed key recounted from upstream."""

    def __init__(self, run):
        self.run = run
        self.table = run.lake.table(run.hop)

    def stream_writer(self, frame, query_id: str):
        from delta.tables import DeltaTable

        run, table = self.run, self.table
        # A first batch's append creates the table, as the other sinks' do: created before the
        # query (an empty commit), the append would first read that snapshot in a Spark job (the
        # two took about 0.5 s of a 2.5-s first run of gold; bench/HISTORY.md).
        exists = table_exists(table)
        condition = " AND ".join(f"t.{key} = s.{key}" for key in run.hop.keys)
        has_rows = False  # once the table has files, MERGE is right for every later batch of this query

        def merge_batch(batch, batch_id: int) -> None:
            nonlocal has_rows
            batch.persist()  # read three times: empty?, its range, its keys
            if batch.isEmpty():  # a no-data batch that only moved the watermark
                batch.unpersist()
                return
            session = batch.sparkSession
            # Merged, then counted for the gate.
            changed = (batch if self.saw_whole_upstream(batch_id) else self.recomputed(batch, batch_id)).persist()
            # Idempotent DML (delta-io/delta#1555): a replayed batch with the same id is skipped.
            session.conf.set("spark.databricks.delta.write.txnAppId", query_id)
            session.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
            try:
                run.fence()
                if exists and not has_rows:
                    has_rows = DeltaTable.forPath(session, table).detail().first()["numFiles"] > 0
                if not has_rows:
                    # No table yet, or an empty one (rolled back to its start): no row to match,
                    # and a batch has each key once, so an append writes what MERGE would,
                    # without MERGE's join against the target.
                    changed.write.format("delta").mode("append").options(
                        txnAppId=query_id, txnVersion=str(batch_id)).save(table)
                    has_rows = True
                else:
                    target = DeltaTable.forPath(session, table).alias("t")
                    target.merge(changed.alias("s"), condition).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
                run.count_now(changed, tuple(run.hop.keys))  # from the cache the write filled
            finally:
                session.conf.unset("spark.databricks.delta.write.txnAppId")
                session.conf.unset("spark.databricks.delta.write.txnVersion")
                changed.unpersist()
                batch.unpersist()

        return frame.writeStream.outputMode("update").foreachBatch(run.each_batch(merge_batch))

    def saw_whole_upstream(self, batch_id: int) -> bool:
        """Whether the batch is the query's first, read all of its upstream table as of one
        version and dropped nothing as late: then its state was empty and each key's count is
        already the aggregate of every upstream row, which :meth:`recomputed` would read again
        (a first load of 2 M events: gold 5.0 -> 3.4 s). Not over a table that reads landing
        files: its stream leaves out the rows a backfill wrote (``streamed_rows``)."""
        return (not self.run.source.upstream.reads_landing
                and checkpoint_log.saw_whole_table(self.run.checkpoint, batch_id))

    def recomputed(self, batch, batch_id: int):
        """The keys the stream's batch changed, each aggregated again from the upstream table.

        The stream's state holds only what the stream read: rows a backfill wrote upstream, and a
        key a backfill wrote here, are not in it, so its count for such a key would be short.
        Reading the upstream rows of the batch's windows (the range a backfill of them would read)
        makes every key the stream touches equal the aggregate of its upstream, whatever wrote it.

        It reads the upstream table as of the last version the batch read (its end offset), not
        as it is now: the hop above may have gone further, and a rollback that keeps this batch
        keeps that version above (soak seed 1005: reading the latest counted rows that a cascade
        then undid, so gold counted more than silver held).
        """
        from pyspark.sql import functions as F

        run = self.run
        end = checkpoint_log.read_offsets(run.checkpoint, batch_id).sources[0]
        version, _complete = checkpoint_log.delta_position(end)  # a version read in part: all of it
        start_ms = F.unix_millis(F.col(run.hop.time_column))
        low, high = batch.agg(F.min(start_ms), F.max(start_ms)).first()
        fresh = run.transformed_range(low, high + duration_ms(run.spec.window), {}, version=version)
        return fresh.join(batch.select(*run.hop.keys), on=list(run.hop.keys), how="left_semi")

    def backfill_range(self, start_ms: int, end_ms: int) -> tuple[int, int]:
        """The range grown to whole windows, so a backfill never writes half a window's count."""
        size = duration_ms(self.run.spec.window)
        return start_ms - start_ms % size, end_ms + (-end_ms) % size

    def backfill(self, start_ms: int, end_ms: int, inputs: dict) -> None:
        """Overwrite the windows of the range with the aggregate of the upstream rows in them."""
        run = self.run
        frame = run.transformed_range(start_ms, end_ms, inputs)
        in_range = range_predicate(frame, run.hop.time_column, start_ms, end_ms)
        writer = frame.write.format("delta").mode("overwrite").option("replaceWhere", in_range)
        if run.hop.partition_by:
            writer = writer.partitionBy(*run.hop.partition_by)
        run.fence()
        writer.save(self.table)


SOURCES = {kinds.LANDING: LandingFiles, kinds.TABLE: UpstreamTable, kinds.TABLES: UpstreamTables}
SINKS = {"ingest": IngestSink, "append": AppendSink, "aggregate": MergeSink, "join": AppendSink}


def register_sink(kind: str, sink: type) -> None:
    """Pair the declared hop kind ``kind`` (:func:`spark_jobs.model.kinds.register`) with its Sink."""
    if kind not in kinds.KINDS:
        raise ValueError(f"hop kind {kind!r} is not declared: register its HopKind first")
    SINKS[kind] = sink


def source_and_sink(hop) -> tuple[type, type]:
    """The Source and the Sink classes of ``hop``'s kind."""
    kind = hop.kind_of
    return SOURCES[kind.reads], SINKS[kind.name]
