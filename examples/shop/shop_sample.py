"""Sample data for ``lakehouse generate shop`` (plain Python, no Spark): orders as JSON lines and
their payments as a CSV file with a header, one file of each per call.

Most orders are paid (a few after a failed attempt), some more than an hour after the order
(the join leaves those out), a few never; producers resend some orders (the same line twice);
a few orders have a zero amount (bronze_orders' suite drops them to quarantine).
"""

from __future__ import annotations

import json
import random
import uuid
from datetime import UTC, datetime

from spark_jobs.authoring import SampleFiles

MERCHANTS = tuple(f"m-{index:02d}" for index in range(8))
CURRENCIES = ("EUR", "USD", "GBP")
HEADER = "payment_id,order_id,paid_amount,status,paid_time"
ORDER_GAP_MS = 100  # between two orders of a file
LATE_BY_MS = 5 * 60 * 1000  # a late order's time is this much earlier
# payments come up to 70 minutes after their order: some miss the hour
PAID_WITHIN_MS = 70 * 60 * 1000
BAD_ORDERS = (
    "this is not json",
    '{"order_id": "o-bad", "customer_id": "c-1", "amount": 5, "currency": "EUR", "order_time": '
    '"2026-03-01T00:00:00Z"}',
    '{"order_id": "o-bad", "customer_id": "c-1", "merchant_id": "m-00", "amount": "five", '
    '"currency": "EUR", "order_time": "2026-03-01T00:00:00Z"}',
    '{"order_id": "o-bad", "customer_id": "c-1", "merchant_id": "m-00", "amount": 5, "currency": '
    '"XXX", "order_time": "2026-03-01T00:00:00Z"}',
)
BAD_PAYMENTS = (
    "not,a,payment",
    "p-bad,o-bad,ten,paid,2026-03-01T00:00:00Z",
    "p-bad,o-bad,10.00,pending,2026-03-01T00:00:00Z",
    "p-bad,o-bad,10.00,paid,yesterday",
)


def iso(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC text, as the sources write times."""
    return (
        datetime.fromtimestamp(ms / 1000, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def _id(rng: random.Random, prefix: str) -> str:
    return f"{prefix}-{uuid.UUID(int=rng.getrandbits(128), version=4).hex[:16]}"


def landing_files(
    rng: random.Random, start_ms: int, events: int, bad_fraction: float, late_fraction: float
) -> SampleFiles:
    """``events`` orders from ``start_ms`` on, and the payments made for them, as one orders file
    and one payments file; a ``bad_fraction`` of each file's lines invalid, a ``late_fraction``
    of orders (and their payments) 5 minutes older than their neighbours."""
    orders, payments, times = [], [], []
    bad = late = 0
    for index in range(events):
        if rng.random() < bad_fraction:
            orders.append(BAD_ORDERS[bad % len(BAD_ORDERS)])
            payments.append(BAD_PAYMENTS[bad % len(BAD_PAYMENTS)])
            bad += 1
            continue
        order_time = start_ms + index * ORDER_GAP_MS
        if rng.random() < late_fraction:
            order_time -= LATE_BY_MS
            late += 1
        times.append(order_time)
        amount = 0 if rng.random() < 0.01 else rng.randrange(100, 30_000)
        order = {
            "order_id": _id(rng, "o"),
            "customer_id": f"c-{rng.randrange(1000)}",
            "merchant_id": rng.choice(MERCHANTS),
            "amount": amount / 100,
            "currency": rng.choice(CURRENCIES),
            "order_time": iso(order_time),
        }
        line = json.dumps(order, separators=(",", ":"))
        orders.extend([line, line] if rng.random() < 0.03 else [line])
        paid_time = order_time + rng.randrange(PAID_WITHIN_MS)
        if rng.random() < 0.05:
            payments.append(
                f"{_id(rng, 'p')},{order['order_id']},{amount / 100:.2f},failed,{iso(paid_time - 1000)}"  # noqa: E501
            )
        if rng.random() < 0.9:
            payments.append(
                f"{_id(rng, 'p')},{order['order_id']},{amount / 100:.2f},paid,{iso(paid_time)}"
            )
    return SampleFiles(
        {
            "bronze_orders": (".json", "".join(line + "\n" for line in orders)),
            "bronze_payments": (".csv", HEADER + "\n" + "".join(line + "\n" for line in payments)),
        },
        events,
        bad * 2,
        late,
        times,
    )
