"""The append (and join) hops' sink: the transformed rows appended, ``drop`` rules' rows
to the quarantine.
"""

from __future__ import annotations

from contextlib import nullcontext

from spark_jobs.engine import quality
from spark_jobs.engine.contracts import HopContext, Sink
from spark_jobs.engine.tables import held, range_predicate, table_exists
from spark_jobs.transforms.stamps import BACKFILL_BATCH, add_lineage


class AppendSink(Sink):
    """Appends the transformed rows; rows a ``drop`` rule fails go to the hop's
    quarantine, if it has one.
    """

    def __init__(self, run: HopContext):
        super().__init__(run)
        self.quarantine = run.lake.quarantine(run.hop)

    def stream_writer(self, frame, query_id: str):
        run, hop, table, quarantine = self.run, self.run.hop, self.table, self.quarantine

        # An empty commit costs a Delta transaction (about as much as the table's own write):
        # a batch without drops makes one only to create the quarantine table.
        quarantine_exists = quarantine is not None and table_exists(quarantine)

        def write_batch(batch, batch_id: int) -> None:
            nonlocal quarantine_exists
            # read twice: computed once
            with held(batch) if run.drops.rules or hop.unique else nullcontext():
                kept, dropped = run.drops.drop_failing(
                    self._not_held(batch) if hop.unique else batch, None, (hop.time_column,)
                )
                kept, counts = run.gate.counting(kept)
                # The transaction a Delta sink would write: a replayed batch id is skipped.
                idempotent = {"txnAppId": query_id, "txnVersion": str(batch_id)}
                run.fence()
                kept.write.format("delta").mode("append").partitionBy(*hop.partition_by).options(
                    **idempotent
                ).save(table)
                run.gate.counted(counts)
                if quarantine is None:
                    return
                # no drop rule: nothing to quarantine, and no commit once the table exists
                if dropped is None:
                    if quarantine_exists:
                        return
                    dropped = quality.no_quarantine_rows(batch, (hop.time_column,))
                add_lineage(run.drops.counting(dropped), batch_id).write.format("delta").mode(
                    "append"
                ).options(**idempotent).save(quarantine)
                quarantine_exists = True

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

    def backfill(self, start_ms: int, end_ms: int, inputs: dict) -> None:
        """Overwrite exactly the range (``replaceWhere``), in the table and in the quarantine."""
        run, hop = self.run, self.run.hop
        frame = run.transformed_range(start_ms, end_ms, inputs)
        in_range = range_predicate(frame, hop.time_column, start_ms, end_ms)
        # A join read its upstreams around the range (UpstreamTables.read): keep the range's rows.
        frame, dropped = run.drops.drop_failing(frame.where(in_range), None, (hop.time_column,))
        writer = frame.write.format("delta").mode("overwrite").option("replaceWhere", in_range)
        if hop.partition_by:
            writer = writer.partitionBy(*hop.partition_by)
        run.fence()
        writer.save(self.table)
        if self.quarantine:
            if dropped is None:
                dropped = quality.no_quarantine_rows(frame, (hop.time_column,))
            add_lineage(run.drops.counting(dropped), BACKFILL_BATCH).write.format("delta").mode(
                "overwrite"
            ).option("replaceWhere", in_range).save(self.quarantine)
