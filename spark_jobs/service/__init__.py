"""The service: the one front door to the platform for the ``lakehouse`` CLI, the Airflow side
(the DAG factory, operators, light tasks, alerts and the Lakehouse pages), the shared driver, the
tests and the benchmarks. Nothing above it imports the layers below it (ruff bans it in
``plugins/`` and ``dags/``); what they read are the model's types.

- :mod:`~spark_jobs.service.commands`: what the CLI's commands do (run, backfill, rollback,
  refresh, maintain, status, quality, quarantine, validate, generate, new, setup). Each function
  takes plain values, checks them (a :class:`UsageError` naming the fix), holds the pipeline's lock
  where it writes, and returns a dataclass; Spark starts only inside the calls that need it.
- :mod:`~spark_jobs.service.views`: what the Airflow side reads and writes without a JVM.
- :mod:`~spark_jobs.service.history`: the lake's event log (read, kept in step with the records)
  and the wrapper every writing command runs in.
- :mod:`~spark_jobs.service.lineage`: what a hop reads and writes, named as OpenLineage names
  datasets (the Airflow side's lineage).
- :mod:`~spark_jobs.service.submission`: what a task needs to submit a command to Spark (jars,
  JVM options, Delta's confs) and the client side of a DAG run's shared driver.
"""

from spark_jobs.service.commands import (
    QUALITY_MODES,
    backfill,
    checked_run_id,
    generate,
    maintain,
    new,
    open_lake,
    quality,
    quarantine,
    refresh,
    rollback,
    run,
    setup,
    status,
    stderr,
    validate,
)
from spark_jobs.service.history import (
    EVENT_TYPES,
    events,
    events_text,
    follow_events,
    recorded,
    sync_events,
)
from spark_jobs.service.lineage import HopLineage, LineageDataset, hop_lineage
from spark_jobs.service.views import (
    arrivals,
    data_docs_page,
    data_docs_path,
    findings_text,
    hop_batches,
    hop_overview,
    new_data,
    pipeline_overview,
    plan_rollback,
    quality_results,
    quality_suite,
    quality_summaries,
    quality_text,
    quarantine_summary,
    quarantine_text,
    rollback_journals,
    rollback_problems,
    run_record,
    status_text,
    takes_away,
    write_alert,
)

__all__ = [
    "EVENT_TYPES",
    "HopLineage",
    "LineageDataset",
    "QUALITY_MODES",
    "arrivals",
    "backfill",
    "checked_run_id",
    "data_docs_page",
    "data_docs_path",
    "events",
    "events_text",
    "findings_text",
    "follow_events",
    "generate",
    "hop_batches",
    "hop_lineage",
    "hop_overview",
    "maintain",
    "new",
    "new_data",
    "open_lake",
    "pipeline_overview",
    "plan_rollback",
    "quality",
    "quality_results",
    "quality_suite",
    "quality_summaries",
    "quality_text",
    "quarantine",
    "quarantine_summary",
    "quarantine_text",
    "recorded",
    "refresh",
    "rollback",
    "rollback_journals",
    "rollback_problems",
    "run",
    "run_record",
    "setup",
    "status",
    "status_text",
    "sync_events",
    "stderr",
    "takes_away",
    "validate",
    "write_alert",
]
