"""OpenLineage for the hop tasks: what Airflow's OpenLineage provider asks an operator for
(``get_openlineage_facets_on_start``, ``..._on_complete``, ``..._on_failure``), built from
:func:`spark_jobs.service.lineage.hop_lineage` (docs/guides/lineage.md).

Off unless the provider is installed and given a transport (``[openlineage] transport``, or
``OPENLINEAGE_URL``): without it the provider asks nothing. The provider sends the events, with
the task's parent DAG run; a consumer that is down costs the task nothing (the provider logs and
drops the event).
"""

from __future__ import annotations

from typing import Any

# The calls whose hop reads and writes datasets (a rollback or maintain moves no data between them).
MOVES_DATA = ("run", "backfill")


def _dataset(found, outputs: bool, lineage=None):
    """An OpenLineage input or output dataset: its schema where known; a hop's own table that
    its run wrote also with the rows written and the gate's assertions."""
    from openlineage.client.event_v2 import InputDataset, OutputDataset
    from openlineage.client.facet_v2 import (
        data_quality_assertions_dataset as quality,
    )
    from openlineage.client.facet_v2 import (
        output_statistics_output_dataset as statistics,
    )
    from openlineage.client.facet_v2 import schema_dataset as schema

    facets: dict[str, Any] = {}
    if found.fields:
        facets["schema"] = schema.SchemaDatasetFacet(
            fields=[
                schema.SchemaDatasetFacetFields(name=name, type=kind) for name, kind in found.fields
            ]
        )
    if not outputs:
        return InputDataset(namespace=found.namespace, name=found.name, facets=facets)
    written: dict[str, Any] = {}
    if lineage is not None and found.role == "table":
        if lineage.rows_out is not None:
            written["outputStatistics"] = statistics.OutputStatisticsOutputDatasetFacet(
                rowCount=lineage.rows_out
            )
        if lineage.rules:
            facets["dataQualityAssertions"] = quality.DataQualityAssertionsDatasetFacet(
                assertions=[
                    quality.Assertion(
                        assertion=rule["rule"],
                        success=bool(rule["passed"]),
                        severity="error" if rule["policy"] == "fail" else "warn",
                        actual=None if rule["failing"] is None else str(rule["failing"]),
                    )
                    for rule in lineage.rules
                ]
            )
    return OutputDataset(
        namespace=found.namespace, name=found.name, facets=facets, outputFacets=written
    )


def operator_lineage(pipeline: str, hop: str | None, command: str, run_id: str | None):
    """The provider's ``OperatorLineage`` of a hop task: its hop's inputs and outputs, and once
    the run ended (``run_id``), the outputs' schemas, rows written and the gate's assertions. An
    empty one for a task that moves no data or runs every hop at once."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    from spark_jobs import service

    if command not in MOVES_DATA or not hop or hop == "all":
        return OperatorLineage()
    lineage = service.hop_lineage(pipeline, hop, run_id)
    return OperatorLineage(
        inputs=[_dataset(found, outputs=False) for found in lineage.inputs],
        outputs=[_dataset(found, outputs=True, lineage=lineage) for found in lineage.outputs],
    )
