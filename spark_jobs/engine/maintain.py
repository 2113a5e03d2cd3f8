"""``lakehouse maintain`` on Spark: compact a table's small files (Delta OPTIMIZE), then delete the
files no version from :class:`~spark_jobs.control.maintenance.TablePlan`'s ``keep_from`` on uses
(:func:`spark_jobs.control.maintenance.vacuum`, from the log).

OPTIMIZE's commit rewrites files without changing data (``dataChange`` false): the streams that
read the table skip it, a quality gate's change feed sees nothing in it, and the rollback planner
counts it as a commit that changes no rows.
"""

from __future__ import annotations

import time

from spark_jobs.control.maintenance import TablePlan, stored_bytes, vacuum


def _detail(spark, table: str) -> tuple[int, int]:
    row = spark.sql(f"DESCRIBE DETAIL delta.`{table}`").first()
    return int(row.numFiles), int(row.sizeInBytes)


def _compact(spark, table: str, files: int, least: int, dry_run: bool) -> dict:
    if files < least:
        return {"compacted": f"no ({files} files, fewer than compact_min_files, {least})"}
    if dry_run:
        return {"compacted": f"would compact up to {files} files"}
    from delta.tables import DeltaTable

    metrics = DeltaTable.forPath(spark, table).optimize().executeCompaction().first().metrics
    return {"compacted": f"{metrics.numFilesRemoved} files into {metrics.numFilesAdded}",
            "files_compacted": int(metrics.numFilesRemoved) - int(metrics.numFilesAdded)}


def maintain_table(spark, step: TablePlan, compact_min_files: int, dry_run: bool) -> dict:
    """Compact (with ``compact_min_files`` files or more), then vacuum, one table; what it did (or
    would do), with its files and bytes before and after."""
    if "`" in step.table:
        from spark_jobs.model.errors import UsageError

        raise UsageError(f"table path {step.table} has a backtick; move LAKEHOUSE_HOME to a plain path")
    began = time.time()
    files, size = _detail(spark, step.table)
    done = {**step.to_dict(), "files_before": files, "bytes_before": size, "stored_before": stored_bytes(step.table)}
    done.update(_compact(spark, step.table, files, compact_min_files, dry_run))
    done.update(vacuum(step, dry_run))
    after_files, after_size = (files, size) if dry_run else _detail(spark, step.table)
    return done | {"files_after": after_files, "bytes_after": after_size, "stored_after": stored_bytes(step.table),
                   "seconds": round(time.time() - began, 3)}
