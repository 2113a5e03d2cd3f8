"""``spark_jobs/model/spec_checks.py``: the checks of one hop's keys and of the pipeline's trigger,
as the spec loader meets them in spec files written here (no JVM). The refusals
``tests/unit/spark_jobs/model/test_spec.py`` already covers (a topic with a landing folder, a bad
pattern, a join of one hop, an unknown trigger...) are not repeated."""

from __future__ import annotations

import pytest

from spark_jobs.model.errors import UsageError
from spark_jobs.model.spec import load_spec
from spark_jobs.model.spec_checks import check_trigger

pytestmark = pytest.mark.unit

INGEST = "{name: a, kind: ingest, table: tables/a, time_column: t%s}"


def _spec(folder, *hops: str, top: str = ""):
    """A spec file ``team.yaml`` in ``folder`` with these pipeline keys and hops; its path."""
    path = folder / "team.yaml"
    lines = "".join(f"  - {hop}\n" for hop in hops)
    path.write_text(f"name: team\nlanding: landing/team\n{top}hops:\n{lines}")
    return path


def _refusal(path) -> str:
    with pytest.raises(UsageError) as refused:
        load_spec(path)
    message = str(refused.value)
    assert "\n" not in message
    return message


def test_zorder_columns_that_are_partition_columns_are_refused_and_named(tmp_path):
    path = _spec(
        tmp_path, INGEST % ", partition_by: [day, region], zorder_by: [ad_id, region, day]"
    )
    assert _refusal(path) == (
        f"{path}: hop a has zorder_by ['region', 'day'], which it partitions by too: each file "
        "holds one value of a partition column already; remove them from zorder_by"
    )
    # other columns are Z-ordered as given
    path = _spec(tmp_path, INGEST % ", partition_by: [day], zorder_by: [ad_id, user_id]")
    assert load_spec(path).hop("a").zorder_by == ("ad_id", "user_id")


def test_a_topic_fed_hop_with_an_upstream_is_told_to_remove_it(tmp_path):
    """A topic-fed hop is an ingest hop: the topic (or pattern) is its one source."""
    reader = "{name: b, kind: ingest, %s, upstream: a, table: tables/b, time_column: t}"
    path = _spec(tmp_path, INGEST % "", reader % "topic: events")
    assert _refusal(path) == (
        f"{path}: hop b reads topic 'events', not 'a': remove its upstream key"
    )
    path = _spec(tmp_path, INGEST % "", reader % "topic_pattern: 'orders-.*'")
    assert _refusal(path) == (
        f"{path}: hop b reads topic_pattern 'orders-.*', not 'a': remove its upstream key"
    )


def test_a_join_of_one_hop_with_itself_is_refused(tmp_path):
    """Two upstream names that are the same hop are one table: a join needs two different ones,
    even with a bound given."""
    join = (
        "{name: c, kind: join, upstream: [a, a], within: 1 hour, table: tables/c, time_column: t}"
    )
    path = _spec(tmp_path, INGEST % "", join)
    assert _refusal(path).startswith(
        f"{path}: hop c (kind join) needs `upstream: [<hop>, <hop>]` (two or more different hops "
        "above it)"
    )


def test_the_trigger_gives_the_intervals_that_bound_the_runs_of_a_rollback_window():
    """On a schedule: none (the schedule counts the runs). On arrival: ``min_interval`` (a minute
    when not given) and ``max_wait`` when given, in milliseconds."""
    where = "team.yaml: the pipeline"
    assert check_trigger({}, where) == ()
    assert check_trigger({"trigger": "schedule", "schedule": "*/5 * * * *"}, where) == ()
    assert check_trigger({"trigger": "arrival"}, where) == (60 * 1000,)
    assert check_trigger(
        {"trigger": "arrival", "min_interval": "10 minutes", "max_wait": "2 hours"}, where
    ) == (10 * 60 * 1000, 2 * 3600 * 1000)


@pytest.mark.parametrize(
    "raw, problem",
    [
        (
            {"max_wait": "1 hour"},
            "has max_wait without `trigger: arrival`: add the trigger or remove max_wait",
        ),
        (
            {"trigger": "arrival", "min_interval": "0 seconds", "max_wait": "1 hour"},
            "has min_interval '0 seconds': give a min_interval above 0 (e.g. `5 minutes`)",
        ),
    ],
    ids=["max-wait-on-a-schedule", "zero-min-interval"],
)
def test_a_trigger_interval_that_cannot_apply_is_refused_with_the_fix(raw, problem):
    with pytest.raises(UsageError) as refused:
        check_trigger(raw, "team.yaml: the pipeline")
    assert str(refused.value) == f"team.yaml: the pipeline {problem}"
