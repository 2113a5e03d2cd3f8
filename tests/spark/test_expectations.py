"""The one-pass evaluation of a suite's common rules against Great Expectations itself.

GX is the oracle: on random frames (sizes, null shares and column types drawn per seed) and
random suites of the rules ``spark_jobs.engine.expectations`` evaluates, our result JSON must
equal the one GX computes on the same frame, field for field (only ids and load times differ).
A seed that ever disagreed stays in SEEDS.
"""

from __future__ import annotations

import copy
import datetime
import decimal
import random
import re

import pytest

from spark_jobs.engine import quality
from spark_jobs.engine.expectations import without_run_identity
from spark_jobs.engine.rules import RULES, is_native

pytestmark = [pytest.mark.spark, pytest.mark.quality]

SEEDS = [1, 2, 3, 4, 11, 16]
SCHEMA = (
    "id long, name string, score double, amount decimal(10,2), at timestamp, k1 string, k2 long"
)
WORDS = ["view", "click", "purchase", "ad-1", "ad-22", "x"]


def _frame(spark, rng: random.Random):
    share = rng.choice([0.0, 0.03, 0.2])
    size = rng.choice([0, 1, 7, 30, 60])

    def maybe(value):
        return None if rng.random() < share else value

    rows = [
        (
            maybe(rng.randint(-5, 40)),
            maybe(rng.choice(WORDS)),
            maybe(rng.uniform(-1, 10)),
            maybe(decimal.Decimal(rng.randint(0, 9999)) / 100),
            maybe(
                datetime.datetime(2026, 4, 2) + datetime.timedelta(seconds=rng.randint(0, 86400))
            ),
            maybe(rng.choice("abc")),
            maybe(rng.randint(0, 3)),
        )
        for _ in range(size)
    ]
    return spark.createDataFrame(rows, SCHEMA)


def _rule(rng: random.Random) -> dict:
    kind = rng.choice(sorted(RULES))
    number = rng.choice(["id", "score", "amount", "k2"])
    if kind == "expect_column_values_to_not_be_null":
        kwargs = {"column": rng.choice(["id", "name", "score", "amount", "at", "k1", "k2"])}
    elif kind == "expect_column_values_to_be_in_set":
        kwargs = (
            {"column": "name", "value_set": rng.sample(WORDS, rng.randint(1, 4))}
            if rng.random() < 0.5
            else {
                "column": rng.choice(["id", "k2"]),
                "value_set": rng.sample(range(-2, 30), rng.randint(1, 20)),
            }
        )
    elif kind == "expect_column_values_to_be_between":
        low = rng.choice([None, rng.randint(-3, 5), rng.uniform(-1, 3)])
        high = rng.choice([None, rng.randint(5, 40)]) if low is not None else rng.randint(5, 40)
        kwargs = {"column": number, "min_value": low, "max_value": high}
        kwargs.update({flag: True for flag in ("strict_min", "strict_max") if rng.random() < 0.3})
    elif kind == "expect_column_values_to_match_regex":
        kwargs = {"column": "name", "regex": rng.choice(["^ad-", "^[a-z]+$", "\\d\\d", "ck"])}
    elif kind == "expect_compound_columns_to_be_unique":
        kwargs = {"column_list": rng.choice([["k1", "k2"], ["k1", "name"], ["k2", "id", "k1"]])}
    else:
        kwargs = {
            "min_value": rng.randint(0, 10),
            "max_value": rng.choice([None, rng.randint(10, 50)]),
        }
    if kind != "expect_table_row_count_to_be_between" and rng.random() < 0.3:
        kwargs["mostly"] = rng.choice([0.5, 0.8, 0.95])
    return {"type": kind, "kwargs": kwargs, "meta": {"policy": rng.choice(["warn", "fail"])}}


@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed{seed}" for seed in SEEDS])
def test_one_pass_equals_great_expectations(spark, seed):
    rng = random.Random(seed)
    print(f"seed {seed}")
    frame = _frame(spark, rng)
    suite = {"name": f"random.{seed}", "expectations": [_rule(rng) for _ in range(6)], "meta": {}}
    types = dict(frame.dtypes)
    # all evaluated in one pass
    assert all(is_native(rule, types) for rule in suite["expectations"]), suite
    rows, ours = quality.validate(frame, copy.deepcopy(suite))
    assert rows == frame.count()
    theirs = quality.validate_frame(frame, copy.deepcopy(suite))
    assert without_run_identity(ours) == without_run_identity(theirs), suite


def test_rules_beyond_the_one_pass_go_to_great_expectations_in_its_order(spark, tmp_path):
    """A rule we do not evaluate (a mean) and one on a missing column go to GX; the results come in
    GX's own order (the failed metric first, then by column), summarized and rendered as GX's."""
    rows = [(n, f"u{n % 3}" if n % 4 else None, float(n)) for n in range(20)]
    frame = spark.createDataFrame(rows, "id long, user string, score double")
    suite = {
        "name": "mixed",
        "meta": {},
        "expectations": [
            {
                "type": "expect_table_row_count_to_be_between",
                "kwargs": {"min_value": 1, "max_value": 10},
                "meta": {"policy": "warn"},
            },
            {
                "type": "expect_column_values_to_not_be_null",
                "kwargs": {"column": "user"},
                "meta": {"policy": "fail"},
            },
            {
                "type": "expect_column_mean_to_be_between",
                "kwargs": {"column": "score", "min_value": 0, "max_value": 5},
                "meta": {"policy": "warn"},
            },
            {
                "type": "expect_column_values_to_not_be_null",
                "kwargs": {"column": "missing"},
                "meta": {"policy": "fail"},
            },
            {
                "type": "expect_column_values_to_be_between",
                "kwargs": {"column": "id", "min_value": 3},
                "meta": {"policy": "fail"},
            },
        ],
    }
    types = dict(frame.dtypes)
    assert [is_native(rule, types) for rule in suite["expectations"]] == [
        True,
        True,
        False,
        False,
        True,
    ]
    count, ours = quality.validate(frame, copy.deepcopy(suite))
    gx_object = quality.gx_validation(frame, copy.deepcopy(suite))
    assert count == 20 and without_run_identity(ours) == without_run_identity(
        gx_object.to_json_dict()
    )
    order = [
        (
            outcome["expectation_config"]["type"],
            outcome["expectation_config"]["kwargs"].get("column"),
        )
        for outcome in ours["results"]
    ]
    # its metric failed: GX lists it first
    assert order[0] == ("expect_column_values_to_not_be_null", "missing")

    summary = {rule["rule"]: rule for rule in quality.summarize(ours)}
    nulls = sum(1 for row in rows if row[1] is None)
    assert summary["expect_column_values_to_not_be_null(user)"]["failing"] == nulls
    assert summary["expect_column_values_to_not_be_null(user)"]["examples"] == [None] * min(
        nulls, 5
    )
    assert summary["expect_column_values_to_be_between(id)"]["examples"] == [0, 1, 2]
    assert summary["expect_table_row_count_to_be_between()"]["observed"] == 20
    assert (
        summary["expect_column_mean_to_be_between(score)"]["observed"]
        == sum(row[2] for row in rows) / 20
    )
    assert "missing" in summary["expect_column_values_to_not_be_null(missing)"]["error"]

    # The Data Docs page rendered from our JSON is GX's page of its own result object.
    from spark_jobs.logs.fs import write_json

    page = quality.render_data_docs(
        write_json(str(tmp_path), "ours.result.json", ours), str(tmp_path / "ours.html")
    )
    # Both as the page is served: offline (no CDN), and with the run named as ours is.
    from great_expectations.core.run_identifier import RunIdentifier
    from great_expectations.render.renderer import ValidationResultsPageRenderer
    from great_expectations.render.view import DefaultJinjaPageView

    gx_object.meta["run_id"] = RunIdentifier(run_name="ours", run_time=None)
    theirs = quality.offline_page(
        DefaultJinjaPageView().render(ValidationResultsPageRenderer().render(gx_object))
    )
    ours_page = re.sub(r"Run Time</div></td><td[^>]*><div[^>]*>[^<]*", "", open(page).read())
    assert _page_text(ours_page) == _page_text(
        re.sub(r"Run Time</div></td><td[^>]*><div[^>]*>[^<]*", "", theirs)
    )


def _page_text(html: str) -> str:
    """A page without what differs between two validations: times, ids, load markers."""
    html = re.sub(r"\d{8}T\d{6}\.\d+Z", "<time>", html)
    html = re.sub(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(\+00:00|Z)?", "<time>", html)
    return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", html)


TYPES = {"id": "bigint", "name": "string", "amount": "decimal(10,2)", "at": "timestamp"}
CHOICES = {  # rule -> evaluated in the one pass (else GX evaluates it)
    "not-null": ({"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "at"}}, True),
    "not-null-missing-column": (
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "nope"}},
        False,
    ),
    "with-notes": (
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "id"}, "notes": "n"},
        False,
    ),
    "row-condition": (
        {
            "type": "expect_column_values_to_not_be_null",
            "kwargs": {"column": "id", "row_condition": "id > 1", "condition_parser": "spark"},
        },
        False,
    ),
    "mostly-above-1": (
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "id", "mostly": 2}},
        False,
    ),
    "between-decimal": (
        {
            "type": "expect_column_values_to_be_between",
            "kwargs": {"column": "amount", "min_value": 0, "max_value": 9.5},
        },
        True,
    ),
    "between-timestamp": (
        {
            "type": "expect_column_values_to_be_between",
            "kwargs": {"column": "at", "min_value": "2026-01-01"},
        },
        False,
    ),
    "between-no-bounds": (
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "id"}},
        False,
    ),
    "between-min-above-max": (
        {
            "type": "expect_column_values_to_be_between",
            "kwargs": {"column": "id", "min_value": 5, "max_value": 1},
        },
        False,
    ),
    "in-set-strings-on-numbers": (
        {
            "type": "expect_column_values_to_be_in_set",
            "kwargs": {"column": "id", "value_set": ["1"]},
        },
        False,
    ),
    "in-set-strings": (
        {
            "type": "expect_column_values_to_be_in_set",
            "kwargs": {"column": "name", "value_set": ["a", "b"]},
        },
        True,
    ),
    "regex-on-number": (
        {"type": "expect_column_values_to_match_regex", "kwargs": {"column": "id", "regex": "1"}},
        False,
    ),
    "unique-pair": (
        {"type": "expect_compound_columns_to_be_unique", "kwargs": {"column_list": ["id", "name"]}},
        True,
    ),
    "unique-any-missing": (
        {
            "type": "expect_compound_columns_to_be_unique",
            "kwargs": {"column_list": ["id", "name"], "ignore_row_if": "any_value_is_missing"},
        },
        False,
    ),
    "row-count": (
        {"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 1}},
        True,
    ),
    "mean": (
        {"type": "expect_column_mean_to_be_between", "kwargs": {"column": "id", "min_value": 1}},
        False,
    ),
}


@pytest.mark.unit
@pytest.mark.parametrize("name", list(CHOICES))
def test_which_rules_the_one_pass_evaluates(name):
    rule, native = CHOICES[name]
    assert is_native(rule, TYPES) is native
