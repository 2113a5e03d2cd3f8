"""The changes hop's sink: a feed of changes applied per key in sequence order, as the latest row
of each key (SCD type 1) or every version of it (type 2).

Each batch (or backfill) recomputes the keys it touches from **all** their changes in the
upstream table, read as of the version the batch read, and MERGEs the result: the rows of a key
are a function of its changes alone, so arrival order, batch cuts, duplicates, a backfill and a
replay after a rollback all give the same table. A delete is remembered for as long as the
upstream table holds it: a late change older than a delete never brings its key back.
"""

from __future__ import annotations

from spark_jobs.engine.tables import table_exists
from spark_jobs.logs import checkpoint_log

LIVE = "_change_live"  # on the MERGE's source rows: true for a row to keep, null for one to delete
_DELETE, _START, _VERSION = "_change_is_delete", "_change_starts", "_change_version"


def _is_delete(rules):
    from pyspark.sql import functions as F

    if not rules.operation:
        return F.lit(False)
    return F.coalesce(F.col(rules.operation).cast("string").isin(*rules.deletes), F.lit(False))


def deduplicated(changes, rules, keys: tuple[str, ...]):
    """One change per key and sequence: of several, a delete, else the greatest values (nulls
    first), so the choice does not depend on arrival."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    changes = changes.withColumn(_DELETE, _is_delete(rules))
    values = rules.value_columns(changes.columns, keys)
    order = [F.col(_DELETE).desc()]
    for name in values:
        order += [F.col(name).isNotNull().desc(), F.col(name).cast("string").desc()]
    window = Window.partitionBy(*keys, rules.sequence_by).orderBy(*order)
    return changes.withColumn("_change_rank", F.row_number().over(window)).where("_change_rank = 1").drop("_change_rank")


def latest_rows(changes, rules, keys: tuple[str, ...]):
    """Type 1: each key's last change, unless it is a delete; the table's columns."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    kept = rules.kept_columns(changes.columns)
    last = Window.partitionBy(*keys).orderBy(F.col(rules.sequence_by).desc())
    unique = deduplicated(changes, rules, keys)
    return (unique.withColumn("_change_rank", F.row_number().over(last))
            .where(f"_change_rank = 1 AND NOT {_DELETE}").select(*kept))


def history_rows(changes, rules, keys: tuple[str, ...], time_column: str):
    """Type 2: every version of each key. A version starts at an insert or update after a delete,
    or one that changes a tracked column; it holds its last change's values; it ends at the
    sequence of the change after its last one (a delete, or the next version's start)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    valid_from, valid_to = rules.validity
    kept = rules.kept_columns(changes.columns)
    tracked = rules.tracked_columns(changes.columns, keys, time_column)
    order = Window.partitionBy(*keys).orderBy(rules.sequence_by)
    unique = deduplicated(changes, rules, keys)
    same = F.lit(True)
    for name in tracked:
        same = same & F.col(name).eqNullSafe(F.lag(name).over(order))
    previous_delete = F.lag(_DELETE).over(order)
    starts = ~F.col(_DELETE) & (previous_delete.isNull() | previous_delete | ~same)
    marked = (unique.withColumn(_START, starts.cast("int"))
              .withColumn(_VERSION, F.sum(_START).over(order.rowsBetween(Window.unboundedPreceding, 0)))
              .withColumn(valid_to, F.lead(rules.sequence_by).over(order)))
    versions = marked.where(f"NOT {_DELETE}")
    newest_first = Window.partitionBy(*keys, _VERSION).orderBy(F.col(rules.sequence_by).desc())
    whole = Window.partitionBy(*keys, _VERSION)
    return (versions.withColumn(valid_from, F.min(rules.sequence_by).over(whole))
            .withColumn("_change_rank", F.row_number().over(newest_first))
            .where("_change_rank = 1").select(*kept))


class ChangesSink:
    """A change feed applied by MERGE, each touched key recomputed from its changes."""

    def __init__(self, run):
        self.run = run
        self.table = run.lake.table(run.hop)
        self.rules = run.hop.changes
        self.keys = tuple(run.hop.keys)

    def rows(self, changes):
        """The table's rows of the keys of ``changes`` (all of each key's changes)."""
        hop = self.run.hop
        self.rules.check_columns(changes.columns, self.keys, f"hop {hop.name}")
        if self.rules.scd == 1:
            return latest_rows(changes, self.rules, self.keys)
        return history_rows(changes, self.rules, self.keys, hop.time_column)

    def changes_of(self, touched, inputs: dict, version: int | None = None):
        """Every upstream change of the keys in ``touched``, of the table now or as of ``version``."""
        run = self.run
        frame = run.code.transform(run.hop, run.source.read_all(version), run.spec, inputs)
        return frame.join(touched.select(*self.keys).distinct(), on=list(self.keys), how="left_semi")

    def stream_writer(self, frame, query_id: str):
        run = self.run
        inputs = run.code.static_inputs(run.spark, run.lake, run.hop)

        def apply_batch(batch, batch_id: int) -> None:
            batch.persist()
            try:
                if batch.isEmpty():
                    return
                if self.saw_whole_upstream(batch_id):
                    changes = batch
                else:
                    end = checkpoint_log.read_offsets(run.checkpoint, batch_id).sources[0]
                    version, _complete = checkpoint_log.delta_position(end)
                    changes = self.changes_of(batch, inputs, version)
                self.apply(changes, (query_id, batch_id))
            finally:
                batch.unpersist()

        return frame.writeStream.foreachBatch(run.each_batch(apply_batch))

    def saw_whole_upstream(self, batch_id: int) -> bool:
        """Whether the batch read every change upstream holds (a first batch from version 0 of a
        table a backfill never wrote): then it is every change of its keys already."""
        from spark_jobs.engine.tables import has_backfill_writes

        source = self.run.source
        return (checkpoint_log.saw_whole_table(self.run.checkpoint, batch_id)
                and not (source.upstream.ingests and has_backfill_writes(source.table)))

    def apply(self, changes, transaction: tuple[str, int] | None) -> None:
        """MERGE the recomputed rows of the keys ``changes`` touch: a key's rows replaced by its
        new ones, its rows that are no longer (deleted, or a version an earlier change split)
        deleted. ``transaction``: the stream's (query id, batch id), so a batch commits once."""
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        run, keys = self.run, self.keys
        session = changes.sparkSession
        with _transaction(session, transaction):
            changes = changes.persist()
            try:
                rows = self.rows(changes)
                run.fence()
                if not table_exists(self.table) or DeltaTable.forPath(session, self.table).detail().first()["numFiles"] == 0:
                    writer = rows.write.format("delta").mode("append")
                    if transaction:
                        writer = writer.options(txnAppId=transaction[0], txnVersion=str(transaction[1]))
                    if run.hop.partition_by:
                        writer = writer.partitionBy(*run.hop.partition_by)
                    writer.save(self.table)
                    return
                match = list(run.hop.table_keys)
                target = DeltaTable.forPath(session, self.table)
                current = target.toDF().join(changes.select(*keys).distinct(), on=list(keys), how="left_semi")
                gone = current.join(rows.select(*match), on=match, how="left_anti")
                source = rows.withColumn(LIVE, F.lit(True)).unionByName(
                    gone.withColumn(LIVE, F.lit(None).cast("boolean")))
                condition = " AND ".join(f"t.`{name}` <=> s.`{name}`" for name in match)
                columns = {f"`{name}`": f"s.`{name}`" for name in rows.columns}
                (target.alias("t").merge(source.alias("s"), condition)
                 .whenMatchedDelete(f"s.{LIVE} IS NULL").whenMatchedUpdate(set=columns)
                 .whenNotMatchedInsert(condition=f"s.{LIVE}", values=columns).execute())
            finally:
                changes.unpersist()

    def backfill_range(self, start_ms: int, end_ms: int) -> tuple[int, int]:
        return start_ms, end_ms

    def backfill(self, start_ms: int, end_ms: int, inputs: dict) -> None:
        """Recompute every key a change of ``[start, end)`` touches, from all its changes."""
        touched = self.run.transformed_range(start_ms, end_ms, inputs)
        self.apply(self.changes_of(touched, inputs), None)


class _transaction:
    """Delta's idempotent DML: a MERGE of a batch id already committed by ``query id`` is skipped."""

    def __init__(self, session, transaction: tuple[str, int] | None):
        self.conf, self.transaction = session.conf, transaction

    def __enter__(self):
        if self.transaction:
            self.conf.set("spark.databricks.delta.write.txnAppId", self.transaction[0])
            self.conf.set("spark.databricks.delta.write.txnVersion", str(self.transaction[1]))

    def __exit__(self, *_exc):
        if self.transaction:
            self.conf.unset("spark.databricks.delta.write.txnAppId")
            self.conf.unset("spark.databricks.delta.write.txnVersion")
