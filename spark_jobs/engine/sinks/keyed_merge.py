"""The MERGE that makes a table's rows of some keys be their recomputed rows (the ``changes`` and
``summary`` sinks'): rows updated or inserted, the rows of those keys that are no longer deleted,
in one Delta commit that carries the stream's transaction, so a batch commits once."""

from __future__ import annotations

from contextlib import contextmanager

from spark_jobs.engine.tables import has_files, held

LIVE = "_change_live"  # on the MERGE's source rows: true for a row to keep, null for one to delete
# On the keys a MERGE replaces: replace a key's rows from this value of ``scope`` on (null: all).
SCOPE = "_change_scope"


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
    current=None,
) -> None:
    """Make ``table``'s rows of the keys ``touched`` be ``rows``: one MERGE that updates or inserts
    each of ``rows`` (matched on ``match``, the hop's table keys by default) and deletes the
    table's rows of a touched key that ``rows`` no longer has. With ``scope`` (a column of the
    table), a touched key's rows whose ``scope`` is below its ``SCOPE`` in ``touched`` stay as
    they are. ``current``: those rows of the table (within their scope), when the caller holds
    them already; else they are read from it. A table with no file yet is written whole
    (partitioned as the hop's table, unless ``partition_by`` says otherwise). ``transaction``:
    the stream's (query id, batch id), so a batch commits once (None for a backfill)."""
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
            if current is None:
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
    """``table``'s rows of the keys in ``touched``, from each key's ``SCOPE`` on by ``scope``
    when both are given."""
    if scope is None or SCOPE not in touched.columns:
        return table.join(touched.select(*keys), on=list(keys), how="left_semi")
    from pyspark.sql import functions as F

    bounds = touched.select(*[F.col(name).alias(f"_scope_{name}") for name in keys], SCOPE)
    condition = [table[name] == bounds[f"_scope_{name}"] for name in keys]
    condition.append(bounds[SCOPE].isNull() | (table[scope] >= bounds[SCOPE]))
    return table.join(bounds, on=condition, how="left_semi")


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
