"""Light tasks: plain-file reads of checkpoints and landing folders, no JVM."""

from __future__ import annotations

import logging

from lakehouse_airflow.assets import announce
from spark_jobs import service
from spark_jobs.model.lake import Lake

log = logging.getLogger(__name__)


def has_new_data(pipeline: str) -> bool:
    """True when some hop of ``pipeline`` has work; the stream DAG skips Spark otherwise. A hop
    whose source changed since its checkpoint began fails the task (no retry) with the command
    that starts it over: its run would refuse."""
    from airflow.sdk.exceptions import AirflowFailException

    from spark_jobs.model.errors import CodeChanged

    try:
        pending = service.new_data(Lake.named(pipeline))
    except CodeChanged as error:
        raise AirflowFailException(str(error)) from None
    for hop, reason in pending.items():
        log.info("%s: %s", hop, reason or "nothing new")
    return any(pending.values())


def plan_rollback(pipeline: str, params: dict, ti) -> bool:
    """The rollback DAG's plan task: log the plan, push it to XCom (key ``plan``) and go on to
    execute only when something is to be undone and ``dry_run`` is off. A refused plan fails."""
    from airflow.sdk.exceptions import AirflowFailException

    from spark_jobs.model.errors import LakehouseError

    lake = Lake.named(pipeline)
    try:
        plan = service.plan_rollback(
            lake,
            params["hop"],
            to_batch=params.get("to_batch"),
            to_run=params.get("to_run"),
            to_time=params.get("to_time"),
            cascade=bool(params.get("cascade", True)),
            replan=bool(params.get("replan", False)),
            exact=bool(params.get("exact", False)),
        )
    except LakehouseError as error:
        raise AirflowFailException(str(error)) from None
    log.info("%s", plan.text())
    ti.xcom_push(key="plan", value=plan.to_dict())
    if plan.refused:
        raise AirflowFailException("rollback refused, nothing changed: " + "; ".join(plan.refused))
    if params.get("dry_run", True):
        log.info("dry run: nothing changed (trigger again with dry_run off to execute)")
    return not plan.nothing_to_do and not params.get("dry_run", True)


def plan_refresh(pipeline: str, params: dict, ti) -> bool:
    """The refresh DAG's plan task: the rollback a refresh starts with (to the start, or to the
    batches committed by ``from_time``), as :func:`plan_rollback` plans and logs it."""
    return plan_rollback(
        pipeline,
        {
            "hop": params["hop"],
            "to_batch": None if params.get("from_time") else -1,
            "to_time": params.get("from_time"),
            "cascade": True,
            "replan": True,
            "dry_run": params.get("dry_run", True),
        },
        ti,
    )


def verify_rollback(pipeline: str, dag_run) -> dict:
    """The rollback DAG's verify task: the journal this run wrote is complete and on disk."""
    from airflow.sdk.exceptions import AirflowFailException

    lake = Lake.named(pipeline)
    started = dag_run.start_date.timestamp() if dag_run.start_date else 0
    journals = [
        journal for journal in service.rollback_journals(lake) if journal.created_at >= started
    ]
    if not journals:
        raise AirflowFailException("no rollback journal was written by this DAG run")
    problems = service.rollback_problems(lake, journals[-1])
    if problems:
        raise AirflowFailException("; ".join(problems))
    summary = {
        "rollback_id": journals[-1].rollback_id,
        "duration_s": journals[-1].duration_s,
        "hops": {step.hop: step.target_batch for step in journals[-1].plan.hops},
    }
    log.info("rollback verified: %s", summary)
    return summary


def quality_gate(pipeline: str, hop: str, run_id: str, ti, outlet_events=None) -> dict:
    """A hop's gate: read the quality result its run wrote (no JVM), push it to XCom (key
    ``quality``, and ``data_docs``: the page's address) and fail when a ``fail`` rule failed.
    When it passes and the run wrote rows, the hop's table asset gets its event
    (:func:`lakehouse_airflow.assets.announce`)."""
    from airflow.sdk.exceptions import AirflowFailException

    lake = Lake.named(pipeline)
    suite, where = service.quality_suite(lake.spec, lake.spec.hop(hop))
    if suite is None:
        log.info("%s has no quality suite (%s): nothing to check", hop, where)
        announce(outlet_events, pipeline, hop, run_id)
        return {"hop": hop, "gate": "no suite"}
    summary, repairs = service.quality_summaries(lake, run_id, hop)
    if summary is None:
        raise AirflowFailException(
            f"no quality result for run {run_id} of {hop}: the hop's task did not check it "
            f"(run `lakehouse quality {pipeline} --hop {hop} --run {run_id}`)"
        )
    log.info("%s", service.quality_text(summary))
    ti.xcom_push(key="quality", value=summary)
    if summary.get("data_docs"):
        ti.xcom_push(key="data_docs", value=_address(pipeline, summary["data_docs"]))
    if summary["gate"] == "failed":
        raise AirflowFailException(f"quality gate of {hop} failed: {', '.join(summary['failed'])}")
    for repair in repairs:  # checked in the hop's task after its stream
        log.info("%s", service.quality_text(repair))
        if repair["gate"] == "failed":
            raise AirflowFailException(
                f"quality gate of {hop} failed on the run's repair {repair['run_id']}: "
                f"{', '.join(repair['failed'])}"
            )
    announce(outlet_events, pipeline, hop, run_id)
    return {key: summary.get(key) for key in ("hop", "gate", "rows", "warned")}


def _address(pipeline: str, path: str) -> str:
    """The page through the Lakehouse app of the API server (a browser does not open ``file://``
    from an http page)."""
    from airflow.configuration import conf

    from lakehouse_airflow.ui import data_docs_address

    return data_docs_address(conf.get("api", "base_url", fallback=""), pipeline, path)


def plan_undo(pipeline: str, run_id: str) -> str:
    """The stream DAG's undo planner (trigger rule ``one_failed`` on the gates): the first hop
    whose gate failed in this run; the undo task rolls that hop (and the hops below that read
    from it) back to before the run. A hop that failed by itself needs no undo: its next run
    replays the batch."""
    from airflow.sdk.exceptions import AirflowSkipException

    lake = Lake.named(pipeline)
    for hop in lake.spec.hops:
        summary, repairs = service.quality_summaries(lake, run_id, hop.name)
        summaries = [summary, *repairs]
        for summary in summaries:
            if summary and summary["gate"] == "failed":
                log.info(
                    "gate of %s failed (%s): undo run %s from %s down",
                    hop.name,
                    ", ".join(summary["failed"]),
                    run_id,
                    hop.name,
                )
                return hop.name
    raise AirflowSkipException("no gate failed in this run: nothing to undo")
