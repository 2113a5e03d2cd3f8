"""The common Great Expectations rules evaluated by Spark in one pass (docs/concepts/quality-gates.md).

GX 1.x computes each rule's metrics as Spark jobs of their own (0.3 to 0.6 s per rule, whatever
the size) and costs about 6 s to import. The rules a suite usually holds, the :data:`NATIVE`
ones, are evaluated here instead: every count in one aggregation over the increment, plus one
small job per failing rule for its first failing values. The results have GX's own shape
(``ExpectationSuiteValidationResult.to_json_dict()`` in BASIC format, GX's order of rules), so
the summaries, the result JSON and the Data Docs pages are what GX writes for the same data
(``tests/test_expectations.py`` compares the two on random frames and suites). Rules outside
:data:`NATIVE`, or naming a column the frame lacks, go to GX (:mod:`spark_jobs.engine.quality`).
"""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
from collections.abc import Callable
from importlib import metadata

from spark_jobs.control.suites import EXAMPLES

BATCH_ID = "lakehouse-increment"  # GX's id of the whole-dataframe batch quality.validate_frame builds
BATCH_DEFINITION = {"datasource_name": "lakehouse", "data_connector_name": "fluent", "data_asset_name": "increment",
                    "batch_identifiers": {"dataframe": "<DATAFRAME>"}}
_MOSTLY = {"mostly"}
# Rule type -> the keyword arguments evaluated here; any other argument (row_condition, a suite
# parameter, ignore_row_if other than its default) sends the rule to GX.
NATIVE = {
    "expect_column_values_to_not_be_null": {"column"} | _MOSTLY,
    "expect_column_values_to_be_in_set": {"column", "value_set"} | _MOSTLY,
    "expect_column_values_to_be_between": {"column", "min_value", "max_value", "strict_min", "strict_max"} | _MOSTLY,
    "expect_column_values_to_match_regex": {"column", "regex"} | _MOSTLY,
    "expect_compound_columns_to_be_unique": {"column_list", "ignore_row_if"} | _MOSTLY,
    "expect_table_row_count_to_be_between": {"min_value", "max_value", "strict_min", "strict_max"},
}
_FIELDS = {"type", "kwargs", "meta", "id", "severity"}  # a rule's fields the one pass writes as GX does
_NUMBER = (int, float)
_NUMERIC_TYPES = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")


def passes(expectation: dict):
    """A Spark condition true for rows that meet a row-level rule (nulls pass all but not-null, as in GX)."""
    from pyspark.sql import functions as F

    kwargs = expectation["kwargs"]
    column = F.col(kwargs["column"])
    kind = expectation["type"]
    if kind == "expect_column_values_to_not_be_null":
        return column.isNotNull()
    if kind == "expect_column_values_to_be_in_set":
        condition = column.isin(*kwargs["value_set"])
    elif kind == "expect_column_values_to_be_between":
        condition = F.lit(True)
        if kwargs.get("min_value") is not None:
            low = F.lit(kwargs["min_value"])
            condition = condition & (column > low if kwargs.get("strict_min") else column >= low)
        if kwargs.get("max_value") is not None:
            high = F.lit(kwargs["max_value"])
            condition = condition & (column < high if kwargs.get("strict_max") else column <= high)
    else:  # expect_column_values_to_match_regex
        condition = column.rlike(kwargs["regex"])
    return column.isNull() | condition


def is_native(expectation: dict, types: dict[str, str]) -> bool:
    """Whether the rule is evaluated here on a frame with these column ``types`` (name -> simple type)."""
    kind, kwargs = expectation.get("type"), expectation.get("kwargs", {})
    if not set(expectation) <= _FIELDS or kind not in NATIVE or not set(kwargs) <= NATIVE[kind] \
            or not _plain_mostly(kwargs):
        return False  # a description, notes, a row condition...: GX's own JSON of them is GX's to write
    if kind == "expect_table_row_count_to_be_between":
        return _numeric_bounds(kwargs, integral=True)
    if kind == "expect_compound_columns_to_be_unique":
        columns = kwargs.get("column_list")
        return (isinstance(columns, list) and len(columns) >= 2 and all(name in types for name in columns)
                and kwargs.get("ignore_row_if", "all_values_are_missing") == "all_values_are_missing")
    column = kwargs.get("column")
    if not isinstance(column, str) or column not in types:
        return False
    numeric, text = types[column].startswith(_NUMERIC_TYPES), types[column] == "string"
    if kind == "expect_column_values_to_be_in_set":
        values = kwargs.get("value_set")
        return isinstance(values, list) and bool(values) and (
            (numeric and all(_is_number(value) for value in values)) or (text and all(isinstance(v, str) for v in values)))
    if kind == "expect_column_values_to_be_between":
        return numeric and _numeric_bounds(kwargs)
    if kind == "expect_column_values_to_match_regex":
        return text and isinstance(kwargs.get("regex"), str)
    return True


def _is_number(value) -> bool:
    return isinstance(value, _NUMBER) and not isinstance(value, bool)


def _plain_mostly(kwargs: dict) -> bool:
    mostly = kwargs.get("mostly", 1.0)
    return _is_number(mostly) and 0 <= mostly <= 1


def _numeric_bounds(kwargs: dict, integral: bool = False) -> bool:
    bounds = [kwargs.get("min_value"), kwargs.get("max_value")]
    flags = [kwargs.get("strict_min", False), kwargs.get("strict_max", False)]
    kind = int if integral else _NUMBER
    given = [bound for bound in bounds if bound is not None]
    return (bool(given) and all(isinstance(b, kind) and not isinstance(b, bool) for b in given)
            and all(isinstance(flag, bool) for flag in flags) and (len(given) < 2 or given[0] <= given[1]))


def in_gx_order(expectations: list[dict]) -> list[dict]:
    """The rules in the order GX validates and reports them: grouped by their ``column``
    argument, groups in order of first appearance, the rules without a column as one group."""
    groups: dict[object, list[dict]] = {}
    for expectation in expectations:
        column = expectation.get("kwargs", {}).get("column")
        groups.setdefault(column if isinstance(column, str) else None, []).append(expectation)
    return [expectation for group in groups.values() for expectation in group]


# -- evaluation --------------------------------------------------------------------------------

def _all_missing(columns: list[str]):
    from pyspark.sql import functions as F

    condition = F.col(columns[0]).isNull()
    for name in columns[1:]:
        condition = condition & F.col(name).isNull()
    return condition


def _unexpected(expectation: dict, frame):
    """``(frame, condition)``: the condition marks the rows the rule counts as failing (GX's
    ``unexpected_condition``); a compound-unique rule first adds its window count to the frame."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    kwargs = expectation["kwargs"]
    if expectation["type"] == "expect_compound_columns_to_be_unique":
        columns = kwargs["column_list"]
        name = f"_gx_seen_{uuid.uuid4().hex[:8]}"
        # By the columns themselves (as GX's struct of them, nulls equal to nulls): a frame already
        # partitioned by them (gold's increment, by its keys) is not shuffled again.
        frame = frame.withColumn(name, F.count(F.lit(1)).over(Window.partitionBy(*columns)))
        return frame, ~_all_missing(columns) & (F.col(name) > 1)
    column = F.col(kwargs["column"])
    if expectation["type"] == "expect_column_values_to_not_be_null":
        return frame, column.isNull()
    return frame, column.isNotNull() & ~passes(expectation)


def evaluate(frame, expectations: list[dict]) -> tuple[int, list[dict]]:
    """``(rows, results)``: the row count of ``frame`` and GX's result dict for each native rule,
    in the order given. One aggregation computes every count; a failing rule then reads up to
    :data:`EXAMPLES` of its failing values."""
    from pyspark.sql import functions as F

    marked, counts, conditions = frame, [F.count(F.lit(1)).alias("rows")], []
    for index, expectation in enumerate(expectations):
        if expectation["type"] == "expect_table_row_count_to_be_between":
            conditions.append(None)
            continue
        marked, condition = _unexpected(expectation, marked)
        conditions.append(condition)
        counts.append(F.sum(F.when(condition, 1).otherwise(0)).alias(f"u{index}"))
        counts.append(_considered(expectation).alias(f"c{index}"))
    totals = marked.agg(*counts).first().asDict()
    return totals["rows"], results_of(expectations, totals,
                                      lambda index: _examples(marked, expectations[index], conditions[index]))


def results_of(expectations: list[dict], totals: dict, examples: Callable[[int], list | None]) -> list[dict]:
    """GX's result dict for each rule from its counts (``rows``, ``u<i>`` failing, ``c<i>``
    considered); ``examples(i)`` gives rule i's first failing values, asked only when it has some."""
    results = []
    for index, expectation in enumerate(expectations):
        unexpected, considered = totals.get(f"u{index}"), totals.get(f"c{index}")
        if expectation["type"] == "expect_table_row_count_to_be_between":
            results.append(_result(expectation, _between_result(expectation, totals["rows"])))
            continue
        found = examples(index) if unexpected else []
        results.append(_result(expectation, _map_result(expectation, totals["rows"], considered, unexpected, found)))
    return results


def written_counts(expectations: list[dict], keys: tuple[str, ...] = ()) -> list | None:
    """The counts of :func:`evaluate` as aggregate columns over the rows a batch writes, for
    ``DataFrame.observe`` (no job of their own; the counts of a run's batches add up), or None
    when a rule needs the whole increment at once: a compound-unique rule, except over exactly
    ``keys`` when the table holds each key once (a MERGE on them; each key's last change is the
    increment, so no row fails it)."""
    from pyspark.sql import functions as F

    counts = [F.count(F.lit(1)).alias("rows")]
    for index, expectation in enumerate(expectations):
        kind = expectation["type"]
        if kind == "expect_table_row_count_to_be_between":
            continue
        if kind == "expect_compound_columns_to_be_unique":
            if not keys or set(expectation["kwargs"]["column_list"]) != set(keys):
                return None
            unexpected = F.sum(F.lit(0))
        else:
            unexpected = F.sum(F.when(_unexpected(expectation, None)[1], 1).otherwise(0))
        counts += [unexpected.alias(f"u{index}"), _considered(expectation).alias(f"c{index}")]
    return counts


def _considered(expectation: dict):
    """The rows the rule's ``mostly`` is a share of: GX's non-null count, or for a compound rule
    its rows not ignored (all of its columns null)."""
    from pyspark.sql import functions as F

    kwargs = expectation["kwargs"]
    if expectation["type"] == "expect_compound_columns_to_be_unique":
        return F.count(F.lit(1)) - F.sum(F.when(_all_missing(kwargs["column_list"]), 1).otherwise(0))
    return F.count(F.col(kwargs["column"]))


def _examples(marked, expectation: dict, condition) -> list:
    """The first failing values GX's BASIC format lists (in the frame's order, as GX reads them)."""
    kwargs = expectation["kwargs"]
    if expectation["type"] == "expect_column_values_to_not_be_null":
        return None  # filled in by _map_result: the failing values are nulls
    if expectation["type"] == "expect_compound_columns_to_be_unique":
        rows = marked.where(condition).select(*kwargs["column_list"]).limit(EXAMPLES).collect()
        return [{name: _json_value(row[name]) for name in kwargs["column_list"]} for row in rows]
    name = kwargs["column"]
    return [_json_value(row[0]) for row in marked.where(condition).select(name).limit(EXAMPLES).collect()]


def _mostly_success(considered: int, unexpected: int, mostly: float) -> bool:
    return (float(considered) - float(unexpected)) / float(considered) >= mostly


def _map_result(expectation: dict, rows: int, considered, unexpected, examples) -> dict:
    """GX's ``_format_map_output`` in BASIC format for a column or compound map rule."""
    mostly = expectation["kwargs"].get("mostly", 1.0)
    not_null = expectation["type"] == "expect_column_values_to_not_be_null"
    if not_null:
        examples = [None] * min(unexpected or 0, EXAMPLES)
        success = rows == 0 or _mostly_success(rows, unexpected, mostly)
        nonnull = None
    else:
        nonnull = considered if rows else 0
        if expectation["type"] == "expect_compound_columns_to_be_unique":
            unexpected = unexpected or 0  # GX counts the failing rows: 0 of none
        elif rows == 0:
            unexpected = None  # GX sums a 0/1 flag per row: null over no rows
        success = unexpected is None or rows == 0 or nonnull == 0 or _mostly_success(nonnull, unexpected, mostly)
    result = {"element_count": rows, "unexpected_count": unexpected, "unexpected_percent": None,
              "partial_unexpected_list": examples}
    if unexpected is not None and rows > 0:
        total = unexpected / rows * 100
        result["unexpected_percent"] = total
        if nonnull is not None:
            result["unexpected_percent"] = unexpected / nonnull * 100 if nonnull > 0 else None
            result.update(missing_percent=(rows - nonnull) / rows * 100, unexpected_percent_total=total)
    if nonnull is not None:
        result.setdefault("missing_percent", None)
        result.setdefault("unexpected_percent_total", None)
        result.update(missing_count=rows - nonnull, unexpected_percent_nonmissing=result["unexpected_percent"])
    return {"success": success, "result": result}


def _between_result(expectation: dict, rows: int) -> dict:
    kwargs = expectation["kwargs"]
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    above = low is None or (rows > low if kwargs.get("strict_min") else rows >= low)
    below = high is None or (rows < high if kwargs.get("strict_max") else rows <= high)
    return {"success": bool(above and below), "result": {"observed_value": rows}}


def _json_value(value):
    """A collected value as GX's JSON shows it."""
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    return value


def _config(expectation: dict) -> dict:
    """The rule's ``expectation_config`` as GX's result JSON holds it."""
    kwargs = {key: value for key, value in expectation["kwargs"].items() if value is not None}  # as GX omits them
    kwargs["batch_id"] = BATCH_ID
    if expectation["type"] == "expect_column_values_to_be_between":
        kwargs.update({key: float(kwargs[key]) for key in ("min_value", "max_value") if kwargs.get(key) is not None})
    return {"type": expectation["type"], "kwargs": kwargs, "meta": expectation.get("meta", {}),
            "id": expectation.get("id") or str(uuid.uuid4()), "severity": expectation.get("severity", "critical")}


def _result(expectation: dict, outcome: dict) -> dict:
    return {"success": outcome["success"], "expectation_config": _config(expectation), "result": outcome["result"],
            "meta": {}, "exception_info": {"raised_exception": False, "exception_traceback": None,
                                           "exception_message": None}}


def suite_result(suite: dict, results: list[dict], loaded: datetime.datetime) -> dict:
    """The suite's validation result as GX's ``to_json_dict()`` writes it."""
    passed = sum(1 for result in results if result["success"])
    return {
        "success": passed == len(results),
        "results": results,
        "suite_name": suite.get("name"),
        "suite_parameters": {},
        "statistics": {"evaluated_expectations": len(results), "successful_expectations": passed,
                       "unsuccessful_expectations": len(results) - passed,
                       "success_percent": passed / len(results) * 100 if results else None},
        "meta": {"great_expectations_version": metadata.version("great_expectations"),
                 "batch_spec": {"batch_data": "SparkDataFrame"},
                 "batch_markers": {"ge_load_time": loaded.strftime("%Y%m%dT%H%M%S.%fZ")},
                 "active_batch_definition": BATCH_DEFINITION},
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
