"""The ingest hop's sink: parsed lines to the table with lineage, every other line
to its quarantine.
"""

from __future__ import annotations

import datetime as dt

from spark_jobs.engine.contracts import HopContext, Sink
from spark_jobs.engine.tables import has_backfill_writes, held, range_predicate, table_exists
from spark_jobs.logs import delta_log
from spark_jobs.model.formats import DEBEZIUM, SKIPPED
from spark_jobs.transforms.stamps import (
    BACKFILL_BATCH,
    BATCH_ID,
    RESCUED,
    add_lineage,
    not_yet_written,
)


class IngestSink(Sink):
    """Valid rows to the hop's table (with lineage), every other line to its quarantine."""

    def __init__(self, run: HopContext):
        super().__init__(run)
        self.quarantine = run.lake.quarantine(run.hop)
        # Records the parse left out (Debezium's tombstones), counted as the batches go.
        self.rows_skipped = 0

    def stream_writer(self, parsed, query_id: str):
        run, table, quarantine = self.run, self.table, self.quarantine
        partition_by = list(run.hop.partition_by)
        backfilled = has_backfill_writes(table) or has_backfill_writes(quarantine)
        # A batch of clean lines makes no quarantine commit once the table exists (the first
        # batch creates it): a commit is a Delta transaction, about as much as the table's own
        # write, and asking whether the held batch has an unusable line is a small job.
        quarantine_exists = table_exists(quarantine)

        def write_batch(batch, batch_id: int) -> None:
            nonlocal quarantine_exists
            from pyspark.sql import functions as F

            with held(batch):
                ingest_time = F.lit(dt.datetime.now(dt.UTC).replace(tzinfo=None)).cast("timestamp")
                self._count_skipped(batch)
                valid, invalid = run.code.split_ingested(run.hop, batch)
                if backfilled:
                    valid, invalid = self._not_backfilled(batch, valid, invalid)
                valid, invalid = run.drops.drop_failing(valid, invalid, ("_source_file",))
                idempotent = {"txnAppId": query_id, "txnVersion": str(batch_id)}
                run.fence()
                # mergeSchema: a column the parse gained (``_rescued``) joins a table
                # written before it.
                add_lineage(valid, batch_id, ingest_time).write.format("delta").mode(
                    "append"
                ).partitionBy(*partition_by).options(**idempotent).option(
                    "mergeSchema", "true"
                ).save(table)
                if quarantine_exists and invalid.isEmpty():
                    return
                add_lineage(run.drops.counting(invalid), batch_id, ingest_time).write.format(
                    "delta"
                ).mode("append").options(**idempotent).save(quarantine)
                quarantine_exists = True

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
            return rows.where(
                (F.col(BATCH_ID) == BACKFILL_BATCH) & F.col("_source_file").isin(files)
            )

        bronze = written(self.table)
        if bronze is not None and low is not None:
            valid = not_yet_written(valid, bronze.where(F.col(time_column).between(low, high)))
        quarantined = written(self.quarantine)
        if quarantined is not None:
            invalid = not_yet_written(invalid, quarantined)
        return valid, invalid

    def _count_skipped(self, parsed) -> None:
        """Count the records of ``parsed`` (held) that its parse marked :data:`SKIPPED`."""
        if SKIPPED in parsed.columns:
            self.rows_skipped += parsed.where(SKIPPED).count()

    def finish_record(self, record, main, succeeded: bool) -> None:
        """The rows whose unparsed fields went to the rescued column, from the table's log, and
        the records the parse skipped (a hop whose format can skip some)."""
        record.rows_rescued = delta_log.rows_with_value(
            self.table, RESCUED, main.version_before, main.version_after
        )
        hop_format = self.run.hop.format
        if hop_format is not None and hop_format.name == DEBEZIUM:
            record.rows_skipped = self.rows_skipped

    def backfill(self, start_ms: int, end_ms: int, inputs: dict) -> None:
        """Bronze over the range; the quarantine of everything read (every landing file, every
        record of a topic) is rebuilt whole.

        Invalid lines have no trustworthy event time, so they are keyed by where they came from
        (the Source's :meth:`read_scope`).
        """
        run = self.run
        lines = run.read(start_ms, end_ms)
        scope = run.source.read_scope(lines)
        with held(run.code.transform(run.hop, lines, run.spec, inputs)) as parsed:
            self._count_skipped(parsed)
            valid, invalid = run.code.split_ingested(run.hop, parsed)
            # Quality drops of every file read join its quarantine rows, which are rebuilt whole.
            valid, invalid = run.drops.drop_failing(valid, invalid, ("_source_file",))
            in_range = range_predicate(valid, run.hop.time_column, start_ms, end_ms)
            run.fence()
            add_lineage(valid.where(in_range), BACKFILL_BATCH).write.format("delta").mode(
                "overwrite"
            ).partitionBy(*run.hop.partition_by).option("replaceWhere", in_range).option(
                "mergeSchema", "true"
            ).save(self.table)
            if scope:
                add_lineage(run.drops.counting(invalid), BACKFILL_BATCH).write.format("delta").mode(
                    "overwrite"
                ).option("replaceWhere", scope).save(self.quarantine)
