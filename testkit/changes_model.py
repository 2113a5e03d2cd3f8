"""Change data capture in plain Python: a feed of changes drawn at random (inserts, updates,
deletes, re-inserts, resends, out-of-order arrival), written as Debezium-style JSON lines, and
what a ``changes`` hop's SCD type 1 and type 2 tables must hold, computed from the changes
without the code under test.

The rules: a key's changes apply in sequence order whatever their arrival; of several changes
with one key and sequence, one counts (a delete, else the greatest values, nulls first); type 1
keeps each key's last change unless it is a delete; type 2 starts a version at a change after a
delete (or at the first) or one that changes a tracked column, holds the version's last
change's values, and ends it at the sequence of the change after that (a delete or the next
version's start).
"""

from __future__ import annotations

import datetime as dt
import json
import random
from dataclasses import dataclass

T0_MS = 1_780_000_000_000 - 1_780_000_000_000 % 3_600_000  # an hour boundary in 2026
TIERS = ("bronze", "silver", "gold")
NAMES = ("Ada", "Bo", "Cy", "Di", None)


@dataclass(frozen=True)
class Change:
    """One change of customer ``key``: ``op`` c (insert), u (update), d (delete) or r
    (a snapshot read).
    """

    key: str
    lsn: int
    op: str
    name: str | None
    tier: str | None

    @property
    def changed_ms(self) -> int:
        return T0_MS + self.lsn * 1000

    @property
    def email(self) -> str | None:
        return f"{self.name.lower()}.{self.key}@example.com" if self.name else None

    def line(self) -> str:
        """The change as a Debezium envelope (a delete's values in ``before``, the
        rest in ``after``).
        """
        row = {"customer_id": self.key, "name": self.name, "email": self.email, "tier": self.tier}
        before, after = (row, None) if self.op == "d" else (None, row)
        return json.dumps(
            {
                "before": before,
                "after": after,
                "op": self.op,
                "ts_ms": self.changed_ms,
                "source": {"lsn": self.lsn},
            }
        )

    @property
    def changed_at(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.changed_ms / 1000, dt.timezone.utc).replace(
            tzinfo=None
        )


def feed(seed: int, keys: int = 10, changes: int = 80) -> list[Change]:
    """A feed in arrival order: each key's history in sequence order, a twentieth of the changes
    twinned (same key and sequence, other values), then shuffled within a bounded distance (late
    changes, some after their key's delete) and a tenth resent later."""
    rng = random.Random(seed)
    live: dict[str, bool] = {}
    history = []
    for lsn in range(1, changes + 1):
        key = f"cust-{rng.randrange(keys):02d}"
        if not live.get(key):
            # an update or delete of a gone key too
            op = "c" if key not in live or rng.random() < 0.7 else rng.choice("ud")
        else:
            op = rng.choices("ud", weights=(4, 1))[0]
        live[key] = op != "d"
        history.append(Change(key, lsn, op, rng.choice(NAMES), rng.choice(TIERS)))
    # A few changes with the sequence of another but other values (or another
    # operation): one counts.
    history += [
        Change(change.key, change.lsn, rng.choice("ud"), rng.choice(NAMES), rng.choice(TIERS))
        for change in rng.sample(history, len(history) // 20)
    ]
    arrival = sorted(history, key=lambda change: change.lsn + rng.uniform(0, 12))
    for change in rng.sample(history, len(history) // 10):
        arrival.insert(rng.randrange(arrival.index(change), len(arrival) + 1), change)
    return arrival


def cuts(seed: int, count: int, parts: int) -> list[int]:
    """``parts`` batch sizes (each at least 1) that add up to ``count``."""
    rng = random.Random(seed)
    bounds = sorted(rng.sample(range(1, count), parts - 1))
    return [high - low for low, high in zip([0, *bounds], [*bounds, count], strict=True)]


def _unique(changes: list[Change]) -> list[Change]:
    """One change per key and sequence (a delete, else the greatest values, nulls first), in
    sequence order."""
    best: dict[tuple, Change] = {}

    def rank(change: Change) -> tuple:
        values = (change.name, change.email, change.tier)
        return (change.op == "d", *((value is not None, value or "") for value in values))

    for change in changes:
        key = (change.key, change.lsn)
        if key not in best or rank(change) > rank(best[key]):
            best[key] = change
    return sorted(best.values(), key=lambda change: change.lsn)


def _row(change: Change) -> dict:
    return {
        "customer_id": change.key,
        "name": change.name,
        "email": change.email,
        "tier": change.tier,
        "lsn": change.lsn,
        "changed_at": change.changed_at,
    }


def scd1(changes: list[Change]) -> list[dict]:
    """Each live key's latest row."""
    last: dict[str, Change] = {}
    for change in _unique(changes):
        last[change.key] = change
    return sorted(
        (_row(change) for change in last.values() if change.op != "d"),
        key=lambda row: row["customer_id"],
    )


def scd2(changes: list[Change], tracked: tuple[str, ...] = ("tier",)) -> list[dict]:
    """Every version of each key: its last change's values, ``valid_from`` and ``valid_to``."""
    by_key: dict[str, list[Change]] = {}
    for change in _unique(changes):
        by_key.setdefault(change.key, []).append(change)
    versions = []
    for key_changes in by_key.values():
        current: dict | None = None
        previous: Change | None = None
        for change in key_changes:
            if current is not None and (
                change.op == "d"
                or any(getattr(change, name) != getattr(previous, name) for name in tracked)
            ):
                current["valid_to"] = change.lsn
                versions.append(current)
                current = None
            if change.op != "d":
                start = current["valid_from"] if current else change.lsn
                current = dict(_row(change), valid_from=start, valid_to=None)
            previous = change
        if current is not None:
            versions.append(current)
    return sorted(versions, key=lambda row: (row["customer_id"], row["valid_from"]))
