"""Alerts through Airflow's own notifiers: what needs a person reaches the team's channels.

The notifiers are configured once for every pipeline in ``$LAKEHOUSE_NOTIFIERS`` and a spec may
name its own (``notify:``, which replaces them for that pipeline). Each is a mapping: ``class``,
the import path of an Airflow notifier (``BaseNotifier``: the SMTP provider's ``SmtpNotifier``,
Slack's ``SlackWebhookNotifier`` where installed, any class of the team's), and the keyword
arguments it is built with. In their text values ``{subject}``, ``{message}``, ``{pipeline}``,
``{hop}`` and ``{run_id}`` are filled in; the notifier then renders its own templates (Jinja,
with the task's context) as Airflow's callbacks do. The providers' SMTP and Slack notifiers get
the subject and message where the configuration gives no text of its own::

    [{"class": "airflow.providers.smtp.notifications.smtp.SmtpNotifier", "to": "data@example.com",
      "from_email": "airflow@example.com", "subject": "{subject}", "html_content": "<pre>{message}</pre>"}]

What is sent (each names the pipeline, the hop, what happened and the command that fixes it):
a stream run whose quality gate failed, once its undo task rolled the run back
(:func:`undone`); a task that failed, with the one line its ``lakehouse`` command ended with (a
run refused for a code change, records the broker no longer holds, a lost landing file; a failed
maintenance, backfill or rollback: :func:`task_failed`); a missed freshness deadline
(``lakehouse_airflow.freshness``). A notifier that cannot send logs why and the task's state
stays as it was. A class that does not import leaves the pipeline's DAGs out, one line naming it.
"""  # noqa: E501

from __future__ import annotations

import importlib
import json
import logging
from typing import Any

from spark_jobs import service
from spark_jobs.model import settings
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import PipelineSpec, get_spec

log = logging.getLogger(__name__)

# What the providers' own notifiers are given when the configuration says nothing of it.
DEFAULT_ARGUMENTS = {
    "SmtpNotifier": {"subject": "{subject}", "html_content": "<pre>{message}</pre>"},
    "SlackNotifier": {"text": "{message}"},
    "SlackWebhookNotifier": {"text": "{message}"},
}


def configured(spec: PipelineSpec) -> tuple[list[dict], str]:
    """The spec's notifiers, else ``$LAKEHOUSE_NOTIFIERS``'s, and where they were
    set (for errors).
    """
    if spec.notify:
        return list(spec.notify), f"the spec's `notify` ({spec.source})"
    text = settings.NOTIFIERS.value()
    if not text:
        return [], settings.NOTIFIERS.name
    try:
        entries = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{settings.NOTIFIERS.name} is not JSON ({error}): give a list of notifiers, each "
            '{"class": "...", ...its arguments}'
        ) from None
    return (entries if isinstance(entries, list) else [entries]), settings.NOTIFIERS.name


def notifier_classes(spec: PipelineSpec) -> list[tuple[type, dict]]:
    """Each configured notifier's class and arguments; a :class:`ValueError` of one line naming
    the class and where it was set when one does not import or is no notifier."""
    from airflow.sdk.bases.notifier import BaseNotifier

    entries, where = configured(spec)
    found = []
    for entry in entries:
        path = entry.get("class") if isinstance(entry, dict) else None
        if not isinstance(path, str) or "." not in path:
            raise ValueError(
                f"a notifier in {where} names no class: give each one a `class` (an import path "
                "such as airflow.providers.smtp.notifications.smtp.SmtpNotifier)"
            )
        module, _, name = path.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as error:
            raise ValueError(
                f"notifier class {path!r} in {where} does not import ({type(error).__name__}: "
                f"{error}): install its provider or fix the path"
            ) from None
        if not (isinstance(cls, type) and issubclass(cls, BaseNotifier)):
            raise ValueError(
                f"{path!r} in {where} is not an Airflow notifier (a BaseNotifier subclass)"
            )
        found.append((cls, {key: value for key, value in entry.items() if key != "class"}))
    return found


def send(
    spec: PipelineSpec,
    subject: str,
    message: str,
    context: dict | None,
    hop: str = "",
    run_id: str = "",
) -> int:
    """Build each configured notifier with the alert filled in and call it with ``context``;
    how many sent. A notifier that fails is logged, never raised: the alert is also in the log."""
    values = {
        "subject": subject,
        "message": message,
        "pipeline": spec.name,
        "hop": hop,
        "run_id": run_id,
    }
    log.warning("%s: %s", subject, message)
    sent = 0
    for cls, given in notifier_classes(spec):
        arguments = {**DEFAULT_ARGUMENTS.get(cls.__name__, {}), **given}
        filled = {
            key: value.format_map(values) if isinstance(value, str) else value
            for key, value in arguments.items()
        }
        try:
            cls(**filled)(dict(context or {}))
            sent += 1
        except Exception as error:  # a mail server down must not change what the task did
            log.error("notifier %s could not send %r: %s", cls.__name__, subject, error)
    return sent


def run_id_of(dag_run) -> str:
    """A DAG run's id from a callback's context (a deadline's callback gets the run as the REST
    API's JSON: ``dag_run_id``)."""
    if isinstance(dag_run, dict):
        return dag_run.get("dag_run_id") or dag_run.get("run_id") or ""
    return getattr(dag_run, "run_id", "") or ""


def task_failed(context: dict[str, Any]) -> None:
    """Every lakehouse task's ``on_failure_callback``: the task, its DAG run and the line its
    command ended with (which names the fix). A stream run's failed gate is left to
    :func:`undone`, which reports it with what the undo did."""
    task = context["ti"].task_id
    dag_id = context["ti"].dag_id
    if task.startswith("gate_") and dag_id.endswith("__stream"):
        return
    pipeline = dag_id.rsplit("__", 1)[0]
    spec = get_spec(pipeline)
    hop = task if task in spec.hop_names else ""
    run_id = run_id_of(context.get("dag_run"))
    reason = str(context.get("exception") or "see the task's log")
    where = f"hop {hop}" if hop else f"task {task}"
    send(
        spec,
        f"lakehouse {pipeline}: {where} failed",
        f"{pipeline}: {where} of {dag_id} run {run_id} failed: {reason}",
        context,
        hop,
        run_id,
    )


def undone(context: dict[str, Any]) -> None:
    """The stream DAG's ``undo`` task's ``on_success_callback``: the gate that failed, its rules,
    and that this run's batches of the hop and those below it were rolled back."""
    pipeline = context["ti"].dag_id.rsplit("__", 1)[0]
    spec = get_spec(pipeline)
    run_id = run_id_of(context.get("dag_run"))
    hop = context["ti"].xcom_pull(task_ids="plan_undo") or ""
    summary = service.quality_summaries(Lake.open(spec), run_id, hop)[0] if hop else None
    rules = ", ".join((summary or {}).get("failed") or []) or "see the gate's log"
    below = [each.name for each in spec.downstream_of(hop)] if hop else []
    message = (
        f"{pipeline}: the quality gate of hop {hop} failed on stream run {run_id} ({rules}); the "
        f"undo task rolled this run's batches of {', '.join([hop, *below])} back, so no table "
        f"shows them. Fix the data or the rule: `lakehouse quality {pipeline} --hop {hop} --run "
        f"{run_id}` shows the failing rows; the next stream run reads the undone data again"
    )
    send(
        spec,
        f"lakehouse {pipeline}: gate of {hop} failed, run undone",
        message,
        context,
        hop,
        run_id,
    )
