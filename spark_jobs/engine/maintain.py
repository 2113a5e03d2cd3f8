"""``lakehouse maintain`` on Spark: compact each table's small files (Delta OPTIMIZE), then delete
the files no version from its :class:`~spark_jobs.control.maintenance.TablePlan`'s ``keep_from`` on
uses (:func:`spark_jobs.control.maintenance.vacuum`, from the log).

OPTIMIZE's commit rewrites files without changing data (``dataChange`` false): the streams that
read the table skip it, a quality gate's change feed sees nothing in it, and the rollback planner
counts it as a commit that changes no rows.
"""

from __future__ import annotations

import time

from spark_jobs.control.maintenance import stored_bytes, vacuum


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


def maintain_tables(spark, plan_now, compact_min_files: int, dry_run: bool, progress=lambda line: None) -> list[dict]:
    """Compact every table ``plan_now()`` lists (with ``compact_min_files`` files or more), then plan
    again (a compaction's commit is a version too: the small files it replaced go now when no
    rollback in the window and no reader needs the versions before it) and vacuum each; one entry
    per table: what it did (or would do), its files and bytes before and after."""
    steps = plan_now()
    done: dict[str, dict] = {}
    for step in steps:
        if "`" in step.table:
            from spark_jobs.model.errors import UsageError

            raise UsageError(f"table path {step.table} has a backtick; move LAKEHOUSE_HOME to a plain path")
        began = time.time()
        files, size = _detail(spark, step.table)
        done[step.table] = {"files_before": files, "bytes_before": size, "stored_before": stored_bytes(step.table),
                            **_compact(spark, step.table, files, compact_min_files, dry_run),
                            "seconds": time.time() - began}
    entries = []
    for step in steps if dry_run else plan_now():
        began = time.time()
        entry = {**step.to_dict(), **done[step.table], **vacuum(step, dry_run)}
        files, size = (entry["files_before"], entry["bytes_before"]) if dry_run else _detail(spark, step.table)
        entries.append(entry | {"files_after": files, "bytes_after": size, "stored_after": stored_bytes(step.table),
                                "seconds": round(entry["seconds"] + time.time() - began, 3)})
        progress(entries[-1])
    return entries
