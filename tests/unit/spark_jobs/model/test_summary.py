"""``spark_jobs/model/summary.py``: a summary hop's ``measures`` read from a hop's raw keys (as a
spec's YAML gives them), in order, and refused with the fix on a hop of any other kind (no JVM)."""

from __future__ import annotations

import pytest

from spark_jobs.model.errors import UsageError
from spark_jobs.model.kinds import KINDS, SUMMARY
from spark_jobs.model.summary import hop_measures

pytestmark = pytest.mark.unit

SUBJECT = "team.yaml: hop s"


def test_a_summary_hops_measures_are_name_and_aggregate_pairs_in_the_order_written():
    raw = {
        "keys": ["tier"],
        # neither alphabetical nor by expression: the spec's order is the table's column order
        "measures": {"n": "count(*)", "last": "max(changed_at)", "amount": "sum(amount)"},
    }
    assert hop_measures(raw, SUMMARY, SUBJECT) == (
        ("n", "count(*)"),
        ("last", "max(changed_at)"),
        ("amount", "sum(amount)"),
    )
    # YAML reads a bare number as an int: the column is named by its text
    assert hop_measures({"keys": ["tier"], "measures": {1: "count(*)"}}, SUMMARY, SUBJECT) == (
        ("1", "count(*)"),
    )


def test_a_hop_of_any_other_kind_has_no_measures_and_is_refused_one():
    others = [kind for kind in KINDS.values() if not kind.reads_changes]
    assert others and SUMMARY not in others
    for kind in others:
        assert hop_measures({"keys": ["tier"]}, kind, SUBJECT) == ()
        for measures in ({"n": "count(*)"}, {}):
            with pytest.raises(UsageError) as refused:
                hop_measures({"measures": measures}, kind, SUBJECT)
            assert str(refused.value) == (
                f"{SUBJECT} (kind {kind.name}) has measures, which only a summary hop takes: "
                "remove it"
            )


def test_a_summary_hop_without_measures_or_keys_is_refused_with_the_fix():
    for measures in (None, {}, ["count(*)"], "count(*)"):
        # measures are asked for first, keys or not
        with pytest.raises(UsageError) as refused:
            hop_measures({"measures": measures}, SUMMARY, SUBJECT)
        assert str(refused.value) == (
            f"{SUBJECT} (kind summary) lacks measures: add each column and the Spark SQL "
            "aggregate that makes it from a group's current rows (`measures: {customers: "
            "count(*)}`)"
        )
    for keys in (None, []):
        with pytest.raises(UsageError, match=r"\(kind summary\) lacks keys: add the columns"):
            hop_measures({"keys": keys, "measures": {"n": "count(*)"}}, SUMMARY, SUBJECT)


def test_a_measure_that_is_not_an_aggregates_text_is_refused_by_name():
    for expression in (None, "  ", 3):
        raw = {"keys": ["tier"], "measures": {"n": "count(*)", "bad": expression}}
        with pytest.raises(UsageError) as refused:
            hop_measures(raw, SUMMARY, SUBJECT)
        assert str(refused.value) == (
            f"{SUBJECT} has measure bad {expression!r}: give a Spark SQL aggregate, e.g. "
            "`count(*)` or `max(changed_at)`"
        )
