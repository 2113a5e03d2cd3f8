"""The summary hop's sink: measures of a changes hop's current rows per group, each group a batch
touched computed again from those rows.

A batch is the change data feed of the changes hop above: the rows its commits inserted, updated
(both images) and deleted. Their groups (the hop's ``keys``, after its transform) are the ones
the batch touched, an updated row's old group too. Each is computed again from the changes
table's rows as of the version the batch read, and MERGEd: a group with no row left is deleted.
So a group's row is a function of the changes table's rows alone, whatever the batch cuts, and a
replay, a backfill or a rollback of either hop gives the same table.
"""

from __future__ import annotations

from spark_jobs.engine.contracts import HopContext, Sink
from spark_jobs.engine.sinks.keyed_merge import replace_keys
from spark_jobs.engine.tables import held
from spark_jobs.logs import checkpoint_log

# The columns a change data feed adds to the changes table's own.
FEED_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


class SummarySink(Sink):
    """Each touched group's measures, recomputed from the changes table's current rows."""

    def __init__(self, run: HopContext):
        super().__init__(run)
        self.keys = tuple(run.hop.keys)

    def current_rows(self, inputs: dict, version: int | None = None):
        """The changes table's rows (now, or as of ``version``), through the hop's transform."""
        run = self.run
        return run.code.transform(run.hop, run.source.read_all(version), run.spec, inputs)

    def measured(self, rows):
        """The measures of each group of ``rows``."""
        from pyspark.sql import functions as F

        return rows.groupBy(*self.keys).agg(
            *[F.expr(expression).alias(name) for name, expression in self.run.hop.measures]
        )

    def stream_writer(self, frame, query_id: str):
        run = self.run
        inputs = run.code.static_inputs(run.spark, run.lake, run.hop)

        def apply_batch(batch, batch_id: int) -> None:
            with held(batch):
                if batch.isEmpty():
                    return
                touched = batch.select(*self.keys).distinct()
                version = checkpoint_log.version_read(run.checkpoint, batch_id)
                rows = self.current_rows(inputs, version).join(touched, list(self.keys), "semi")
                replace_keys(
                    run, self.table, self.measured(rows), touched, self.keys, (query_id, batch_id)
                )

        return frame.drop(*FEED_COLUMNS).writeStream.foreachBatch(run.each_batch(apply_batch))

    def backfill(self, start_ms: int, end_ms: int, inputs: dict) -> None:
        """Every group computed again from the changes table's rows as they are: a summary is of
        the current rows, which have no time range to cut."""
        run = self.run
        measured = self.measured(self.current_rows(inputs))
        run.fence()
        measured.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(
            self.table
        )
