"""Each hop's table as an Airflow Asset, so a user's own DAG can run when a table changed.

``<pipeline>.<hop>`` names the asset of a hop's table (its URI: ``lakehouse://<pipeline>/<the
table's path under LAKEHOUSE_HOME>``) and ``<pipeline>.landing`` the landing folder. A hop's
table's producing task is the one that makes its rows trustworthy: the gate of the hop in the
stream DAG (after the rows passed their checks), the hop's own task in the backfill DAG (whose
quality gate runs in the task). That task declares the table as its outlet and what the hop
reads as its inlets, which draws the lineage landing → bronze → silver → gold in Airflow's asset
graph, and registers every asset, in group ``lakehouse``, when the DAG file is parsed. Airflow
gives each outlet an event when its task succeeds, so a producing task that finds its run wrote
and deleted no row ends *skipped* (:func:`announce` raises Airflow's skip): a DAG scheduled on
gold runs after the runs that changed gold (a changes hop's run that only deleted rows
included), never after one that skipped or found nothing. Each event carries the table
version, the rows written and deleted and the run.

A user's DAG::

    from lakehouse_airflow.assets import table_asset

    with DAG("reports", schedule=[table_asset("ad_events", "gold")], ...):
        ...
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import Asset

from spark_jobs import service
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import HopSpec, PipelineSpec, get_spec

log = logging.getLogger(__name__)
GROUP = "lakehouse"


def _uri(spec: PipelineSpec, relative: str) -> str:
    """``lakehouse://<pipeline>/<path under LAKEHOUSE_HOME>``: the same wherever the lake lives, so
    an asset keeps its identity (Airflow refuses a second URI for a name) when the lake moves."""
    return f"lakehouse://{spec.name}/{relative.strip('/')}"


def table_asset(pipeline: str | PipelineSpec, hop: str) -> Asset:
    """The asset of ``hop``'s table (``<pipeline>.<hop>``)."""
    spec = get_spec(pipeline) if isinstance(pipeline, str) else pipeline
    return Asset(name=f"{spec.name}.{hop}", uri=_uri(spec, spec.hop(hop).table), group=GROUP)


def landing_asset(spec: PipelineSpec, hop: HopSpec) -> Asset:
    """The asset of the ingest ``hop``'s landing folder: ``<pipeline>.landing`` for the pipeline's
    own, ``<pipeline>.landing:<path>`` for a folder a hop names (one asset per folder)."""
    folder = spec.landing_of(hop)
    name = (
        f"{spec.name}.landing"
        if folder == spec.landing
        else f"{spec.name}.landing:{folder.strip('/')}"
    )
    return Asset(name=name, uri=_uri(spec, folder), group=GROUP)


def reads(spec: PipelineSpec, hop: HopSpec) -> list[Asset]:
    """What the hop reads, as inlets: the landing folder or the tables above."""
    return (
        [landing_asset(spec, hop)]
        if hop.reads_landing
        else [table_asset(spec, name) for name in hop.upstreams]
    )


def announce(outlet_events: Any, pipeline: str, hop: str, run_id: str) -> dict | None:
    """Give the event of ``hop``'s table asset (the producing task's outlet) its extra when the
    run ``run_id`` wrote or deleted rows of it (read from its run record, no JVM): version,
    previous version, rows, rows deleted (a changes hop), quarantined, run, mode. When it changed
    none, end the task skipped (Airflow's skip: no event), or return None outside a task
    (``outlet_events`` None)."""
    lake = Lake.named(pipeline)
    spec, hop_spec = lake.spec, lake.spec.hop(hop)
    record = service.run_record(lake, run_id, hop)
    change = (record or {}).get("tables", {}).get(lake.table(hop_spec)) or {}
    if (
        record is None
        or not (record.get("rows_out") or record.get("rows_deleted"))
        or change.get("version_after") in (None, change.get("version_before"))
    ):
        return _no_event(
            outlet_events, f"run {run_id} wrote and deleted no row of {hop_spec.table}: no event"
        )
    extra = {
        "version": change["version_after"],
        "previous_version": change.get("version_before"),
        "rows": record["rows_out"],
        **({"rows_deleted": record["rows_deleted"]} if record.get("rows_deleted") else {}),
        "quarantined": record.get("rows_quarantined", 0),
        "run_id": run_id,
        "mode": record.get("mode"),
    }
    if outlet_events is not None:  # None: not in a task
        outlet_events[table_asset(spec, hop)].extra = extra
    log.info("%s.%s changed: %s", pipeline, hop, extra)
    return extra


def _no_event(outlet_events: Any, why: str) -> None:
    log.info("%s", why)
    if outlet_events is None:
        return None
    from airflow.sdk.exceptions import AirflowSkipException

    raise AirflowSkipException(why)
