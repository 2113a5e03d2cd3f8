"""Sample change events for ``lakehouse generate crm`` (plain Python, no Spark): Debezium
envelopes of 200 customers' inserts, updates and deletes, and of the orders they place (inserts
of the same database's orders table), each event's log position its time."""

from __future__ import annotations

import json
import random

from spark_jobs.authoring import SampleFiles

CUSTOMERS = 200
NAMES = ("Ada", "Bo", "Cy", "Di", "Ed", "Flo")
TIERS = ("bronze", "silver", "gold")
GAP_MS = 10  # between two changes; an order falls between them
LATE_BY_MS = 5 * 60 * 1000  # a late change's time and log position are this much earlier
# Events bronze must quarantine, mixed in by --bad-fraction.
BAD_LINES = (
    "this is not json",
    '{"op": "u", "after": {"name": "no key"}, "ts_ms": 1, "source": {"lsn": 1}}',
    '{"op": "u", "after": {"customer_id": "c-1", "tier": "gold"}, "ts_ms": 1}',
    '{"op": "x", "after": {"customer_id": "c-1", "tier": "gold"}, "ts_ms": 1, '
    '"source": {"lsn": 1}}',
    '{"op": "u", "after": {"customer_id": "c-1", "tier": "platinum"}, "ts_ms": 1, '
    '"source": {"lsn": 1}}',
)
BAD_ORDERS = (
    "not an order",
    '{"op": "c", "after": {"order_id": "o-bad", "amount": 5.0}, "ts_ms": 1, "source": {"lsn": 1}}',
    '{"op": "c", "after": {"order_id": "o-bad", "customer_id": "c-001", "amount": -5.0}, "ts_ms": '
    '1, "source": {"lsn": 1}}',
    '{"op": "d", "before": {"order_id": "o-bad", "customer_id": "c-001", "amount": 5.0}, "ts_ms": '
    '1, "source": {"lsn": 1}}',
)


def event(rng: random.Random, time_ms: int) -> dict:
    """One change of a customer at ``time_ms`` (its log position too): mostly updates, some inserts,
    a few deletes."""
    key = f"c-{rng.randrange(CUSTOMERS):03d}"
    op = rng.choices("cud", weights=(2, 7, 1))[0]
    name = rng.choice(NAMES)
    row = {
        "customer_id": key,
        "name": name,
        "email": f"{name.lower()}.{key}@example.com",
        "tier": rng.choice(TIERS),
    }
    return {
        "before": row if op == "d" else None,
        "after": None if op == "d" else row,
        "op": op,
        "ts_ms": time_ms,
        "source": {"lsn": time_ms},
    }


def order(rng: random.Random, time_ms: int, customer: str) -> dict:
    """An order of ``customer`` inserted at ``time_ms`` (its log position too)."""
    row = {
        "order_id": f"o-{rng.getrandbits(64):016x}",
        "customer_id": customer,
        "amount": rng.randrange(100, 30_000) / 100,
    }
    return {"before": None, "after": row, "op": "c", "ts_ms": time_ms, "source": {"lsn": time_ms}}


def landing_files(
    rng: random.Random, start_ms: int, events: int, bad_fraction: float, late_fraction: float
) -> SampleFiles:
    """``events`` customer changes from ``start_ms`` on, ``GAP_MS`` apart, and an order after about
    half of them (of a customer changed before it, now and then of one never seen) between it and
    the next change: a file of changes and a file of orders. A ``bad_fraction`` of each file's
    lines are invalid; a ``late_fraction`` of the changes are 5 minutes older than their
    neighbours (they arrive after newer changes of their customer and must not overwrite them);
    producers resend some orders (the same line twice)."""
    changes, orders, times, seen = [], [], [], []
    bad = late = 0
    for index in range(events):
        time_ms = start_ms + index * GAP_MS
        if rng.random() < bad_fraction:
            changes.append(BAD_LINES[bad % len(BAD_LINES)])
            orders.append(BAD_ORDERS[bad % len(BAD_ORDERS)])
            bad += 2
            continue
        late_by = LATE_BY_MS if rng.random() < late_fraction else 0
        late += bool(late_by)
        change = event(rng, time_ms - late_by)
        changes.append(json.dumps(change, separators=(",", ":")))
        seen.append((change["after"] or change["before"])["customer_id"])
        times.append(time_ms - late_by)
        if rng.random() < 0.5:
            customer = (
                rng.choice(seen)
                if rng.random() < 0.95
                else f"c-{CUSTOMERS + rng.randrange(CUSTOMERS):03d}"
            )
            line = json.dumps(order(rng, time_ms + GAP_MS // 2, customer), separators=(",", ":"))
            orders.extend([line, line] if rng.random() < 0.03 else [line])
            times.append(time_ms + GAP_MS // 2)
    return SampleFiles(
        {
            "bronze_customers": (".json", "".join(line + "\n" for line in changes)),
            "bronze_orders": (".json", "".join(line + "\n" for line in orders)),
        },
        events,
        bad,
        late,
        times,
    )
