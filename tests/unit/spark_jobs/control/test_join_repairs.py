"""``spark_jobs/control/join_repairs.py``: what a run repairs after its stream, on plain files,
no JVM: shop's join (``silver_paid``, ``within`` one hour, below bronze_orders, silver_orders
and bronze_payments) and the aggregate below it, with run records and checkpoint batches written
here. The expected ranges follow the rules of docs/concepts/run-and-backfill.md ("A join after a
backfill"), worked out by hand for each case."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_jobs.control.hop_state import HopState
from spark_jobs.control.join_repairs import owed
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import get_spec
from spark_jobs.model.times import iso, parse_time

pytestmark = pytest.mark.unit


HOUR = 3_600_000


def at(clock: str) -> int:
    return parse_time(f"2026-03-01T{clock}:00", "time")


@pytest.fixture
def lake(tmp_path) -> Lake:
    lake = Lake(str(tmp_path / "lake"), get_spec("shop"))
    Path(lake.runs).mkdir(parents=True)
    return lake


def backfill(
    lake: Lake, run_id: str, hop: str, start: str, end: str, began_s: float, repair: bool = False
) -> None:
    """A succeeded backfill of ``[start, end)`` that ran from ``began_s`` for ten seconds."""
    record = {
        "run_id": run_id,
        "hop": hop,
        "mode": "backfill",
        "status": "succeeded",
        "repair": repair,
        "started_at": began_s,
        "ended_at": began_s + 10,
        "range_start": iso(at(start)),
        "range_end": iso(at(end)),
    }
    Path(lake.runs, f"{run_id}.{hop}.json").write_text(json.dumps(record))


def batch(
    lake: Lake, hop: str, batch_id: int, began_s: float, watermark: str | None = None
) -> None:
    """A committed stream batch of ``hop`` that began at ``began_s`` with this
    watermark (none: 0).
    """
    checkpoint = Path(lake.checkpoint(lake.spec.hop(hop)))
    for log in ("offsets", "commits"):
        (checkpoint / log).mkdir(parents=True, exist_ok=True)
    header = {
        "batchWatermarkMs": at(watermark) if watermark else 0,
        "batchTimestampMs": int(began_s * 1000),
        "conf": {},
    }
    (checkpoint / "offsets" / str(batch_id)).write_text(f"v1\n{json.dumps(header)}\n-\n-")
    (checkpoint / "commits" / str(batch_id)).write_text("v1\n{}")


def spans(lake: Lake, hop: str) -> list[tuple[str, str]]:
    return [
        (iso(start)[11:16], iso(end)[11:16])
        for start, end in owed(HopState(lake, lake.spec.hop(hop)))
    ]


def test_a_join_owes_a_backfill_above_it_once_a_batch_ran_after_it(lake):
    backfill(lake, "b1", "bronze_orders", "06:00", "08:00", began_s=100)
    batch(lake, "silver_paid", 0, began_s=50)
    assert spans(lake, "silver_paid") == []  # its only batch ran before the backfill
    batch(lake, "silver_paid", 1, began_s=200)
    # the range widened by `within` each side
    assert spans(lake, "silver_paid") == [("05:00", "09:00")]


def test_a_joins_batch_pairs_nothing_older_than_its_watermark_less_within(lake):
    backfill(lake, "b1", "bronze_payments", "06:00", "08:00", began_s=100)
    batch(lake, "silver_paid", 0, began_s=200, watermark="07:30")
    assert spans(lake, "silver_paid") == [("06:30", "09:00")]
    batch(lake, "silver_paid", 1, began_s=300, watermark="10:30")
    # past the range: this batch owes nothing more
    assert spans(lake, "silver_paid") == [("06:30", "09:00")]


def test_a_backfill_of_the_join_since_the_batch_covers_what_it_owed(lake):
    backfill(lake, "b1", "silver_orders", "06:00", "08:00", began_s=100)
    batch(lake, "silver_paid", 0, began_s=200)
    backfill(lake, "b2", "silver_paid", "04:00", "10:00", began_s=250)
    assert spans(lake, "silver_paid") == []
    backfill(lake, "b3", "bronze_orders", "12:00", "13:00", began_s=260)
    batch(lake, "silver_paid", 1, began_s=400)
    # Batch 1 ran after both backfills above and no backfill of the join came since it: it owes
    # both ranges (a run's repair right after its stream is that backfill).
    assert spans(lake, "silver_paid") == [("05:00", "09:00"), ("11:00", "14:00")]
    backfill(lake, "r2.repair-1", "silver_paid", "05:00", "14:00", began_s=410, repair=True)
    assert spans(lake, "silver_paid") == []


def test_the_hop_below_a_join_owes_the_joins_repair_until_its_own_backfill_covers_it(lake):
    backfill(lake, "r1.repair-1", "silver_paid", "05:00", "09:00", began_s=300, repair=True)
    assert spans(lake, "gold_merchant_revenue") == [("05:00", "09:00")]
    backfill(lake, "b9", "gold_merchant_revenue", "05:00", "08:00", began_s=400)
    assert spans(lake, "gold_merchant_revenue") == [("05:00", "09:00")]  # covers part of it only
    backfill(lake, "b10", "gold_merchant_revenue", "00:00", "12:00", began_s=500)
    assert spans(lake, "gold_merchant_revenue") == []


def test_hops_that_are_not_a_join_nor_below_one_owe_nothing(lake):
    backfill(lake, "b1", "bronze_orders", "06:00", "08:00", began_s=100)
    backfill(lake, "r1.repair-1", "silver_paid", "05:00", "09:00", began_s=300, repair=True)
    batch(lake, "silver_orders", 0, began_s=200)
    assert spans(lake, "bronze_orders") == [] and spans(lake, "silver_orders") == []
