"""Sample change events for ``lakehouse generate crm`` (plain Python, no Spark): Debezium
envelopes of 200 customers' inserts, updates and deletes, each event's log position its time."""

from __future__ import annotations

import random

CUSTOMERS = 200
NAMES = ("Ada", "Bo", "Cy", "Di", "Ed", "Flo")
TIERS = ("bronze", "silver", "gold")
# Events bronze must quarantine, mixed in by --bad-fraction.
BAD_LINES = (
    "this is not json",
    '{"op": "u", "after": {"name": "no key"}, "ts_ms": 1, "source": {"lsn": 1}}',
    '{"op": "u", "after": {"customer_id": "c-1", "tier": "gold"}, "ts_ms": 1}',
    '{"op": "x", "after": {"customer_id": "c-1", "tier": "gold"}, "ts_ms": 1, "source": {"lsn": 1}}',
    '{"op": "u", "after": {"customer_id": "c-1", "tier": "platinum"}, "ts_ms": 1, "source": {"lsn": 1}}',
)


def event(rng: random.Random, time_ms: int) -> dict:
    """One change of a customer at ``time_ms`` (its log position too): mostly updates, some inserts,
    a few deletes; a late event (``--late-fraction``) carries an older position."""
    key = f"c-{rng.randrange(CUSTOMERS):03d}"
    op = rng.choices("cud", weights=(2, 7, 1))[0]
    name = rng.choice(NAMES)
    row = {"customer_id": key, "name": name, "email": f"{name.lower()}.{key}@example.com", "tier": rng.choice(TIERS)}
    return {"before": row if op == "d" else None, "after": None if op == "d" else row, "op": op, "ts_ms": time_ms,
            "source": {"lsn": time_ms}}
