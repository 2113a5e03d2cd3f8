"""Change data capture in plain Python: a feed of changes drawn at random (inserts, updates,
deletes, re-inserts, resends, out-of-order arrival, truncates, values the connector left
unavailable), written as the JSON lines of one Debezium connector (PostgreSQL, MySQL, SQL Server,
Oracle, Db2, MongoDB, or records flattened by ExtractNewRecordState), with a tombstone after some
deletes, and what a ``changes`` hop's SCD type 1 and type 2 tables must hold, computed from the
changes without the code under test.

The rules: a truncate is a delete, at its sequence, of every key; a key's changes apply in
sequence order whatever their arrival; of several changes with one key and sequence, one counts
(a delete, else the greatest values, nulls first); a value the connector left unavailable is
the key's value in its latest change before (not a delete) that holds one; type 1 keeps each
key's last change unless it is a delete; type 2 starts a version at a change after a delete (or
at the first) or one that changes a tracked column, holds the version's last change's values,
and ends it at the sequence of the change after that (a delete or the next version's start).
Each connector writes its own log position (its source fields); the model computes the position
the table must hold from the sequence number as that connector would write it.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from dataclasses import dataclass
from decimal import Decimal

T0_MS = 1_780_000_000_000 - 1_780_000_000_000 % 3_600_000  # an hour boundary in 2026
TIERS = ("bronze", "silver", "gold")
NAMES = ("Ada", "Bo", "Cy", "Di", None)
CONNECTORS = ("postgresql", "mysql", "sqlserver", "oracle", "db2", "mongodb", "flat")
# The connectors whose databases log a truncate (SQL Server's and Db2's capture has none; MongoDB
# has no truncate; ExtractNewRecordState passes none on by default).
TRUNCATING = ("postgresql", "mysql", "oracle")
UNAVAILABLE = "__debezium_unavailable_value"


@dataclass(frozen=True)
class Change:
    """One change of customer ``key``: ``op`` c (insert), u (update), d (delete) or r
    (a snapshot read).
    """

    key: str | None
    lsn: int
    op: str
    name: str | None
    tier: str | None
    connector: str = "postgresql"
    # The connector left the email out (written as UNAVAILABLE): a TOASTed value not changed.
    email_unavailable: bool = False

    @property
    def changed_ms(self) -> int:
        return T0_MS + self.lsn * 1000

    @property
    def changed_us(self) -> int:
        """The change's time as the connector writes it: microseconds where it writes ``ts_us``
        (a flattened record carries the source's milliseconds)."""
        return self.changed_ms * 1000 + (0 if self.connector == "flat" else self.lsn % 997)

    @property
    def email(self) -> str | None:
        if self.email_unavailable:
            return UNAVAILABLE
        return f"{self.name.lower()}.{self.key}@example.com" if self.name else None

    def lines(self) -> list[str]:
        """The change as its connector writes it, and a tombstone after a delete of an even
        sequence (Kafka's companion of a delete, as a ``null`` line)."""
        tombstone = self.op == "d" and self.lsn % 2 == 0 and self.connector != "flat"
        return [self.line(), *(["null"] if tombstone else [])]

    def line(self) -> str:
        """The change as a Debezium event of its connector (a delete's values in ``before``, the
        rest in ``after``; a MongoDB document as JSON text; a flattened record's fields and
        ``__`` metadata)."""
        row = None
        if self.op != "t":
            row = {
                "customer_id": self.key,
                "name": self.name,
                "email": self.email,
                "tier": self.tier,
            }
        if self.connector == "flat":
            pg_lsn = _pg_lsn(self.lsn)
            return json.dumps(
                {
                    **(row or {}),
                    "__op": self.op,
                    "__lsn": pg_lsn,
                    "__source_ts_ms": self.changed_ms,
                    "__deleted": "true" if self.op == "d" else "false",
                }
            )
        image = json.dumps(row) if self.connector == "mongodb" and row else row
        before, after = (image, None) if self.op == "d" else (None, image)
        return json.dumps(
            {
                "before": before,
                "after": after,
                "op": self.op,
                "ts_ms": self.changed_ms,
                "ts_us": self.changed_us,
                "source": {"connector": self.connector, **_source(self.connector, self.lsn)},
            }
        )

    @property
    def position(self) -> dict:
        """The log position the table holds for this change, from what its connector wrote."""
        return _position(self.connector, self.lsn)

    @property
    def changed_at(self) -> dt.datetime:
        epoch = dt.datetime(1970, 1, 1)
        return epoch + dt.timedelta(microseconds=self.changed_us)


def _pg_lsn(lsn: int) -> int:
    return 20_000_000 + lsn * 40


def _hex_lsn(*parts: int) -> str:
    """An LSN as SQL Server and Db2 write it: three fixed-width hex parts."""
    return f"{parts[0]:08x}:{parts[1]:08x}:{parts[2]:04x}"


def _source(connector: str, lsn: int) -> dict:
    """The ``source`` position fields of change ``lsn`` (the feed's sequence number) as the
    connector writes them; a transaction holds three changes."""
    if connector == "postgresql":
        return {"lsn": _pg_lsn(lsn), "txId": 500 + lsn // 3}
    if connector == "mysql":
        return {
            "file": f"mysql-bin.{1 + lsn // 40:06d}",
            "pos": 4 + (lsn % 40) // 2 * 300,
            "row": lsn % 2,
            "server_id": 223344,
        }
    if connector in ("sqlserver", "db2"):
        commit = _hex_lsn(0x27, lsn // 3 * 16 + 15, 1)
        fields = {"commit_lsn": commit, "change_lsn": _hex_lsn(0x27, lsn * 4, 3)}
        return {**fields, "event_serial_no": "1"} if connector == "sqlserver" else fields
    if connector == "oracle":
        return {
            "scn": str(2_000_000 + lsn * 5),
            "commit_scn": str(2_000_000 + lsn // 3 * 15 + 14),
            "ssn": 1,
        }
    if connector == "mongodb":
        return {"ts_ms": (1_700_000_000 + lsn // 4) * 1000, "ord": lsn % 4 + 1, "rs": "rs0"}
    raise ValueError(connector)


def _position(connector: str, lsn: int) -> dict:
    """What the table must hold as the position of change ``lsn``: for each connector, the fields
    that order its log, as the platform's guide lists them, worked out here from the sequence
    number directly."""
    if connector in ("postgresql", "flat"):
        log, offset, serial = "", _pg_lsn(lsn), 0
    elif connector == "mysql":
        log, offset, serial = f"mysql-bin.{1 + lsn // 40:06d}", 4 + (lsn % 40) // 2 * 300, lsn % 2
    elif connector in ("sqlserver", "db2"):
        log = _hex_lsn(0x27, lsn // 3 * 16 + 15, 1) + "/" + _hex_lsn(0x27, lsn * 4, 3)
        offset, serial = 0, 1 if connector == "sqlserver" else 0
    elif connector == "oracle":
        log = str(2_000_000 + lsn // 3 * 15 + 14).rjust(38, "0")
        offset, serial = 2_000_000 + lsn * 5, 1
    else:
        log, offset, serial = "", (1_700_000_000 + lsn // 4) * 1000, lsn % 4 + 1
    return {"log": log, "offset": Decimal(offset), "serial": serial}


def _order(position: dict) -> tuple:
    return position["log"], position["offset"], position["serial"]


def connector_of(seed: int) -> str:
    """The connector whose events seed ``seed``'s feed is written as."""
    return CONNECTORS[seed % len(CONNECTORS)]


def feed(
    seed: int, keys: int = 10, changes: int = 80, connector: str | None = None
) -> list[Change]:
    """A feed in arrival order, as ``connector`` (by default :func:`connector_of` the seed)
    writes it: each key's history in sequence order (a truncate now and then, where the
    connector's database logs one; an update's email left unavailable now and then), a
    twentieth of the changes twinned (same key and sequence, other values), then shuffled within
    a bounded distance (late changes, some after their key's delete) and a tenth resent
    later."""
    connector = connector or connector_of(seed)
    rng = random.Random(seed)
    # Truncates and unavailable values drawn from a generator of their own: a feed of a
    # connector without truncates keeps the changes its seed drew before they existed.
    extra = random.Random(seed + 7919)
    live: dict[str, bool] = {}
    history = []
    for lsn in range(1, changes + 1):
        if connector in TRUNCATING and lsn > 10 and extra.random() < 0.015:
            history.append(Change(None, lsn, "t", None, None, connector))
            live = dict.fromkeys(live, False)
            continue
        key = f"cust-{rng.randrange(keys):02d}"
        if not live.get(key):
            # an update or delete of a gone key too
            op = "c" if key not in live or rng.random() < 0.7 else rng.choice("ud")
        else:
            op = rng.choices("ud", weights=(4, 1))[0]
        live[key] = op != "d"
        unavailable = op == "u" and extra.random() < 0.2
        history.append(
            Change(key, lsn, op, rng.choice(NAMES), rng.choice(TIERS), connector, unavailable)
        )
    # A few changes with the sequence of another but other values (or another
    # operation): one counts.
    history += [
        Change(
            change.key,
            change.lsn,
            rng.choice("ud"),
            rng.choice(NAMES),
            rng.choice(TIERS),
            connector,
        )
        for change in rng.sample(history, len(history) // 20)
        if change.op != "t"
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
    sequence order, each truncate made a delete of every key, each unavailable email the key's
    latest one before that is available."""
    keys = sorted({change.key for change in changes if change.op != "t"})
    changes = [change for change in changes if change.op != "t"] + [
        Change(key, change.lsn, "d", None, None, change.connector)
        for change in changes
        if change.op == "t"
        for key in keys
    ]
    best: dict[tuple, Change] = {}

    def rank(change: Change) -> tuple:
        values = (change.name, change.email, change.tier)
        return (change.op == "d", *((value is not None, value or "") for value in values))

    for change in changes:
        key = (change.key, change.lsn)
        if key not in best or rank(change) > rank(best[key]):
            best[key] = change
    filled = []
    emails: dict[str, str | None] = {}
    for change in sorted(best.values(), key=lambda change: change.lsn):
        if change.email_unavailable:
            change = _with_email(change, emails.get(change.key))
        elif change.op != "d":
            emails[change.key] = change.email
        filled.append(change)
    return filled


@dataclass(frozen=True)
class _Filled(Change):
    """A change whose unavailable email was filled in from an earlier one."""

    filled_email: str | None = None

    @property
    def email(self) -> str | None:
        return self.filled_email


def _with_email(change: Change, email: str | None) -> Change:
    fields = {name: getattr(change, name) for name in Change.__dataclass_fields__}
    return _Filled(**{**fields, "email_unavailable": False}, filled_email=email)


def _row(change: Change) -> dict:
    return {
        "customer_id": change.key,
        "name": change.name,
        "email": change.email,
        "tier": change.tier,
        "position": change.position,
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
                current["valid_to"] = change.position
                versions.append(current)
                current = None
            if change.op != "d":
                start = current["valid_from"] if current else change.position
                current = dict(_row(change), valid_from=start, valid_to=None)
            previous = change
        if current is not None:
            versions.append(current)
    return sorted(versions, key=lambda row: (row["customer_id"], _order(row["valid_from"])))


def tiers(latest: list[dict]) -> list[dict]:
    """The live customers per tier of type 1 rows ``latest`` (a tier with none has no row), and
    the latest change among them."""
    by_tier: dict[str | None, list[dict]] = {}
    for row in latest:
        by_tier.setdefault(row["tier"], []).append(row)
    return [
        {
            "tier": tier,
            "customers": len(rows),
            "last_change": max(row["changed_at"] for row in rows),
        }
        for tier, rows in sorted(by_tier.items(), key=lambda item: (item[0] is not None, item[0]))
    ]
