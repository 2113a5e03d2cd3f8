"""Sample events for ``lakehouse generate __pipeline__`` (plain Python, no Spark)."""

from __future__ import annotations

import random
import uuid

KINDS = ("a", "b", "c")
# Lines bronze must quarantine, mixed in by --bad-fraction.
BAD_LINES = (
    "this is not json",
    '{"kind": "a", "amount": 1.5, "event_time": 1772323200000}',
    '{"id": "x", "kind": "z", "amount": 1.5, "event_time": 1772323200000}',
    '{"id": "x", "kind": "a", "event_time": 1772323200000}',
)


def event(rng: random.Random, time_ms: int) -> dict:
    """One event at ``time_ms``; a few have a negative amount, which silver leaves out."""
    return {
        "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "kind": rng.choice(KINDS),
        "amount": round(rng.uniform(-5, 100), 2),
        "event_time": time_ms,
    }
