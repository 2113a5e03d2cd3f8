"""The common Great Expectations rules evaluated by Spark in one pass
(docs/concepts/quality-gates.md).

GX 1.x computes each rule's metrics as Spark jobs of their own (0.3 to 0.6 s per rule, whatever
the size) and costs about 6 s to import. The rules a suite usually holds (the types of
:data:`spark_jobs.engine.rules.RULES`) are evaluated here instead: every count in one aggregation
over the increment, plus one small job per failing rule for its first failing values. The results
have GX's own shape (``ExpectationSuiteValidationResult.to_json_dict()`` in BASIC format, GX's
order of rules), so the summaries, the result JSON and the Data Docs pages are what GX writes for
the same data (``tests/spark/test_expectations.py`` compares the two on random frames and suites).
Rules outside :data:`~spark_jobs.engine.rules.RULES`, or naming a column the frame lacks, go to GX
(:mod:`spark_jobs.engine.quality`).
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Callable
from importlib import metadata

from spark_jobs.engine.rules import rule_type

# GX's id of the whole-dataframe batch quality.validate_frame builds
BATCH_ID = "lakehouse-increment"
BATCH_DEFINITION = {
    "datasource_name": "lakehouse",
    "data_connector_name": "fluent",
    "data_asset_name": "increment",
    "batch_identifiers": {"dataframe": "<DATAFRAME>"},
}


def in_gx_order(expectations: list[dict]) -> list[dict]:
    """The rules in the order GX validates and reports them: grouped by their ``column``
    argument, groups in order of first appearance, the rules without a column as one group."""
    groups: dict[object, list[dict]] = {}
    for expectation in expectations:
        column = expectation.get("kwargs", {}).get("column")
        groups.setdefault(column if isinstance(column, str) else None, []).append(expectation)
    return [expectation for group in groups.values() for expectation in group]


# -- evaluation --------------------------------------------------------------------------------


def evaluate(frame, expectations: list[dict]) -> tuple[int, list[dict]]:
    """``(rows, results)``: the row count of ``frame`` and GX's result dict for each native rule,
    in the order given. One aggregation computes every count; a failing rule then reads up to
    :data:`EXAMPLES` of its failing values."""
    from pyspark.sql import functions as F

    marked, counts, conditions = frame, [F.count(F.lit(1)).alias("rows")], []
    for index, expectation in enumerate(expectations):
        rule, kwargs = rule_type(expectation), expectation["kwargs"]
        if rule.table_level:
            conditions.append(None)
            continue
        marked, condition = rule.marked(marked, kwargs)
        conditions.append(condition)
        counts.append(F.sum(F.when(condition, 1).otherwise(0)).alias(f"u{index}"))
        counts.append(rule.considered(kwargs).alias(f"c{index}"))
    totals = marked.agg(*counts).first().asDict()
    return totals["rows"], results_of(
        expectations,
        totals,
        lambda index: rule_type(expectations[index]).examples(
            marked, expectations[index]["kwargs"], conditions[index]
        ),
    )


def results_of(
    expectations: list[dict], totals: dict, examples: Callable[[int], list | None]
) -> list[dict]:
    """GX's result dict for each rule from its counts (``rows``, ``u<i>`` failing, ``c<i>``
    considered); ``examples(i)`` gives rule i's first failing values, asked only
    when it has some."""
    results = []
    for index, expectation in enumerate(expectations):
        rule, kwargs, rows = rule_type(expectation), expectation["kwargs"], totals["rows"]
        if rule.table_level:
            results.append(_result(expectation, rule.table_result(kwargs, rows)))
            continue
        unexpected, considered = totals.get(f"u{index}"), totals.get(f"c{index}")
        found = examples(index) if unexpected else []
        results.append(
            _result(expectation, rule.result(kwargs, rows, considered, unexpected, found))
        )
    return results


def written_counts(expectations: list[dict], keys: tuple[str, ...] = ()) -> list | None:
    """The counts of :func:`evaluate` as aggregate columns over the rows a batch writes, for
    ``DataFrame.observe`` (no job of their own; the counts of a run's batches add up), or None
    when a rule needs the whole increment at once (:meth:`RuleType.counted_per_batch`)."""
    from pyspark.sql import functions as F

    counts = [F.count(F.lit(1)).alias("rows")]
    for index, expectation in enumerate(expectations):
        rule, kwargs = rule_type(expectation), expectation["kwargs"]
        if rule.table_level:
            continue
        unexpected = rule.counted_per_batch(kwargs, keys)
        if unexpected is None:
            return None
        counts += [unexpected.alias(f"u{index}"), rule.considered(kwargs).alias(f"c{index}")]
    return counts


def _config(expectation: dict) -> dict:
    """The rule's ``expectation_config`` as GX's result JSON holds it."""
    # as GX omits them
    kwargs = {key: value for key, value in expectation["kwargs"].items() if value is not None}
    kwargs = {**rule_type(expectation).config_kwargs(kwargs), "batch_id": BATCH_ID}
    return {
        "type": expectation["type"],
        "kwargs": kwargs,
        "meta": expectation.get("meta", {}),
        "id": expectation.get("id") or str(uuid.uuid4()),
        "severity": expectation.get("severity", "critical"),
    }


def _result(expectation: dict, outcome: dict) -> dict:
    return {
        "success": outcome["success"],
        "expectation_config": _config(expectation),
        "result": outcome["result"],
        "meta": {},
        "exception_info": {
            "raised_exception": False,
            "exception_traceback": None,
            "exception_message": None,
        },
    }


def suite_result(suite: dict, results: list[dict], loaded: datetime.datetime) -> dict:
    """The suite's validation result as GX's ``to_json_dict()`` writes it."""
    passed = sum(1 for result in results if result["success"])
    return {
        "success": passed == len(results),
        "results": results,
        "suite_name": suite.get("name"),
        "suite_parameters": {},
        "statistics": {
            "evaluated_expectations": len(results),
            "successful_expectations": passed,
            "unsuccessful_expectations": len(results) - passed,
            "success_percent": passed / len(results) * 100 if results else None,
        },
        "meta": {
            "great_expectations_version": metadata.version("great_expectations"),
            "batch_spec": {"batch_data": "SparkDataFrame"},
            "batch_markers": {"ge_load_time": loaded.strftime("%Y%m%dT%H%M%S.%fZ")},
            "active_batch_definition": BATCH_DEFINITION,
        },
        "id": None,
    }


def without_run_identity(result: dict) -> dict:
    """A result JSON without what differs between two validations of the same data (the ids and
    the load time), as plain JSON: two checks of one increment compare equal."""
    result = json.loads(json.dumps(result, default=str))
    result.pop("id", None)
    result["meta"].get("batch_markers", {}).pop("ge_load_time", None)
    for outcome in result["results"]:
        outcome["expectation_config"].pop("id", None)
    return result
