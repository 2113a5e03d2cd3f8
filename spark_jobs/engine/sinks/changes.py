"""The changes hop's sink: a feed of changes applied per key in sequence order, as the latest row
of each key (SCD type 1) or every version of it (type 2), with the keys whose latest change is a
delete kept in a table beside it (the deleted keys).

A batch recomputes each key it touches (:mod:`.change_rows`) from what the tables hold of it and
its newer changes, or, after a late change, a truncate or for a first batch, from **all** its
changes in the upstream table, read as of the version the batch read; then MERGEs the result
into both tables (:mod:`.keyed_merge`). A delete is remembered for good: a late change older
than a delete never brings its key back.
"""

from __future__ import annotations

from contextlib import ExitStack

from spark_jobs.engine.contracts import HopContext, Sink
from spark_jobs.engine.sinks.change_rows import (
    DELETED_AT,
    FROM,
    deleted_rows,
    fillable_columns,
    greatest,
    history_rows,
    is_delete,
    is_truncate,
    latest_rows,
    snapshot_changes,
    with_truncates_as_deletes,
)
from spark_jobs.engine.sinks.keyed_merge import SCOPE, replace_keys
from spark_jobs.engine.tables import has_files, held, table_exists
from spark_jobs.logs import checkpoint_log, delta_log

_FIRST, _LATE, _LIVE_SEQ = "_change_first", "_change_late", "_change_live_sequence"
_UNAVAILABLE, _DELETES = "_change_unavailable", "_change_deletes"


class ChangesSink(Sink):
    """A change feed applied by MERGE, each touched key recomputed from its changes: from the
    table's rows and its deleted keys when every change of the batch to the key is newer than
    what the table holds of it, else from all the key's changes upstream."""

    def __init__(self, run: HopContext):
        super().__init__(run)
        self.rules = run.hop.changes
        self.keys = tuple(run.hop.keys)
        self.deleted_keys = run.lake.deleted_keys(run.hop)

    def prepared(self, changes):
        """``changes`` checked against the rules, with the sequence of several columns as one
        struct (model.changes.SEQUENCE) and each truncate as a delete of every key."""
        hop = self.run.hop
        self.rules.check_columns(changes.columns, self.keys, f"hop {hop.name}")
        return with_truncates_as_deletes(self.sequenced(changes), self.rules, self.keys)

    def sequenced(self, frame):
        """``frame`` with the sequence column the rules order by (a struct of several)."""
        if len(self.rules.sequence_columns) < 2:
            return frame
        from pyspark.sql import functions as F

        return frame.withColumn(self.rules.sequence_by, F.struct(*self.rules.sequence_columns))

    def rows(self, changes):
        """The table's rows of the keys of ``changes`` (all of each key's changes)."""
        return self.rows_of(self.prepared(changes))

    def rows_of(self, prepared):
        if self.rules.scd == 1:
            return latest_rows(prepared, self.rules, self.keys)
        return history_rows(prepared, self.rules, self.keys, self.run.hop.time_column)

    def deleted_of(self, prepared):
        """The deleted keys among the keys of ``prepared`` changes (:func:`.deleted_rows`)."""
        return deleted_rows(prepared, self.rules, self.keys)

    def changes_of(self, touched, inputs: dict, version: int | None = None):
        """Every upstream change of the keys in ``touched``, of the table now or as
        of ``version``.
        """
        frame = self.upstream_changes(inputs, version)
        rows = frame.join(touched, on=list(self.keys), how="left_semi")
        if self.rules.snapshots:
            return snapshot_changes(rows, frame, self.rules, self.keys)
        return rows.unionByName(frame.where(is_truncate(self.rules)))

    def upstream_changes(self, inputs: dict, version: int | None = None):
        """Every change upstream, of the table now or as of ``version``."""
        run = self.run
        return run.code.transform(run.hop, run.source.read_all(version), run.spec, inputs)

    def truncates(self, batch) -> bool:
        return bool(self.rules.operation) and not batch.where(is_truncate(self.rules)).isEmpty()

    def remembers(self) -> bool:
        """Whether the deleted keys' table holds every key deleted so far (it exists: a table
        written before the hop kept one has it built by its next batch)."""
        return self.deleted_keys is not None and (
            table_exists(self.deleted_keys) or not table_exists(self.table)
        )

    def touched_by(self, batch, inputs: dict, version: int | None = None):
        """The keys a batch of changes touches: its own, or every key upstream when it holds a
        truncate or a snapshot (whose keys that are gone are changes too), or when the deleted
        keys' table is still to be built."""
        if self.rules.snapshots or self.truncates(batch) or not self.remembers():
            batch = self.upstream_changes(inputs, version)
        return batch.where(~is_truncate(self.rules)).select(*self.keys).distinct()

    def stream_writer(self, frame, query_id: str):
        run = self.run
        # before the query starts: a spec whose rules the stream cannot meet reads nothing
        self.rules.check_columns(frame.columns, self.keys, f"hop {run.hop.name}")
        inputs = run.code.static_inputs(run.spark, run.lake, run.hop)
        if self.rules.snapshots:
            self.refuse_late_snapshot(inputs)

        def apply_batch(batch, batch_id: int) -> None:
            # Read once: a batch the plan reads twice counts its rows twice in the
            # stream's progress.
            with held(batch):
                if batch.isEmpty():
                    return
                transaction = (query_id, batch_id)
                # a snapshot feed's batch is no change feed yet: its deletes are derived
                if not self.rules.snapshots and self.saw_whole_upstream(batch_id):
                    self.apply(batch, self.touched_by(batch, inputs), transaction)
                    return
                version = checkpoint_log.version_read(run.checkpoint, batch_id)
                if self.incremental(batch):
                    self.apply_from_table(batch, inputs, version, transaction)
                    return
                touched = self.touched_by(batch, inputs, version)
                self.apply(self.changes_of(touched, inputs, version), touched, transaction)

        return frame.writeStream.foreachBatch(run.each_batch(apply_batch))

    def incremental(self, batch) -> bool:
        """Whether a batch applies from the table's rows: the hop keeps its deleted keys and they
        are all there, the feed is long enough for that to cost less than reading it
        (``$LAKEHOUSE_CHANGES_FROM_TABLE_ROWS``), and the batch truncates nothing."""
        return (
            self.deleted_keys is not None
            and table_exists(self.deleted_keys)
            and self.feed_is_long()
            and has_files(self.run.spark, self.table)
            and not self.truncates(batch)
        )

    def feed_is_long(self) -> bool:
        """Whether the upstream table holds at least ``$LAKEHOUSE_CHANGES_FROM_TABLE_ROWS`` rows
        (counted from its log; a log without row counts counts as long)."""
        from spark_jobs.model.settings import CHANGES_FROM_TABLE_ROWS

        least = int(CHANGES_FROM_TABLE_ROWS.value())
        rows = delta_log.live_rows(self.run.source.table) if least > 0 else None
        return rows is None or rows >= least

    def apply_from_table(self, batch, inputs: dict, version: int, transaction) -> None:
        """Apply a batch from what the tables hold of its keys (as they were when it started, so
        a retry after a partial commit reads the same): a key whose changes in the batch are all
        newer than its latest change the tables know is recomputed from those changes and its
        last row (type 1) or last version (type 2); a key with a change as old or older (a late
        one), or a placeholder to fill after a delete, from all its changes upstream."""
        from pyspark.sql import functions as F

        keys = list(self.keys)
        changes = self.sequenced(batch)  # no truncate among them: nothing else to prepare
        spark = changes.sparkSession
        with ExitStack() as kept:  # each read once (what the tables hold of the batch's keys)
            first = kept.enter_context(held(self.first_of(changes)))
            mine = _pinned(spark, self.table).join(first, keys, "left_semi")
            anchors = kept.enter_context(held(self.anchors(mine)))
            remembered = _pinned(spark, self.deleted_keys).join(first, keys, "left_semi")
            deleted = kept.enter_context(held(remembered))
            known = kept.enter_context(held(self.known(first, anchors, deleted)))
            # one job says both: whether any key is late (else the feed is not read at all), and
            # whether any key was or may become deleted (else its table needs no commit)
            deletes = F.col(DELETED_AT).isNotNull() | F.col(_DELETES) | F.col(_LATE)
            flags = known.agg(
                F.max(F.col(_LATE).cast("int")).alias("late"),
                F.max(deletes.cast("int")).alias("deletes"),
            ).first()
            late = known.where(F.col(_LATE)).select(*keys)
            ahead = known.where(~F.col(_LATE)).select(*keys, SCOPE)
            news = changes.join(late, keys, "left_anti")
            rows = self.rows_of(self.continued(news, anchors, deleted))
            gone = self.deleted_of(news)
            if flags["late"]:
                late_changes = self.prepared(self.changes_of(late, inputs, version))
                rows = rows.unionByName(self.rows_of(late_changes))
                gone = gone.unionByName(self.deleted_of(late_changes))
            none = F.lit(None).cast(ahead.schema[SCOPE].dataType)
            touched = ahead.unionByName(late.withColumn(SCOPE, none))
            # with no late key, what the tables hold of the touched keys is what was read
            held_rows = None if flags["late"] else (self.table_rows(anchors), deleted)
            self.replace(rows, gone, touched, transaction, bool(flags["deletes"]), held_rows)

    def first_of(self, changes):
        """Per key of ``changes``: its first sequence in them, whether one of them leaves a value
        unavailable, and whether one of them is a delete."""
        from pyspark.sql import functions as F

        rules, keys, seq = self.rules, list(self.keys), self.rules.sequence_by
        unavailable = F.lit(False)
        for name in fillable_columns(changes, rules, self.keys):
            placeholder = F.col(name) == F.lit(rules.unavailable_value)
            unavailable = unavailable | F.coalesce(placeholder, F.lit(False))
        return changes.groupBy(*keys).agg(
            F.min(seq).alias(_FIRST),
            F.max(unavailable).alias(_UNAVAILABLE),
            F.max(is_delete(rules)).alias(_DELETES),
        )

    def known(self, first, anchors, deleted):
        """Per key of a batch (``first``): the sequence of its latest change the tables remember
        (its ``anchors`` and ``deleted`` rows, as the tables were when the batch started),
        whether it is live, and ``_LATE`` when it must be recomputed from the feed."""
        from pyspark.sql import functions as F

        rules, keys, seq = self.rules, list(self.keys), self.rules.sequence_by
        ends = [rules.validity[1]] if rules.scd == 2 else []
        held_rows = anchors.select(*keys, F.col(seq).alias(_LIVE_SEQ), SCOPE, *ends)
        live = F.col(_LIVE_SEQ).isNotNull() & F.col(DELETED_AT).isNull()
        for end in ends:
            live = live & F.col(end).isNull()
        state = F.coalesce(F.col(DELETED_AT), F.col(_LIVE_SEQ))
        late = (state.isNotNull() & (F.col(_FIRST) <= state)) | (F.col(_UNAVAILABLE) & ~live)
        known = (
            first.join(held_rows, keys, "left")
            .join(deleted, keys, "left")
            .withColumn(_LATE, F.coalesce(late, F.lit(True)))
        )
        return known

    def anchors(self, table):
        """Per key, what the table holds of it to continue from: its row (type 1) or its last
        version (type 2, with ``SCOPE``: that version's first sequence), with the sequence."""
        from pyspark.sql import functions as F

        table = self.sequenced(table)
        if self.rules.scd == 1:
            return table.withColumn(
                SCOPE, F.lit(None).cast(table.schema[self.rules.sequence_by].dataType)
            )
        valid_from = self.rules.validity[0]
        last = greatest(
            table, list(self.keys), [valid_from], [c for c in table.columns if c not in self.keys]
        )
        return last.withColumn(SCOPE, F.col(valid_from))

    def table_rows(self, anchors):
        """The table's rows among ``anchors`` (its rows, type 1; its keys' last versions, type
        2): the rows of the keys they continue that a MERGE replaces, each within its scope."""
        return anchors.select(*_pinned(anchors.sparkSession, self.table).columns)

    def continued(self, news, anchors, deleted):
        """A batch's changes of the keys it applies from the table, after what the table holds of
        each: its row or last version as a change (type 2: with the version's first sequence),
        a delete at the end of a closed last version, and one at the key's remembered delete."""
        from pyspark.sql import functions as F

        rules, keys, seq = self.rules, list(self.keys), self.rules.sequence_by
        theirs = news.select(*keys).distinct()
        mine = anchors.join(theirs, keys, "left_semi")
        parts = []
        if rules.scd == 1:
            parts.append(mine.drop(SCOPE))
        else:
            valid_from, valid_to = rules.validity
            parts.append(mine.withColumn(FROM, F.col(valid_from)).drop(SCOPE, valid_from, valid_to))
            ends = mine.where(F.col(valid_to).isNotNull()).select(*keys, F.col(valid_to).alias(seq))
            parts.append(ends)
        if rules.operation:
            remembered = deleted.join(theirs, keys, "left_semi")
            parts.append(remembered.select(*keys, F.col(DELETED_AT).alias(seq)))
        delete = F.lit(rules.deletes[0]) if rules.operation else None
        continued = news
        for index, part in enumerate(parts):
            if index and rules.operation:  # the ends and remembered deletes
                part = part.withColumn(
                    rules.operation, delete.cast(news.schema[rules.operation].dataType)
                )
            continued = continued.unionByName(part, allowMissingColumns=True)
        return continued

    def refuse_late_snapshot(self, inputs: dict) -> None:
        """Before a snapshot feed's query starts: refuse a snapshot that reached the feed after
        the hop applied a later one (its rows would rewrite history the table has shown)."""
        from pyspark.sql import functions as F

        from spark_jobs.model.errors import UsageError

        committed = checkpoint_log.commit_batch_ids(self.run.checkpoint)
        if not committed:
            return
        version = checkpoint_log.version_read(self.run.checkpoint, committed[-1])
        if version < 0:
            return
        seq = self.rules.sequence_by

        def times(at: int | None) -> set:
            frame = self.upstream_changes(inputs, at).select(seq).distinct()
            return {row[0] for row in frame.where(F.col(seq).isNotNull()).collect()}

        applied = times(version)
        late = sorted(t for t in times(None) - applied if applied and t < max(applied))
        if late:
            upstream = self.run.source.upstream.name
            raise UsageError(
                f"hop {self.run.hop.name}: the snapshot of {late[0]} arrived after the snapshot "
                f"of {max(applied)} was applied: snapshots apply in time order; roll {upstream} "
                f"back to before the late one (`lakehouse rollback {self.run.spec.name} --hop "
                f"{upstream} --to-time ...`), move its file out of the landing folder and run again"
            )

    def saw_whole_upstream(self, batch_id: int) -> bool:
        """Whether the batch read every change upstream holds (a first batch from version 0 of a
        table a backfill never wrote): then it is every change of its keys already."""
        from spark_jobs.engine.tables import has_backfill_writes

        source = self.run.source
        return checkpoint_log.saw_whole_table(self.run.checkpoint, batch_id) and not (
            source.upstream.ingests and has_backfill_writes(source.table)
        )

    def apply(self, changes, touched, transaction: tuple[str, int] | None) -> None:
        """MERGE the recomputed rows of the keys ``touched`` (all their ``changes``): a key's rows
        replaced by its new ones, its rows that are no longer (deleted, or a version a late
        change split) deleted; and the same keys' deletes remembered. ``transaction``: the
        stream's (query id, batch id), so a batch commits once."""
        from pyspark.sql import functions as F

        prepared = self.prepared(changes)
        scoped = touched.withColumn(SCOPE, F.lit(None))
        self.replace(self.rows_of(prepared), self.deleted_of(prepared), scoped, transaction)

    def replace(
        self, rows, deleted, touched, transaction, deletes: bool | None = None, held_rows=None
    ) -> None:
        """The table's rows of the keys ``touched`` (from each key's ``SCOPE`` on, type 2) made
        ``rows``, then the deleted keys' rows of them made ``deleted``, unless none of them is
        deleted before or after (``deletes`` False, or found so when None): then no commit there.
        ``held_rows``: what both tables hold of those keys now, when read already. Each commit
        carries the batch's ``transaction``."""
        scope = self.rules.validity[0] if self.rules.scd == 2 else None
        current, remembered = held_rows or (None, None)
        replace_keys(
            self.run,
            self.table,
            rows,
            touched,
            self.keys,
            transaction,
            scope=scope,
            current=current,
        )
        if self.deleted_keys is None:
            return
        keys = touched.select(*self.keys)
        exists = table_exists(self.deleted_keys)
        if exists and deletes is False:
            return
        if exists and deletes is None and deleted.isEmpty():
            table = _pinned(rows.sparkSession, self.deleted_keys)
            if table.join(keys, list(self.keys), "left_semi").isEmpty():
                return
        replace_keys(
            self.run,
            self.deleted_keys,
            deleted,
            keys,
            self.keys,
            transaction,
            match=self.keys,
            partition_by=(),
            current=remembered,
        )

    def finish_record(self, record, change, succeeded: bool) -> None:
        """A run's ``record``: the rows its MERGEs deleted (the table's ``change`` in its log) and,
        when it succeeded, the live keys it left."""
        record.rows_deleted = delta_log.rows_deleted(
            self.table, change.version_before, change.version_after
        )
        if succeeded:
            record.live_keys = self.live_keys()

    def live_keys(self) -> int:
        """The keys the table holds a live row of: its rows (type 1, counted from its log without
        a Spark job where the log allows), its open versions (type 2)."""
        if not table_exists(self.table):
            return 0
        if self.rules.scd == 1 and (rows := delta_log.live_rows(self.table)) is not None:
            return rows
        table = self.run.spark.read.format("delta").load(self.table)
        return (
            table if self.rules.scd == 1 else table.where(f"`{self.rules.validity[1]}` IS NULL")
        ).count()

    def backfill(self, start_ms: int, end_ms: int, inputs: dict) -> None:
        """Recompute every key a change of ``[start, end)`` touches, from all its changes."""
        touched = self.touched_by(self.run.transformed_range(start_ms, end_ms, inputs), inputs)
        self.apply(self.changes_of(touched, inputs), touched, None)


def _pinned(spark, table: str):
    """``table`` as its latest version is now, whenever the plan reads it."""
    version = delta_log.table_version(table)
    return spark.read.format("delta").option("versionAsOf", version).load(table)
