"""What a key's changes make of its rows, as plain DataFrame functions of the changes and a
``changes`` hop's rules (:class:`~spark_jobs.model.changes.ChangesSpec`): the latest row of each
live key (SCD type 1), every version of each key (type 2), and the keys whose latest change is a
delete. The rows of a key are a function of its changes alone, so arrival order, batch cuts,
duplicates, a backfill and a replay after a rollback all give the same rows; the sink
(:mod:`spark_jobs.engine.sinks.changes`) chooses which changes each key is computed from.
"""

from __future__ import annotations

DELETE, _START, _VERSION = "_change_is_delete", "_change_starts", "_change_version"
# The deleted keys' table: each key whose latest change is a delete, and that change's sequence.
DELETED_AT = "_deleted_at"
# On an anchor (type 2: the version of a key a batch continues): the version's first sequence.
FROM = "_change_from"


def is_delete(rules):
    """A change that deletes its key: its operation is one of ``deletes``."""
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


def fillable_columns(frame, rules, keys: tuple[str, ...]) -> list[str]:
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
    return ~F.col(DELETE) & (column.isNull() | (column != F.lit(rules.unavailable_value)))


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


def greatest(
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


def flagged(changes, rules):
    return changes.withColumn(DELETE, is_delete(rules))


def _tiebreak(changes, rules, keys: tuple[str, ...]) -> list[str]:
    """What tells two changes of one key and sequence apart: a delete first, then the greatest
    values column by column (nulls first), so the choice never depends on arrival."""
    values = rules.value_columns([name for name in changes.columns if name != DELETE], keys)
    return [DELETE, *_orderable(changes, values)]


def latest_rows(changes, rules, keys: tuple[str, ...]):
    """Type 1: each key's last change (by sequence, then :func:`_tiebreak`), unless it is a
    delete; the table's columns."""

    from pyspark.sql import functions as F

    kept = rules.kept_columns(changes.columns)
    changes = flagged(changes, rules)
    carried = [name for name in kept if name not in keys] + [DELETE]
    seq = rules.sequence_by
    fillable = fillable_columns(changes, rules, keys)
    if not fillable:
        order = [seq, *_tiebreak(changes, rules, keys)]
        latest = greatest(changes, list(keys), order, carried)
        return latest.where(f"NOT {DELETE}").select(*kept)
    unique = greatest(
        changes, [*keys, seq], _tiebreak(changes, rules, keys), [n for n in carried if n != seq]
    )
    fills = {
        f"_fill_{name}": F.max_by(name, F.when(_available(name, rules), F.col(seq)))
        for name in fillable
    }
    latest = greatest(unique, list(keys), [seq], carried, fills).where(f"NOT {DELETE}")
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
    anchored = FROM in changes.columns
    columns = [name for name in changes.columns if name != FROM]
    kept = rules.kept_columns(columns)
    tracked = rules.tracked_columns(columns, keys, time_column)
    changes = flagged(changes, rules)
    base = [name for name in kept if name not in (*keys, seq, valid_from, valid_to)]
    carried = [*base, DELETE, *([FROM] if anchored else [])]
    tiebreak = _tiebreak(changes.drop(FROM) if anchored else changes, rules, keys)
    unique = greatest(changes, [*keys, seq], tiebreak, carried)
    order = Window.partitionBy(*keys).orderBy(seq)
    so_far = order.rowsBetween(Window.unboundedPreceding, 0)
    for name in fillable_columns(unique, rules, keys):
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
    previous_delete = F.lag(DELETE).over(order)
    starts = ~F.col(DELETE) & (previous_delete.isNull() | previous_delete | ~same)
    marked = (
        unique.withColumn(_START, starts.cast("int"))
        .withColumn(_VERSION, F.sum(_START).over(so_far))
        .withColumn(valid_to, F.lead(seq).over(order))
        .where(f"NOT {DELETE}")
    )
    # an anchor (the version a batch continues) started before its own sequence
    first = F.min(F.coalesce(F.col(FROM), F.col(seq))) if anchored else F.min(seq)
    versions = greatest(
        marked, [*keys, _VERSION], [seq], [seq, *base, valid_to], {valid_from: first}
    )
    return versions.select(*kept)


def deleted_rows(prepared, rules, keys: tuple[str, ...]):
    """The deleted keys among the keys of ``prepared`` changes: each whose latest change (by
    sequence, a delete first) is a delete, with its sequence as ``DELETED_AT``."""
    seq = rules.sequence_by
    latest = greatest(flagged(prepared, rules), list(keys), [seq, DELETE], [seq, DELETE])
    return latest.where(DELETE).select(*keys, latest[seq].alias(DELETED_AT))
