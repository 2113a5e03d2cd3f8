"""What ``lakehouse maintain`` may remove, planned from the logs without a JVM: each table's old
files and log entries (:mod:`.table_files`), landing files and records past retention
(:mod:`.expired`). The engine's :mod:`spark_jobs.engine.maintenance` carries the plans out."""
