"""``testkit/``'s own plain-Python models (not in the package), on hand-picked cases: the changes
model (``testkit/changes_model.py``) that tests/spark/test_changes.py holds the engine to."""

from __future__ import annotations

import pytest

from testkit.changes_model import Change, scd1, scd2

pytestmark = pytest.mark.unit


def test_a_change_older_than_a_delete_does_not_bring_its_key_back_in_either_type():
    feed = [
        Change("a", 1, "c", "Ada", "gold"),
        Change("a", 3, "d", "Ada", "gold"),
        Change("a", 2, "u", "Bo", "gold"),
    ]
    assert scd1(feed) == []
    assert [
        (row["name"], _lsn(row["valid_from"]), _lsn(row["valid_to"])) for row in scd2(feed)
    ] == [("Bo", 1, 3)]


def test_twins_of_one_sequence_count_once_a_delete_first_else_the_greatest_values():
    assert scd1([Change("a", 1, "c", "Ada", "gold"), Change("a", 1, "d", "Ada", "gold")]) == []
    assert [
        row["name"]
        for row in scd1(
            [
                Change("a", 1, "c", None, "gold"),
                Change("a", 1, "c", "Ada", "gold"),
                Change("a", 1, "u", "Ada", "gold"),
            ]
        )
    ] == ["Ada"]


def test_a_late_change_splits_a_history_at_its_sequence_and_untracked_changes_stay_in_their_version():  # noqa: E501
    feed = [
        Change("a", 1, "c", "Ada", "gold"),
        Change("a", 5, "u", "Ada", "silver"),
        Change("a", 2, "u", "Bo", "gold"),
        Change("a", 3, "u", "Cy", "bronze"),
    ]
    assert [
        (row["name"], row["tier"], _lsn(row["valid_from"]), _lsn(row["valid_to"]))
        for row in scd2(feed)
    ] == [("Bo", "gold", 1, 3), ("Cy", "bronze", 3, 5), ("Ada", "silver", 5, None)]
    assert [(row["name"], row["position"]["offset"]) for row in scd1(feed)] == [
        ("Ada", 20_000_000 + 5 * 40)
    ]


def _lsn(position: dict | None) -> int | None:
    """The feed's sequence number of a PostgreSQL change's position."""
    return None if position is None else (int(position["offset"]) - 20_000_000) // 40


def test_a_truncate_ends_every_key_and_an_unavailable_value_keeps_the_one_before():
    feed = [
        Change("a", 1, "c", "Ada", "gold"),
        Change("b", 2, "c", "Bo", "gold"),
        Change("a", 3, "u", "Cy", "gold", email_unavailable=True),
        Change(None, 4, "t", None, None),
        Change("b", 5, "c", "Di", "silver"),
        Change("b", 6, "u", "Ed", "silver", email_unavailable=True),
    ]
    assert [(row["customer_id"], row["email"]) for row in scd1(feed)] == [("b", "di.b@example.com")]
    assert [
        (row["customer_id"], row["email"], _lsn(row["valid_from"]), _lsn(row["valid_to"]))
        for row in scd2(feed)
    ] == [
        ("a", "ada.a@example.com", 1, 4),
        ("b", "bo.b@example.com", 2, 4),
        ("b", "di.b@example.com", 5, None),
    ]
