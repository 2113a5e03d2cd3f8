"""A rollback's table step on Spark: RESTORE a Delta table to a version, or empty it."""

from __future__ import annotations

from spark_jobs.logs import delta_log
from spark_jobs.model.errors import UsageError
from spark_jobs.model.plans import TableStep


def restore_table(spark, step: TableStep) -> int:
    """RESTORE (or empty) the table; return its version after, whose commit readers must skip."""
    if "`" in step.table:
        raise UsageError(f"table path {step.table} has a backtick; move LAKEHOUSE_HOME to a plain path")
    if step.action == "restore":
        spark.sql(f"RESTORE TABLE delta.`{step.table}` TO VERSION AS OF {int(step.restore_to)}")
    else:
        spark.sql(f"DELETE FROM delta.`{step.table}`")
    return delta_log.table_version(step.table)
