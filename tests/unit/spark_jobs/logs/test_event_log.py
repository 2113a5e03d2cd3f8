"""``spark_jobs/logs/event_log.py``: the event log table as delta-rs writes and reads it (no
JVM). Random events of two pipelines go in over several appends; random filters must return what
a plain-Python filter of the same events returns, in time order; an append of what is there adds
nothing; sequences number each pipeline's events 1..n."""

from __future__ import annotations

import random

import pytest

from spark_jobs.logs import event_log
from spark_jobs.logs.event_log import Event, Filter

pytestmark = pytest.mark.unit

TYPES = ("run_started", "batch", "run_finished", "gate", "refused")
LEVELS = ("INFO", "WARN", "ERROR")


def _events(rng: random.Random, count: int) -> list[Event]:
    drawn = []
    for number in range(count):
        pipeline = rng.choice(("one", "two"))
        drawn.append(
            Event(
                f"{pipeline}/e{number}",
                1_700_000_000 + rng.randrange(10_000) + rng.random(),
                pipeline,
                rng.choice(TYPES),
                f"message {number}",
                level=rng.choice(LEVELS),
                hop=rng.choice(("bronze", "silver", None)),
                batch=rng.choice((None, 0, 1)),
                run_id=rng.choice(("r1", "r2", None)),
                details={"number": number},
            )
        )
    return drawn


def _matches(event: Event, where: Filter) -> bool:
    levels = LEVELS[LEVELS.index(where.level) :] if where.level else LEVELS
    return (
        (where.pipeline is None or event.pipeline == where.pipeline)
        and (where.hop is None or event.hop == where.hop)
        and (not where.event_types or event.event_type in where.event_types)
        and event.level in levels
        and (where.since_s is None or event.at >= where.since_s)
        and (where.until_s is None or event.at < where.until_s)
        and (where.run_id is None or event.run_id == where.run_id)
    )


@pytest.mark.parametrize("seed", [1, 5])
def test_random_filters_return_what_a_plain_filter_of_the_events_returns(tmp_path, seed):
    rng = random.Random(seed)
    table = str(tmp_path / "_ops" / "events")
    drawn = _events(rng, 120)
    for start in range(0, len(drawn), 40):  # three appends
        chunk = drawn[start : start + 40]
        for pipeline in ("one", "two"):
            mine = [event for event in chunk if event.pipeline == pipeline]
            assert event_log.append_missing(table, pipeline, mine) == len(mine)
    for pipeline in ("one", "two"):
        mine = [event for event in drawn if event.pipeline == pipeline]
        assert event_log.append_missing(table, pipeline, mine) == 0  # all there already
        numbers = sorted(row["sequence"] for row in event_log.read(table, Filter(pipeline)))
        assert numbers == list(range(1, len(mine) + 1))
    for _ in range(40):
        since = 1_700_000_000 + rng.randrange(10_000) if rng.random() < 0.4 else None
        where = Filter(
            pipeline=rng.choice(("one", "two", None)),
            hop=rng.choice(("bronze", "silver", None)),
            event_types=tuple(rng.sample(TYPES, rng.randint(0, 2))),
            level=rng.choice((None,) + LEVELS),
            since_s=since,
            until_s=since + rng.randrange(5_000) if since and rng.random() < 0.5 else None,
            run_id=rng.choice(("r1", None)),
        )
        expected = sorted(
            (event for event in drawn if _matches(event, where)), key=lambda event: event.at
        )
        found = event_log.read(table, where)
        assert [row["event_id"] for row in found] == [event.event_id for event in expected], where
        for row, event in zip(found, expected):
            assert row["details"] == event.details and row["level"] == event.level
            assert row["timestamp"] == pytest.approx(event.at, abs=1e-6)


def test_a_pipelines_later_events_are_numbered_after_its_earlier_ones_whatever_their_time(
    tmp_path,
):
    table = str(tmp_path / "events")
    assert event_log.append_missing(table, "one", [Event("a", 200.0, "one", "batch", "m")]) == 1
    # an event that happened earlier but arrives later (a killed command's) comes after
    late = [Event("b", 100.0, "one", "batch", "m"), Event("c", 50.0, "one", "batch", "m")]
    assert event_log.append_missing(table, "one", late) == 2
    rows = {row["event_id"]: row["sequence"] for row in event_log.read(table)}
    assert rows == {"a": 1, "c": 2, "b": 3}  # within one append, by time


def test_levels_run_from_the_one_asked_for_upwards_and_no_table_reads_as_no_events(tmp_path):
    assert event_log.levels_from("WARN") == ("WARN", "ERROR")
    assert event_log.levels_from("INFO") == LEVELS
    assert event_log.read(str(tmp_path / "none")) == []
    assert event_log.delete_before(str(tmp_path / "none"), "one", 10.0) == 0
