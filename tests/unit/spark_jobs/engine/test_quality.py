"""``spark_jobs/engine/quality.py``: a suite rule that Great Expectations itself refuses (a wrong or
missing argument) is one line naming the suite, the rule and GX's reason, not GX's traceback; a
valid suite builds. Real GX, no Spark."""

from __future__ import annotations

import pytest

from spark_jobs.model.errors import UsageError

NOT_NULL = {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "order_id"}}


def test_a_rule_gx_refuses_is_one_line_naming_the_suite_and_the_rule():
    import great_expectations as gx

    from spark_jobs.engine.quality import _gx_suite

    one_column = {
        "type": "expect_compound_columns_to_be_unique",
        "kwargs": {"column_list": ["order_id"]},
    }
    with pytest.raises(UsageError) as refused:
        _gx_suite(gx, {"name": "crm.gold_orders", "expectations": [NOT_NULL, one_column]})
    message = str(refused.value)
    assert "\n" not in message and message.startswith(
        "quality suite crm.gold_orders: GX refuses expect_compound_columns_to_be_unique(order_id): "
    )
    assert "at least two columns" in message and message.endswith(
        "fix the rule in the suite's file"
    )
    two_columns = {**one_column, "kwargs": {"column_list": ["order_id", "ordered_at"]}}
    assert (
        len(
            _gx_suite(
                gx, {"name": "crm.gold_orders", "expectations": [NOT_NULL, two_columns]}
            ).expectations
        )
        == 2
    )
