"""``lakehouse maintain`` on Spark: compact each table's small files (Delta OPTIMIZE), then delete
the files no version from its :class:`~spark_jobs.control.removable.table_files.TablePlan`'s
``keep_from`` on uses (:func:`spark_jobs.control.removable.table_files.vacuum`,
from the log); then archive or delete the landing files retention lets go
(:mod:`spark_jobs.control.removable.expired`), having recorded the event times their rows span in
the ingest hop's table.

OPTIMIZE's commit rewrites files without changing data (``dataChange`` false): the streams that
read the table skip it, a quality gate's change feed sees nothing in it, and the rollback planner
counts it as a commit that changes no rows.
"""

from __future__ import annotations

import time

from spark_jobs.control.hop_state import HopState
from spark_jobs.control.removable.table_files import clean_log, stored_bytes, vacuum


def _detail(spark, table: str) -> tuple[int, int]:
    """The table's data files and their bytes, from its log (Delta's DESCRIBE DETAIL when the log
    is one the plain reader cannot read and there is a session)."""
    from spark_jobs.logs.delta_log import live_files

    live = live_files(table)
    if live is None and spark is not None:
        row = spark.sql(f"DESCRIBE DETAIL delta.`{table}`").first()
        return int(row.numFiles), int(row.sizeInBytes)
    return len(live or {}), sum(int(action.get("size") or 0) for action in (live or {}).values())


def _literal(value: str | None, column: str) -> str:
    if value is None:
        return f"`{column}` IS NULL"
    return f"`{column}` = '" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _crowded(table: str, least: int) -> str | None:
    """A predicate on the partition columns that selects the partitions holding ``least`` data files
    or more ("true": the table is unpartitioned; None: no such partition, or a log
    this cannot read)."""
    from spark_jobs.logs.delta_log import live_files

    counts: dict[tuple, int] = {}
    for action in (live_files(table) or {}).values():
        key = tuple(sorted(action["partitionValues"].items()))
        counts[key] = counts.get(key, 0) + 1
    crowded = [key for key, count in counts.items() if count >= least]
    if not crowded:
        return None
    if crowded == [()]:
        return "true"
    return " OR ".join(
        "(" + " AND ".join(_literal(value, column) for column, value in key) + ")"
        for key in crowded
    )


def _compact(
    spark, table: str, files: int, least: int, dry_run: bool, zorder_by: tuple[str, ...] = ()
) -> dict:
    if files < least:
        return {"compacted": f"no ({files} files, fewer than compact_min_files, {least})"}
    how = f"Z-order by {', '.join(zorder_by)}" if zorder_by else "compact"
    if dry_run:
        return {"compacted": f"would {how} up to {files} files"}
    from delta.tables import DeltaTable

    optimize = DeltaTable.forPath(spark, table).optimize()
    if zorder_by:
        # Z-ordering rewrites every file of a partition it orders: only those with many files.
        crowded = _crowded(table, least)
        if crowded is None:
            return {"compacted": f"no (no partition has {least} files or more)"}
        metrics = optimize.where(crowded).executeZOrderBy(*zorder_by).first().metrics
    else:
        metrics = optimize.executeCompaction().first().metrics
    return {
        "compacted": f"{metrics.numFilesRemoved} files into {metrics.numFilesAdded}"
        + (f" (Z-ordered by {', '.join(zorder_by)})" if zorder_by else ""),
        "files_compacted": int(metrics.numFilesRemoved) - int(metrics.numFilesAdded),
    }


def maintain_tables(
    spark,
    plan_now,
    compact_min_files: int,
    dry_run: bool,
    progress=lambda line: None,
    zorder=lambda step: (),
) -> list[dict]:
    """Compact every table ``plan_now()`` lists (with ``compact_min_files`` files or more; Z-ordered
    by ``zorder(step)``'s columns when there are any), then plan again (a compaction's commit is a
    version too: the small files it replaced go now when no rollback in the window and no reader
    needs the versions before it) and vacuum each; one entry per table: what it did (or would do),
    its files and bytes before and after."""
    steps = plan_now()
    done: dict[str, dict] = {}
    for step in steps:
        if "`" in step.table:
            from spark_jobs.model.errors import UsageError

            raise UsageError(
                f"table path {step.table} has a backtick; move LAKEHOUSE_HOME to a plain path"
            )
        began = time.time()
        files, size = _detail(spark, step.table)
        done[step.table] = {
            "files_before": files,
            "bytes_before": size,
            "stored_before": stored_bytes(step.table),
            **_compact(spark, step.table, files, compact_min_files, dry_run, zorder(step)),
            "seconds": time.time() - began,
        }
    entries = []
    for step in steps if dry_run else plan_now():
        began = time.time()
        entry = {
            **step.to_dict(),
            **done[step.table],
            **vacuum(step, dry_run),
            **clean_log(step, dry_run),
        }
        files, size = (
            (entry["files_before"], entry["bytes_before"])
            if dry_run
            else _detail(spark, step.table)
        )
        entries.append(
            entry
            | {
                "files_after": files,
                "bytes_after": size,
                "stored_after": stored_bytes(step.table),
                "seconds": round(entry["seconds"] + time.time() - began, 3),
            }
        )
        progress(entries[-1])
    return entries


def landing_span(
    spark, table: str, time_column: str, files, through_batch: int
) -> tuple[int | None, int | None]:
    """The event times (epoch ms) of the rows ``table`` holds from the landing ``files`` (as
    listed), which its batches up to ``through_batch`` (or a backfill) wrote."""
    from pyspark.sql import functions as F

    from spark_jobs.logs.file_source_log import listed_path
    from spark_jobs.transforms.stamps import BATCH_ID

    rows = spark.read.format("delta").load(table)
    stamp = F.col(time_column)
    if rows.schema[time_column].dataType.typeName() == "timestamp":
        stamp = F.unix_millis(stamp)
    wanted, first, last = set(files), None, None
    spans = (
        rows.where(F.col(BATCH_ID) <= through_batch)
        .groupBy("_source_file")
        .agg(F.min(stamp).alias("first"), F.max(stamp).alias("last"))
        .collect()
    )
    for row in spans:
        if listed_path(row["_source_file"]) in wanted and row["first"] is not None:
            first = row["first"] if first is None else min(first, row["first"])
            last = row["last"] if last is None else max(last, row["last"])
    return first, last


def prune_landing(spark, lake, plans, dry_run: bool, progress=lambda line: None) -> list[dict]:
    """Each :class:`~spark_jobs.control.removable.expired.LandingPlan`: the span its files' rows
    hold in the reading hops' tables, then the files archived or deleted; one entry each."""
    from spark_jobs.control.removable import expired
    from spark_jobs.engine.tables import table_exists

    entries = []
    for plan in plans:  # a dry run reads no span (it starts no JVM)
        spans = [
            landing_span(
                spark, lake.table(hop), hop.time_column, plan.files, plan.through_batch[hop.name]
            )
            for hop in map(lake.spec.hop, plan.hops)
            if plan.files and not dry_run and table_exists(lake.table(hop))
        ]
        firsts = [first for first, _last in spans if first is not None]
        lasts = [last for _first, last in spans if last is not None]
        entries.append(
            expired.prune_landing(
                lake, plan, (min(firsts, default=None), max(lasts, default=None)), dry_run
            )
        )
        progress(entries[-1])
    return entries


def maintain_lake(spark, lake, hops, record, progress=lambda line: None) -> None:
    """One ``lakehouse maintain`` of ``hops`` into ``record`` (written unless a dry run): tables
    compacted and vacuumed, old state store files deleted, expired landing files pruned, old
    records deleted. A dry run reads
    the logs only (``spark`` None: no JVM)."""
    from spark_jobs.control import events
    from spark_jobs.control.removable import expired
    from spark_jobs.control.removable.table_files import (
        plan,
        prune_state,
        table_line,
        window_targets,
    )
    from spark_jobs.control.rollback import lineage
    from spark_jobs.logs.ops import write_maintenance
    from spark_jobs.model.times import now_ms

    dry_run = record.dry_run
    infos = {}

    def infos_of(hop):
        if hop.name not in infos:
            infos[hop.name] = lineage.hop_batches(HopState(lake, hop))
        return infos[hop.name]

    # Which batch a rollback inside the window may take each hop to: a compaction
    # moves none of them.
    now = now_ms()
    targets = window_targets(lake, now, infos_of)

    def zorder(step) -> tuple[str, ...]:  # a hop's own table, not its quarantine
        hop = lake.spec.hop(step.hop)
        return hop.zorder_by if step.table == lake.table(hop) else ()

    record.tables = maintain_tables(
        spark,
        lambda: plan(lake, hops, now, targets),
        lake.spec.compact_min_files,
        dry_run,
        lambda entry: progress(f"[maintain] {table_line(entry)}"),
        zorder,
    )
    record.state = [
        done
        for done in (prune_state(HopState(lake, hop), targets[hop.name], dry_run) for hop in hops)
        if done["state_files"]
    ]
    for done in record.state:
        progress(f"[maintain] {done['hop']}: {done['state']}")
    plans = expired.landing_plan(lake, hops, now, infos_of, targets)
    record.landing = prune_landing(
        spark, lake, plans, dry_run, lambda entry: progress(f"[maintain] {entry['pruned']}")
    )
    record.records = expired.prune_records(lake, now_ms(), dry_run)
    record.event_log = events.maintain(lake, now_ms(), dry_run)
    record.records["events"] = record.event_log["events_deleted"]
    progress(f"[maintain] event log: {events.maintain_line(record.event_log)}")
    record.finish()
    if not dry_run:
        write_maintenance(lake, record)
