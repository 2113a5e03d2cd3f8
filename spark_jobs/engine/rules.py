"""The rule types the quality gate's one pass evaluates itself
(:mod:`spark_jobs.engine.expectations`), one :class:`RuleType` each in :data:`RULES`:
which arguments it takes, when it takes a rule on a frame, how Spark marks and counts its
failing rows, and its result as GX writes it. A drop rule's row condition (:func:`passes`)
comes from here too. A new native rule type is a class here and its entry in :data:`RULES`;
``tests/spark/test_expectations.py`` compares the one pass with GX.
"""

from __future__ import annotations

import datetime
import decimal
import uuid

from spark_jobs.control.suites import EXAMPLES

_MOSTLY = frozenset({"mostly"})
_BOUNDS = frozenset({"min_value", "max_value", "strict_min", "strict_max"})
# a rule's fields the one pass writes as GX does
_FIELDS = {"type", "kwargs", "meta", "id", "severity"}
_NUMBER = (int, float)
_NUMERIC_TYPES = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")


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
    return (
        bool(given)
        and all(isinstance(b, kind) and not isinstance(b, bool) for b in given)
        and all(isinstance(flag, bool) for flag in flags)
        and (len(given) < 2 or given[0] <= given[1])
    )


def _within(value, kwargs: dict) -> bool:
    """Whether ``value`` (a Spark column or a number) lies within the rule's bounds; a Spark
    condition for a column."""
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    above = True if low is None else (value > low if kwargs.get("strict_min") else value >= low)
    below = True if high is None else (value < high if kwargs.get("strict_max") else value <= high)
    return above & below


class RuleType:
    """A rule type the one pass evaluates itself: its arguments (any other one sends the rule to
    GX), when it takes a rule on a frame of given column types, and how Spark counts its rows.
    This base is a column rule: each value meets a condition, nulls pass, and the failing rows'
    values are the examples."""

    arguments: frozenset[str] = frozenset()
    table_level = False  # counted on the increment as a whole (a row count), not row by row

    def __init__(self, name: str, arguments: set[str]):
        self.name = name
        self.arguments = frozenset(arguments) | _MOSTLY

    def accepts(self, kwargs: dict, types: dict[str, str]) -> bool:
        column = kwargs.get("column")
        return (
            isinstance(column, str)
            and column in types
            and self.accepts_column(kwargs, types[column])
        )

    def accepts_column(self, kwargs: dict, column_type: str) -> bool:
        return True

    def meets(self, kwargs: dict, column):
        """The Spark condition a non-null value of ``column`` meets."""
        raise NotImplementedError

    def passes(self, kwargs: dict):
        """A Spark condition true for the rows that meet the rule (as GX: nulls pass)."""
        from pyspark.sql import functions as F

        column = F.col(kwargs["column"])
        return column.isNull() | self.meets(kwargs, column)

    def marked(self, frame, kwargs: dict):
        """``(frame, condition)``: the condition marks the rows the rule counts as failing (GX's
        ``unexpected_condition``); some rules first add a column to the frame."""
        from pyspark.sql import functions as F

        column = F.col(kwargs["column"])
        return frame, column.isNotNull() & ~self.meets(kwargs, column)

    def considered(self, kwargs: dict):
        """The rows the rule's ``mostly`` is a share of: GX's non-null count."""
        from pyspark.sql import functions as F

        return F.count(F.col(kwargs["column"]))

    def counted_per_batch(self, kwargs: dict, keys: tuple[str, ...]):
        """Its failing-row count as an aggregate over the rows a batch writes (the batches' counts
        add up to the increment's), or None when it needs the whole increment at once."""
        from pyspark.sql import functions as F

        return F.sum(F.when(self.marked(None, kwargs)[1], 1).otherwise(0))

    def examples(self, marked, kwargs: dict, condition) -> list | None:
        """The first failing values GX's BASIC format lists (in the frame's order,
        as GX reads them).
        """
        name = kwargs["column"]
        return [
            _json_value(row[0])
            for row in marked.where(condition).select(name).limit(EXAMPLES).collect()
        ]

    def result(self, kwargs: dict, rows: int, considered, unexpected, examples) -> dict:
        """GX's ``_format_map_output`` in BASIC format."""
        nonnull = considered if rows else 0
        unexpected = self.unexpected_of(unexpected, rows)
        success = (
            unexpected is None
            or rows == 0
            or nonnull == 0
            or _mostly_success(nonnull, unexpected, kwargs.get("mostly", 1.0))
        )
        result = {
            "element_count": rows,
            "unexpected_count": unexpected,
            "unexpected_percent": None,
            "partial_unexpected_list": examples,
            "missing_percent": None,
            "unexpected_percent_total": None,
        }
        if unexpected is not None and rows > 0:
            result.update(
                unexpected_percent=unexpected / nonnull * 100 if nonnull > 0 else None,
                missing_percent=(rows - nonnull) / rows * 100,
                unexpected_percent_total=unexpected / rows * 100,
            )
        result.update(
            missing_count=rows - nonnull, unexpected_percent_nonmissing=result["unexpected_percent"]
        )
        return {"success": success, "result": result}

    def unexpected_of(self, unexpected, rows: int):
        return None if rows == 0 else unexpected  # GX sums a 0/1 flag per row: null over no rows

    def config_kwargs(self, kwargs: dict) -> dict:
        return kwargs


class _InSet(RuleType):
    def accepts_column(self, kwargs: dict, column_type: str) -> bool:
        values = kwargs.get("value_set")
        numeric, text = column_type.startswith(_NUMERIC_TYPES), column_type == "string"
        return (
            isinstance(values, list)
            and bool(values)
            and (
                (numeric and all(_is_number(value) for value in values))
                or (text and all(isinstance(v, str) for v in values))
            )
        )

    def meets(self, kwargs: dict, column):
        return column.isin(*kwargs["value_set"])


class _Between(RuleType):
    def accepts_column(self, kwargs: dict, column_type: str) -> bool:
        return column_type.startswith(_NUMERIC_TYPES) and _numeric_bounds(kwargs)

    def meets(self, kwargs: dict, column):
        from pyspark.sql import functions as F

        return F.lit(True) & _within(
            column,
            {
                key: value if value is None or key.startswith("strict") else F.lit(value)
                for key, value in kwargs.items()
            },
        )

    def config_kwargs(self, kwargs: dict) -> dict:
        return {
            **kwargs,
            **{
                key: float(kwargs[key])
                for key in ("min_value", "max_value")
                if kwargs.get(key) is not None
            },
        }


class _Regex(RuleType):
    def accepts_column(self, kwargs: dict, column_type: str) -> bool:
        return column_type == "string" and isinstance(kwargs.get("regex"), str)

    def meets(self, kwargs: dict, column):
        return column.rlike(kwargs["regex"])


class _NotNull(RuleType):
    """Every value present: the failing values are nulls, and ``mostly`` is a share of all rows."""

    def passes(self, kwargs: dict):
        from pyspark.sql import functions as F

        return F.col(kwargs["column"]).isNotNull()

    def marked(self, frame, kwargs: dict):
        from pyspark.sql import functions as F

        return frame, F.col(kwargs["column"]).isNull()

    def examples(self, marked, kwargs: dict, condition) -> list | None:
        return None  # the failing values are nulls: result() lists them

    def result(self, kwargs: dict, rows: int, considered, unexpected, examples) -> dict:
        success = rows == 0 or _mostly_success(rows, unexpected, kwargs.get("mostly", 1.0))
        return {
            "success": success,
            "result": {
                "element_count": rows,
                "unexpected_count": unexpected,
                "unexpected_percent": unexpected / rows * 100
                if unexpected is not None and rows > 0
                else None,
                "partial_unexpected_list": [None] * min(unexpected or 0, EXAMPLES),
            },
        }


class _CompoundUnique(RuleType):
    """No two rows share the values of ``column_list`` (rows whose columns are all
    null are left out).
    """

    def accepts(self, kwargs: dict, types: dict[str, str]) -> bool:
        columns = kwargs.get("column_list")
        return (
            isinstance(columns, list)
            and len(columns) >= 2
            and all(name in types for name in columns)
            and kwargs.get("ignore_row_if", "all_values_are_missing") == "all_values_are_missing"
        )

    def passes(self, kwargs: dict):
        raise ValueError(
            "a compound-unique rule holds for a whole frame, not for one row: it cannot drop rows"
        )

    def marked(self, frame, kwargs: dict):
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        columns = kwargs["column_list"]
        name = f"_gx_seen_{uuid.uuid4().hex[:8]}"
        # By the columns themselves (as GX's struct of them, nulls equal to nulls): a frame already
        # partitioned by them (gold's increment, by its keys) is not shuffled again.
        frame = frame.withColumn(name, F.count(F.lit(1)).over(Window.partitionBy(*columns)))
        return frame, ~_all_missing(columns) & (F.col(name) > 1)

    def considered(self, kwargs: dict):
        from pyspark.sql import functions as F

        return F.count(F.lit(1)) - F.sum(
            F.when(_all_missing(kwargs["column_list"]), 1).otherwise(0)
        )

    def counted_per_batch(self, kwargs: dict, keys: tuple[str, ...]):
        """None (the whole increment at once), except over exactly ``keys`` when the table holds
        each key once (a MERGE on them; each key's last change is the increment): no row fails."""
        from pyspark.sql import functions as F

        return F.sum(F.lit(0)) if keys and set(kwargs["column_list"]) == set(keys) else None

    def examples(self, marked, kwargs: dict, condition) -> list | None:
        rows = marked.where(condition).select(*kwargs["column_list"]).limit(EXAMPLES).collect()
        return [{name: _json_value(row[name]) for name in kwargs["column_list"]} for row in rows]

    def unexpected_of(self, unexpected, rows: int):
        return unexpected or 0  # GX counts the failing rows: 0 of none


class _RowCount(RuleType):
    """The increment's row count within bounds."""

    table_level = True

    def __init__(self, name: str, arguments: set[str]):
        super().__init__(name, arguments)
        self.arguments = frozenset(arguments)  # no mostly

    def accepts(self, kwargs: dict, types: dict[str, str]) -> bool:
        return _numeric_bounds(kwargs, integral=True)

    def table_result(self, kwargs: dict, rows: int) -> dict:
        return {"success": bool(_within(rows, kwargs)), "result": {"observed_value": rows}}


# Rule type -> how the one pass evaluates it; any other type goes to GX.
RULES: dict[str, RuleType] = {
    rule.name: rule
    for rule in (
        _NotNull("expect_column_values_to_not_be_null", {"column"}),
        _InSet("expect_column_values_to_be_in_set", {"column", "value_set"}),
        _Between("expect_column_values_to_be_between", {"column"} | _BOUNDS),
        _Regex("expect_column_values_to_match_regex", {"column", "regex"}),
        _CompoundUnique("expect_compound_columns_to_be_unique", {"column_list", "ignore_row_if"}),
        _RowCount("expect_table_row_count_to_be_between", set(_BOUNDS)),
    )
}


def rule_type(expectation: dict) -> RuleType:
    return RULES[expectation["type"]]


def passes(expectation: dict):
    """A Spark condition true for rows that meet a row-level rule (nulls pass all but
    not-null, as in GX).
    """
    return rule_type(expectation).passes(expectation["kwargs"])


def is_native(expectation: dict, types: dict[str, str]) -> bool:
    """Whether the rule is evaluated here on a frame with these column ``types`` (name -> simple
    type): a type of :data:`RULES`, only the arguments it evaluates (a row condition, a suite
    parameter, a description... send it to GX, whose JSON of them is GX's to write)."""
    rule, kwargs = RULES.get(expectation.get("type")), expectation.get("kwargs", {})
    return (
        rule is not None
        and set(expectation) <= _FIELDS
        and set(kwargs) <= rule.arguments
        and _plain_mostly(kwargs)
        and rule.accepts(kwargs, types)
    )


def _all_missing(columns: list[str]):
    from pyspark.sql import functions as F

    condition = F.col(columns[0]).isNull()
    for name in columns[1:]:
        condition = condition & F.col(name).isNull()
    return condition


def _mostly_success(considered: int, unexpected: int, mostly: float) -> bool:
    return (float(considered) - float(unexpected)) / float(considered) >= mostly


def _json_value(value):
    """A collected value as GX's JSON shows it."""
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    return value
