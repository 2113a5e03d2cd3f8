"""``shop`` end to end: sample orders and payments, every hop run once with its quality gate,
each table equal to what the files say, computed here in plain Python (the de-duplication, the
join of each order with its payment within the hour, the hourly revenue). Run it with pytest
where the platform is installed: ``pytest <this file>``."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from datetime import datetime
from decimal import Decimal
from pathlib import Path

HOUR_MS = 3_600_000


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def test_sample_files_run_through_every_hop(tmp_path, monkeypatch):
    from spark_jobs import service
    from spark_jobs.engine.session import build_session

    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(Path(__file__).resolve().parents[1]))
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "lake"))
    monkeypatch.delenv("LAKEHOUSE_QUALITY", raising=False)
    service.generate("shop", 600, files=1, seed=2, start_ms=1_772_323_200_000)
    service.run("shop", progress=lambda line: None).raise_for_gate()

    landing = tmp_path / "lake" / "landing" / "shop"
    lines = [
        json.loads(line)
        for path in sorted((landing / "orders").glob("*.json"))
        for line in path.read_text().splitlines()
    ]
    # bronze_orders' suite drops these
    free = [order for order in lines if Decimal(str(order["amount"])) <= 0]
    # One row per order: a resent line is the same order.
    kept = {
        (order["order_id"], _ms(order["order_time"])): order for order in lines if order not in free
    }
    payments = [
        line.split(",")
        for path in sorted((landing / "payments").glob("*.csv"))
        for line in path.read_text().splitlines()[1:]
    ]
    paid = defaultdict(list)
    for _payment, order_id, amount, status, time in payments:
        if status == "paid":
            paid[order_id].append((_ms(time), Decimal(amount)))
    joined = [
        (order, amount)
        for (order_id, time), order in kept.items()
        for paid_time, amount in paid[order_id]
        if time <= paid_time <= time + HOUR_MS
    ]
    assert kept and joined and len(joined) < len(kept)

    spark = build_session("test-shop")
    table = lambda relative: spark.read.format("delta").load(str(tmp_path / "lake" / relative))  # noqa: E731
    assert sorted(row.order_id for row in table("tables/silver/shop_orders").collect()) == sorted(
        order_id for order_id, _time in kept
    )
    assert table("tables/quarantine/shop_orders").count() == len(free)
    assert sorted(row.order_id for row in table("tables/silver/shop_paid").collect()) == sorted(
        order["order_id"] for order, _amount in joined
    )
    revenue: Counter = Counter()
    counts: Counter = Counter()
    for order, amount in joined:
        key = (
            order["merchant_id"],
            order["currency"],
            _ms(order["order_time"]) // HOUR_MS * HOUR_MS,
        )
        counts[key] += 1
        revenue[key] += amount
    gold = {
        (row.merchant_id, row.currency, int(row.window_start.timestamp() * 1000)): (
            row.paid_orders,
            row.revenue,
        )
        for row in table("tables/gold/shop_merchant_revenue").collect()
    }
    assert gold == {key: (count, revenue[key]) for key, count in counts.items()}
