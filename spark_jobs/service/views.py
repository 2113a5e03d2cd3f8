"""What the Airflow side reads and writes beside the commands, all without a JVM: the stream DAG's
new-data check, rollback plans and journals, the quality gates' results and Data Docs pages,
the Lakehouse page's figures, run records and alerts. Each takes a :class:`Lake` (``Lake.named``)
and returns plain values or the model's types. The modules below are imported in the call, so
importing the service stays cheap for Airflow's DAG processor."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from spark_jobs.control.hop_state import HopState
from spark_jobs.control.rollback.plans import Journal, Plan
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import HopSpec, PipelineSpec

if TYPE_CHECKING:
    from spark_jobs.control.arrivals import Arrived

# -- the stream DAG's light tasks -----------------------------------------------------------------


def new_data(lake: Lake) -> dict[str, str | None]:
    """Per hop, why it has work (None: nothing to do), read from the checkpoints and listings."""
    from spark_jobs.control.status import pending_work

    return pending_work(lake)


def arrivals(lake: Lake) -> list[Arrived]:
    """Per ingest hop, what arrived that its stream has not taken (the arrival trigger's view)."""
    from spark_jobs.control.arrivals import arrived

    return arrived(lake)


def plan_rollback(lake: Lake, hop: str, **target) -> Plan:
    """A rollback's plan (nothing changes): ``to_batch``, ``to_run`` or ``to_time``,
    and the options.
    """
    from spark_jobs.control.rollback import planner

    return planner.plan_request(lake, hop, **target)


def rollback_journals(lake: Lake) -> list[Journal]:
    from spark_jobs.control.rollback.journals import read_rollbacks

    return read_rollbacks(lake)


def rollback_problems(lake: Lake, journal: Journal) -> list[str]:
    """What is not as the journal says it left it (empty: the rollback is complete and on disk)."""
    from spark_jobs.control.rollback import execute

    return execute.verify(lake, journal)


def takes_away(lake: Lake, plan: Plan) -> list[dict]:
    """What a plan takes away, per table, for people (rows, files, runs, hops below, re-reads)."""
    from spark_jobs.control.rollback.impact import takes_away as summary

    return summary(lake, plan)


# -- quality gates ---------------------------------------------------------------------------------


def quality_suite(spec: PipelineSpec, hop: HopSpec) -> tuple[dict | None, str]:
    """The hop's suite (None: it has none) and where it is looked for."""
    from spark_jobs.control import suites

    return suites.load_suite(spec, hop), suites.suite_path(spec, hop)


def quality_summaries(lake: Lake, run_id: str, hop: str) -> tuple[dict | None, list[dict]]:
    """The gate's summary of the rows a run wrote (None: not checked), and its
    repairs' summaries.
    """
    from spark_jobs.control import suites

    return suites.read_summary(lake, run_id, hop), suites.read_repair_summaries(lake, run_id, hop)


def quality_text(summary: dict) -> str:
    from spark_jobs.control.suites import format_summary

    return format_summary(summary)


def status_text(status: dict) -> str:
    """:func:`~spark_jobs.service.commands.status` as ``lakehouse status`` prints it."""
    from spark_jobs.control.status import format_status

    return format_status(status)


def quarantine_text(document: dict) -> str:
    """:func:`~spark_jobs.service.commands.quarantine` as ``lakehouse quarantine`` prints it."""
    from spark_jobs.control.suites import format_quarantine

    return format_quarantine(document)


def findings_text(findings: list, pipeline: str) -> str:
    """A checkpoint validation's findings as ``lakehouse checkpoint validate`` prints them."""
    from spark_jobs.control.validate import format_findings

    return format_findings(findings, pipeline)


def quality_results(lake: Lake) -> list[dict]:
    """Every gate's summary in the quality folder, newest check first, each naming its Data Docs
    page (``page``, None without one) and when it was checked (``checked_at``, epoch seconds)."""
    from spark_jobs.control.suites import results_dir
    from spark_jobs.logs.fs import filesystem, listing, read_json

    folder = results_dir(lake)
    summaries = []
    for path in listing(filesystem(folder), folder):
        name = path.rsplit("/", 1)[-1]
        if name.endswith(".json") and not name.endswith(".result.json"):
            # the folder's spelling: s3fs lists paths without a scheme
            summary = read_json(f"{folder}/{name}")
            summary["page"] = name[: -len(".json")] + ".html" if summary.get("data_docs") else None
            # when the gate wrote it
            summary.setdefault("checked_at", _modified(f"{folder}/{name}"))
            summaries.append(summary)
    # Newest first, by when each was checked (run ids of several kinds do not sort by time).
    return sorted(
        summaries,
        key=lambda summary: (summary.get("checked_at") or 0, summary.get("hop") or ""),
        reverse=True,
    )


def _modified(path: str) -> float | None:
    """A file's modification time in epoch seconds (a local lake's or an object store's)."""
    from spark_jobs.logs.fs import filesystem

    try:
        modified = filesystem(path).modified(path)
    except (OSError, NotImplementedError):
        return None
    return modified.timestamp() if modified.tzinfo else modified.replace(tzinfo=dt.UTC).timestamp()


def data_docs_path(lake: Lake, name: str) -> str | None:
    """The path of a Data Docs page in the pipeline's quality folder; None for anything else (a
    name with a folder part, ``..``, a hidden file or another kind of file)."""
    from spark_jobs.control.suites import results_dir

    if (
        "/" in name
        or "\\" in name
        or name.startswith(".")
        or ".." in name
        or not name.endswith(".html")
    ):
        return None
    return f"{results_dir(lake)}/{name}"


def data_docs_page(lake: Lake, name: str) -> bytes | None:
    """A gate's Data Docs page (``<run id>.<hop>.html``), rendered from its result JSON on its first
    view (the gates write only the JSON); None when there is no such page."""
    from spark_jobs.logs.fs import filesystem

    path = data_docs_path(lake, name)
    if path is None:
        return None
    fs = filesystem(path)
    result = path[: -len(".html")] + ".result.json"
    if not fs.isfile(path) and fs.isfile(result):
        from spark_jobs.engine.quality import render_data_docs  # GX's renderer: no JVM

        hop = name.removesuffix(".html").rsplit(".", 1)[-1]
        render_data_docs(
            result, path, lake.spec.hop(hop).time_column if hop in lake.spec.hop_names else None
        )
    if not fs.isfile(path):
        return None
    with fs.open(path, "rb") as handle:
        return handle.read()


# -- the Lakehouse page, run records, alerts -------------------------------------------------------


def pipeline_overview(lake: Lake) -> dict:
    from spark_jobs.control.overview import pipeline_overview as overview

    return overview(lake)


def hop_overview(lake: Lake, hop: str) -> dict:
    """A hop's figures and its series for the charts."""
    from spark_jobs.control import overview

    return {"figures": overview.hop_overview(lake, hop), "series": overview.hop_series(lake, hop)}


def hop_batches(lake: Lake, hop: str) -> list[dict]:
    """The hop's batch log, newest last, as ``lakehouse status --hop`` shows it."""
    from spark_jobs.control.status import hop_status

    return hop_status(lake, hop, detail=True)["batch_log"]


def quarantine_summary(lake: Lake, hop: HopSpec) -> dict | None:
    """What the hop's quarantine holds, by reason and by file (None: the hop has none)."""
    if not hop.quarantine:
        return None
    from spark_jobs.control.quarantine import summary

    return summary(HopState(lake, hop))


def run_record(lake: Lake, run_id: str, hop: str) -> dict | None:
    from spark_jobs.logs.ops import read_record

    return read_record(lake, run_id, hop)


def write_alert(lake: Lake, alert: dict) -> str:
    """Keep a missed freshness deadline, and its event in the event log (a failed sync warns)."""
    from spark_jobs.logs.ops import write_alert as write
    from spark_jobs.service.history import sync_quietly

    path = write(lake, alert)
    sync_quietly(lake.spec.name)
    return path
