"""The changes hop's sink: a feed of changes applied per key in sequence order, as the latest row
of each key (SCD type 1) or every version of it (type 2).

Each batch (or backfill) recomputes the keys it touches from **all** their changes in the
upstream table, read as of the version the batch read, and MERGEs the result: the rows of a key
are a function of its changes alone, so arrival order, batch cuts, duplicates, a backfill and a
replay after a rollback all give the same table. A delete is remembered for as long as the
upstream table holds it: a late change older than a delete never brings its key back.
"""

from __future__ import annotations

from contextlib import contextmanager

from spark_jobs.engine.contracts import Sink
from spark_jobs.engine.tables import has_files, held, table_exists
from spark_jobs.logs import checkpoint_log, delta_log

LIVE = "_change_live"  # on the MERGE's source rows: true for a row to keep, null for one to delete
_DELETE, _START, _VERSION = "_change_is_delete", "_change_starts", "_change_version"
# The deleted keys' table: each key whose latest change is a delete, and that change's sequence.
DELETED_AT = "_deleted_at"
# On an anchor (type 2: the version of a key a batch continues): the version's first sequence.
_FROM = "_change_from"
# On the keys a MERGE replaces: replace a key's versions from this first sequence on (null: all).
_SCOPE = "_change_scope"
_FIRST, _LATE, _LIVE_SEQ = "_change_first", "_change_late", "_change_live_sequence"
_UNAVAILABLE = "_change_unavailable"


def _is_delete(rules):
    from pyspark.sql import functions as F

    if not rules.operation:
        return F.lit(False)
    return F.coalesce(F.col(rules.operation).cast("string").isin(*rules.deletes), F.lit(False))


def is_truncate(rules):
    """A change that truncates the table: its operation is one of ``truncates``."""
    from pyspark.sql import functions as F

    if not rules.operation or not rules.truncates:
        return F.lit(False)
    return F.coalesce(F.col(rules.operation).cast("string").isin(*rules.truncates), F.lit(False))


def with_truncates_as_deletes(changes, rules, keys: tuple[str, ...]):
    """``changes`` with each truncate made a delete, at its sequence, of every key the changes
    hold: a truncate ends whatever each key held before it."""
    from pyspark.sql import functions as F

    if not rules.operation or not rules.truncates:
        return changes
    truncates = changes.where(is_truncate(rules))
    rest = changes.where(~is_truncate(rules))
    ended = (
        rest.select(*keys)
        .distinct()
        .crossJoin(F.broadcast(truncates.drop(*keys)))
        .withColumn(rules.operation, F.lit(rules.deletes[0]))
    )
    return rest.unionByName(ended)


def snapshot_changes(rows, times, rules, keys: tuple[str, ...]):
    """A snapshot feed's changes: ``rows`` (some keys' rows of every snapshot) as inserts and
    updates at their snapshot's time, and a delete of a key at the time of each snapshot in
    ``times`` (every snapshot's time, one column) after its first that does not hold it."""
    from pyspark.sql import functions as F

    seq = rules.sequence_by
    first = rows.groupBy(*keys).agg(F.min(seq).alias("_first_snapshot"))
    present = rows.select(*keys, seq).distinct()
    absent = (
        first.crossJoin(F.broadcast(times.select(seq).distinct()))
        .where(F.col(seq) > F.col("_first_snapshot"))
        .drop("_first_snapshot")
        .join(present, [*keys, seq], "left_anti")
        .withColumn(rules.operation, F.lit(rules.deletes[0]))
    )
    kept = rows.withColumn(rules.operation, F.lit(None).cast("string"))
    return kept.unionByName(absent, allowMissingColumns=True)


def _fillable(frame, rules, keys: tuple[str, ...]) -> list[str]:
    """The text columns a connector may leave unavailable (none when the rules say no such
    text)."""
    if rules.unavailable_value is None:
        return []
    values = rules.value_columns(list(frame.columns), keys)
    return [
        name
        for name in values
        if frame.schema[name].dataType.typeName() == "string" and not name.startswith("_")
    ]


def _available(name: str, rules):
    """Whether a change's ``name`` holds a value: not a delete's, not the unavailable text."""
    from pyspark.sql import functions as F

    column = F.col(name)
    return ~F.col(_DELETE) & (column.isNull() | (column != F.lit(rules.unavailable_value)))


def _orderable(frame, names: list[str]) -> list[str]:
    """The columns of ``names`` Spark can order by (not a map or a variant, nor
    anything holding one).
    """

    def plain(kind) -> bool:
        name = kind.typeName()
        if name in ("map", "variant"):
            return False
        if name == "struct":
            return all(plain(field.dataType) for field in kind.fields)
        return plain(kind.elementType) if name == "array" else True

    return [name for name in names if plain(frame.schema[name].dataType)]


def _greatest(
    frame, group: list[str], order: list[str], carried: list[str], more: dict | None = None
):
    """Per ``group``, the row with the greatest ``order`` columns (compared in turn, nulls first):
    ``group``, ``carried`` and the aggregates ``more`` by name. A hash aggregate, no sort: the
    max of one struct that leads with ``order`` when every column can be ordered, else Spark's
    ``max_by``."""
    from pyspark.sql import functions as F

    more = more or {}
    fields = [*order, *[name for name in carried if name not in order]]
    if len(_orderable(frame, fields)) == len(fields):
        best = F.max(F.struct(*fields))
    else:
        best = F.max_by(F.struct(*carried), F.struct(*order))
    picked = frame.groupBy(*group).agg(
        best.alias("_change_row"), *[column.alias(name) for name, column in more.items()]
    )
    return picked.select(
        *group, *[F.col(f"_change_row.{name}").alias(name) for name in carried], *more
    )


def _marked(changes, rules):
    return changes.withColumn(_DELETE, _is_delete(rules))


def _tiebreak(changes, rules, keys: tuple[str, ...]) -> list[str]:
    """What tells two changes of one key and sequence apart: a delete first, then the greatest
    values column by column (nulls first), so the choice never depends on arrival."""
    values = rules.value_columns([name for name in changes.columns if name != _DELETE], keys)
    return [_DELETE, *_orderable(changes, values)]


def latest_rows(changes, rules, keys: tuple[str, ...]):
    """Type 1: each key's last change (by sequence, then :func:`_tiebreak`), unless it is a
    delete; the table's columns."""

    from pyspark.sql import functions as F

    kept = rules.kept_columns(changes.columns)
    changes = _marked(changes, rules)
    carried = [name for name in kept if name not in keys] + [_DELETE]
    seq = rules.sequence_by
    fillable = _fillable(changes, rules, keys)
    if not fillable:
        order = [seq, *_tiebreak(changes, rules, keys)]
        latest = _greatest(changes, list(keys), order, carried)
        return latest.where(f"NOT {_DELETE}").select(*kept)
    unique = _greatest(
        changes, [*keys, seq], _tiebreak(changes, rules, keys), [n for n in carried if n != seq]
    )
    fills = {
        f"_fill_{name}": F.max_by(name, F.when(_available(name, rules), F.col(seq)))
        for name in fillable
    }
    latest = _greatest(unique, list(keys), [seq], carried, fills).where(f"NOT {_DELETE}")
    return latest.select(
        *[
            F.when(F.col(name) == F.lit(rules.unavailable_value), F.col(f"_fill_{name}"))
            .otherwise(F.col(name))
            .alias(name)
            if name in fillable
            else name
            for name in kept
        ]
    )


def history_rows(changes, rules, keys: tuple[str, ...], time_column: str):
    """Type 2: every version of each key. A version starts at an insert or update after a delete,
    or one that changes a tracked column; it holds its last change's values; it ends at the
    sequence of the change after its last one (a delete, or the next version's start)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    valid_from, valid_to = rules.validity
    seq = rules.sequence_by
    anchored = _FROM in changes.columns
    columns = [name for name in changes.columns if name != _FROM]
    kept = rules.kept_columns(columns)
    tracked = rules.tracked_columns(columns, keys, time_column)
    changes = _marked(changes, rules)
    base = [name for name in kept if name not in (*keys, seq, valid_from, valid_to)]
    carried = [*base, _DELETE, *([_FROM] if anchored else [])]
    tiebreak = _tiebreak(changes.drop(_FROM) if anchored else changes, rules, keys)
    unique = _greatest(changes, [*keys, seq], tiebreak, carried)
    order = Window.partitionBy(*keys).orderBy(seq)
    so_far = order.rowsBetween(Window.unboundedPreceding, 0)
    for name in _fillable(unique, rules, keys):
        known = F.last(F.when(_available(name, rules), F.struct(name)), ignorenulls=True)
        unique = unique.withColumn(
            name,
            F.when(
                F.col(name) == F.lit(rules.unavailable_value), known.over(so_far)[name]
            ).otherwise(F.col(name)),
        )
    same = F.lit(True)
    for name in tracked:
        same = same & F.col(name).eqNullSafe(F.lag(name).over(order))
    previous_delete = F.lag(_DELETE).over(order)
    starts = ~F.col(_DELETE) & (previous_delete.isNull() | previous_delete | ~same)
    marked = (
        unique.withColumn(_START, starts.cast("int"))
        .withColumn(_VERSION, F.sum(_START).over(so_far))
        .withColumn(valid_to, F.lead(seq).over(order))
        .where(f"NOT {_DELETE}")
    )
    # an anchor (the version a batch continues) started before its own sequence
    first = F.min(F.coalesce(F.col(_FROM), F.col(seq))) if anchored else F.min(seq)
    versions = _greatest(
        marked, [*keys, _VERSION], [seq], [seq, *base, valid_to], {valid_from: first}
    )
    return versions.select(*kept)


class ChangesSink(Sink):
    """A change feed applied by MERGE, each touched key recomputed from its changes: from the
    table's rows and its deleted keys when every change of the batch to the key is newer than
    what the table holds of it, else from all the key's changes upstream."""

    def __init__(self, run):
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
        """The deleted keys among the keys of ``prepared`` changes: each whose latest change (by
        sequence, a delete first) is a delete, with its sequence."""
        seq = self.rules.sequence_by
        marked = _marked(prepared, self.rules)
        latest = _greatest(marked, list(self.keys), [seq, _DELETE], [seq, _DELETE])
        return latest.where(_DELETE).select(*self.keys, latest[seq].alias(DELETED_AT))

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
        # before the query starts: a refusal inside a batch reaches the user as Spark's report
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
        """Whether a batch can apply from the table's rows: the hop keeps its deleted keys and
        they are all there, and the batch truncates nothing."""
        return (
            self.deleted_keys is not None
            and table_exists(self.deleted_keys)
            and has_files(self.run.spark, self.table)
            and not self.truncates(batch)
        )

    def apply_from_table(self, batch, inputs: dict, version: int, transaction) -> None:
        """Apply a batch from what the tables hold of its keys (as they were when it started, so
        a retry after a partial commit reads the same): a key whose changes in the batch are all
        newer than its latest change the tables know is recomputed from those changes and its
        last row (type 1) or last version (type 2); a key with a change as old or older (a late
        one), or a placeholder to fill after a delete, from all its changes upstream."""
        from pyspark.sql import functions as F

        keys = list(self.keys)
        changes = self.prepared(batch)
        known, anchors, deleted = self.known(changes)
        with held(known):
            late = known.where(F.col(_LATE)).select(*keys)
            ahead = known.where(~F.col(_LATE)).select(*keys, _SCOPE)
            news = changes.join(late, keys, "left_anti")
            rows = self.rows_of(self.continued(news, anchors, deleted))
            gone = self.deleted_of(news)
            if not late.isEmpty():  # else the feed is not read at all
                late_changes = self.prepared(self.changes_of(late, inputs, version))
                rows = rows.unionByName(self.rows_of(late_changes))
                gone = gone.unionByName(self.deleted_of(late_changes))
            none = F.lit(None).cast(ahead.schema[_SCOPE].dataType)
            touched = ahead.unionByName(late.withColumn(_SCOPE, none))
            self.replace(rows, gone, touched, transaction)

    def known(self, changes):
        """Per key of ``changes``: the sequence of its latest change the tables remember, whether
        it is live, and ``_LATE`` when it must be recomputed from the feed; with the table's
        anchors and the deleted keys' rows, as the tables were when the batch started."""
        from pyspark.sql import functions as F

        rules, keys, seq = self.rules, list(self.keys), self.rules.sequence_by
        unavailable = F.lit(False)
        for name in _fillable(changes, rules, self.keys):
            placeholder = F.col(name) == F.lit(rules.unavailable_value)
            unavailable = unavailable | F.coalesce(placeholder, F.lit(False))
        first = changes.groupBy(*keys).agg(
            F.min(seq).alias(_FIRST), F.max(unavailable).alias(_UNAVAILABLE)
        )
        spark = changes.sparkSession
        anchors = self.anchors(_pinned(spark, self.table).join(first, keys, "left_semi"))
        deleted = _pinned(spark, self.deleted_keys).join(first, keys, "left_semi")
        ends = [rules.validity[1]] if rules.scd == 2 else []
        held_rows = anchors.select(*keys, F.col(seq).alias(_LIVE_SEQ), _SCOPE, *ends)
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
        return known, anchors, deleted

    def anchors(self, table):
        """Per key, what the table holds of it to continue from: its row (type 1) or its last
        version (type 2, with ``_SCOPE``: that version's first sequence), with the sequence."""
        from pyspark.sql import functions as F

        table = self.sequenced(table)
        if self.rules.scd == 1:
            return table.withColumn(
                _SCOPE, F.lit(None).cast(table.schema[self.rules.sequence_by].dataType)
            )
        valid_from = self.rules.validity[0]
        last = _greatest(
            table, list(self.keys), [valid_from], [c for c in table.columns if c not in self.keys]
        )
        return last.withColumn(_SCOPE, F.col(valid_from))

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
            parts.append(mine.drop(_SCOPE))
        else:
            valid_from, valid_to = rules.validity
            parts.append(
                mine.withColumn(_FROM, F.col(valid_from)).drop(_SCOPE, valid_from, valid_to)
            )
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
        scoped = touched.withColumn(_SCOPE, F.lit(None))
        self.replace(self.rows_of(prepared), self.deleted_of(prepared), scoped, transaction)

    def replace(self, rows, deleted, touched, transaction) -> None:
        """The table's rows of the keys ``touched`` (from each key's ``_SCOPE`` on, type 2) made
        ``rows``, then the deleted keys' rows of them made ``deleted``; each commit carries the
        batch's ``transaction``."""
        scope = self.rules.validity[0] if self.rules.scd == 2 else None
        replace_keys(self.run, self.table, rows, touched, self.keys, transaction, scope=scope)
        if self.deleted_keys is not None:
            replace_keys(
                self.run,
                self.deleted_keys,
                deleted,
                touched.drop(_SCOPE),
                self.keys,
                transaction,
                match=self.keys,
                partition_by=(),
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


def replace_keys(
    run,
    table: str,
    rows,
    touched,
    keys: tuple[str, ...],
    transaction,
    match: tuple[str, ...] | None = None,
    partition_by: tuple[str, ...] | None = None,
    scope: str | None = None,
) -> None:
    """Make ``table``'s rows of the keys ``touched`` be ``rows``: one MERGE that updates or inserts
    each of ``rows`` (matched on ``match``, the hop's table keys by default) and deletes the
    table's rows of a touched key that ``rows`` no longer has. With ``scope`` (a column of the
    table), a touched key's rows whose ``scope`` is below its ``_SCOPE`` in ``touched`` stay as
    they are. A table with no file yet is written whole (partitioned as the hop's table, unless
    ``partition_by`` says otherwise). ``transaction``: the stream's (query id, batch id), so a
    batch commits once (None for a backfill)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    session = rows.sparkSession
    partition_by = run.hop.partition_by if partition_by is None else partition_by
    with _transaction(session, transaction):
        run.fence()
        if not has_files(session, table):
            writer = rows.write.format("delta").mode("append")
            if transaction:
                writer = writer.options(txnAppId=transaction[0], txnVersion=str(transaction[1]))
            if partition_by:
                writer = writer.partitionBy(*partition_by)
            with _table_defaults(session):
                writer.save(table)
            return
        match = list(match or run.hop.table_keys)
        target = DeltaTable.forPath(session, table)
        with held(rows):  # read twice: the rows that are no longer, and the MERGE's source
            current = _scoped(target.toDF(), touched, keys, scope)
            gone = current.join(rows.select(*match), on=match, how="left_anti")
            source = rows.withColumn(LIVE, F.lit(True)).unionByName(
                gone.withColumn(LIVE, F.lit(None).cast("boolean"))
            )
            condition = " AND ".join(f"t.`{name}` <=> s.`{name}`" for name in match)
            columns = {f"`{name}`": f"s.`{name}`" for name in rows.columns}
            (
                target.alias("t")
                .merge(source.alias("s"), condition)
                .whenMatchedDelete(f"s.{LIVE} IS NULL")
                .whenMatchedUpdate(set=columns)
                .whenNotMatchedInsert(condition=f"s.{LIVE}", values=columns)
                .execute()
            )


def _scoped(table, touched, keys: tuple[str, ...], scope: str | None):
    """``table``'s rows of the keys in ``touched``, from each key's ``_SCOPE`` on by ``scope``
    when both are given."""
    if scope is None or _SCOPE not in touched.columns:
        return table.join(touched.select(*keys), on=list(keys), how="left_semi")
    from pyspark.sql import functions as F

    bounds = touched.select(*[F.col(name).alias(f"_scope_{name}") for name in keys], _SCOPE)
    condition = [table[name] == bounds[f"_scope_{name}"] for name in keys]
    condition.append(bounds[_SCOPE].isNull() | (table[scope] >= bounds[_SCOPE]))
    return table.join(bounds, on=condition, how="left_semi")


def _pinned(spark, table: str):
    """``table`` as its latest version is now, whenever the plan reads it."""
    version = delta_log.table_version(table)
    return spark.read.format("delta").option("versionAsOf", version).load(table)


@contextmanager
def _table_defaults(session):
    """A table created in the block has deletion vectors (a MERGE that changes a few rows of a
    file marks them deleted in a small side file instead of rewriting the file, so a batch that
    touches 1% of the keys rewrites none of the table's files) and records its change data
    feed (the rows each commit inserted, updated and deleted, which a summary hop below
    streams)."""
    names = [
        "spark.databricks.delta.properties.defaults.enableDeletionVectors",
        "spark.databricks.delta.properties.defaults.enableChangeDataFeed",
    ]
    before = {name: session.conf.get(name, None) for name in names}
    for name in names:
        session.conf.set(name, "true")
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                session.conf.unset(name)
            else:
                session.conf.set(name, value)


class _transaction:
    """Delta's idempotent DML: a MERGE of a batch id already committed by ``query
    id`` is skipped.
    """

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
