"""Each hop's table as an Airflow Asset, so a user's own DAG can run when a table changed.

``<pipeline>.<hop>`` names the asset of a hop's table (its URI: ``lakehouse://<pipeline>/<the
table's path under LAKEHOUSE_HOME>``) and ``<pipeline>.landing`` the landing folder. A hop's
task declares the asset it reads as an inlet, which draws the lineage landing → bronze →
silver → gold in Airflow's asset graph. A table's events come from the task that makes its
rows trustworthy: the gate of the hop in the stream DAG (after the rows passed their checks),
the hop's own task in the backfill DAG (whose quality gate runs in the task). They go through
an alias (``<pipeline>.<hop>.writes``) so that a run that wrote no row emits no event: a DAG
scheduled on gold runs after the runs that changed gold, never after one that skipped or found
nothing. Each event carries the table version, the rows written and the run (:func:`announce`).

A user's DAG::

    from lakehouse_airflow.assets import table_asset

    with DAG("reports", schedule=[table_asset("ad_events", "gold")], ...):
        ...
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import Asset, AssetAlias

from spark_jobs.logs import ops
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
    name = f"{spec.name}.landing" if folder == spec.landing else f"{spec.name}.landing:{folder.strip('/')}"
    return Asset(name=name, uri=_uri(spec, folder), group=GROUP)


def writes(spec: PipelineSpec, hop: HopSpec) -> AssetAlias:
    """The alias a hop's producing task emits its table's events through."""
    return AssetAlias(name=f"{spec.name}.{hop.name}.writes", group=GROUP)


def reads(spec: PipelineSpec, hop: HopSpec) -> list[Asset]:
    """What the hop reads, as inlets: the landing folder or the tables above."""
    return [landing_asset(spec, hop)] if hop.reads_landing else [table_asset(spec, name) for name in hop.upstreams]


def announce(outlet_events: Any, pipeline: str, hop: str, run_id: str) -> dict | None:
    """Emit an event on ``hop``'s table asset when the run ``run_id`` wrote rows to it (read from
    its run record, no JVM); its extra: version, previous version, rows, quarantined, run, mode.
    Returns the extra, or None when nothing was written (no event)."""
    spec = get_spec(pipeline)
    lake = Lake.open(spec)
    hop_spec = spec.hop(hop)
    record = ops.read_record(lake, run_id, hop)
    if record is None:
        log.info("run %s has no record of %s: no event", run_id, hop)
        return None
    change = record.get("tables", {}).get(lake.table(hop_spec)) or {}
    if not record.get("rows_out") or change.get("version_after") in (None, change.get("version_before")):
        log.info("run %s wrote no row to %s: no event", run_id, hop_spec.table)
        return None
    extra = {"version": change["version_after"], "previous_version": change.get("version_before"),
             "rows": record["rows_out"], "quarantined": record.get("rows_quarantined", 0),
             "run_id": run_id, "mode": record.get("mode")}
    if outlet_events is not None:  # None: not in a task
        outlet_events[writes(spec, hop_spec)].add(table_asset(spec, hop), extra=extra)
    log.info("%s.%s changed: %s", pipeline, hop, extra)
    return extra
