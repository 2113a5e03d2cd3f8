"""A randomized model check of the ``shop`` pipeline (a graph with a stream-stream join): random
sequences of landings, runs and rollbacks of any hop to any batch it still holds, against a
plain-Python model of the landing files (the landing writer and its expected tables are here,
shared with ``tests/spark/test_shop.py``).

After every run every table must equal what the landing files say. The landings keep to the
conditions under which Spark's join and de-duplication drop nothing (docs/examples/shop.md):
each increment is the next hour's orders, with the previous increment's late
payments landed first, and resends within the watermark. A rollback the platform refuses must
change no table and no checkpoint. A run or a rollback may be SIGKILLed at a random moment and
then run again to completion. A backfill of every hop over a range of whole landed hours may run
at any point (refused, changing nothing, while a stream has not read the range's files); when a
later rollback's plan says to backfill a range again (``rebackfill``), the model does so after
the next run, at that hop and every hop that reads it, as a user would, before the tables are
checked.

``python -m testkit.shop_model --seed S --steps N`` runs one sequence (LAKEHOUSE_HOME is
a new folder each time); ``tests/spark/test_shop.py`` and the benchmark suite's soak call
:func:`run_sequence`.
"""

from __future__ import annotations

import json
import random
import sys
from collections import Counter
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from testkit.sequences import RandomSequence, main

NAME = "shop"
HOUR_MS = 3_600_000
# a late order's time is this much before its hour (testkit/shop_model_late.py)
LATE_MS = 45 * 60_000
START_MS = 1_772_323_200_000  # 2026-03-01T00:00:00Z
MERCHANTS = ("m-1", "m-2", "m-3")
CURRENCIES = ("EUR", "USD")
HEADER = "payment_id,order_id,paid_amount,status,paid_time"
TABLES = {
    "orders": "tables/bronze/shop_orders",
    "payments": "tables/bronze/shop_payments",
    "latest": "tables/silver/shop_orders",
    "paid": "tables/silver/shop_paid",
    "revenue": "tables/gold/shop_merchant_revenue",
}


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class Landing:
    """Orders written as JSON lines and payments as CSV files, and what the tables
    must then hold.
    """

    late_share = 0.0  # of orders moved LATE_MS before their hour (a variant's; none here)
    held_paid = (50, 60)  # minutes after its order a payment landed a run later is paid

    def __init__(self, home: Path, seed: int):
        self.home, self.rng = home, random.Random(seed)
        self.orders: list[dict] = []  # every valid order line, resends included
        self.payments: list[dict] = []
        self.files = 0
        self.last: dict | None = None

    def _write(self, source: str, suffix: str, text: str) -> None:
        folder = self.home / f"landing/{NAME}/{source}"
        folder.mkdir(parents=True, exist_ok=True)
        self.files += 1
        (folder / f".{self.files:04d}{suffix}").write_text(text)
        (folder / f".{self.files:04d}{suffix}").rename(folder / f"{self.files:04d}{suffix}")

    def increment(self, hour: int, orders: int = 40, pay_now: bool = True) -> list[dict]:
        """``orders`` orders in ``hour`` (hours after START_MS), in time order; a resend of one of
        them and of the previous increment's last order (in time for the watermark), an order of
        amount zero (bronze's suite drops it) and a bad line; their payments (most orders have
        one, a few a failed attempt first) landed now or returned to land later."""
        new = []
        for index in range(orders):
            order = {
                "order_id": f"o-{hour}-{index}",
                "customer_id": f"c-{self.rng.randrange(50)}",
                "merchant_id": self.rng.choice(MERCHANTS),
                "currency": self.rng.choice(CURRENCIES),
                "amount": Decimal(0 if index == 7 else self.rng.randrange(100, 50_000)) / 100,
                "order_time": START_MS + hour * HOUR_MS + index * (HOUR_MS // orders),
            }
            if self.late_share and self.rng.random() < self.late_share:
                order["order_time"] -= LATE_MS
            new.append(order)
        resends = [new[3]] + ([self.last] if self.last else [])
        self.last = new[-1]
        lines = [
            json.dumps(
                {**order, "amount": float(order["amount"]), "order_time": iso(order["order_time"])}
            )
            for order in new + resends
        ]
        self.orders.extend(new + resends)
        self._write(
            "orders",
            ".json",
            "".join(line + "\n" for line in lines) + '{"order_id": "o-no-time"}\n',
        )
        # Paid 0 to 80 minutes after the order (past the hour: not joined); a payment that lands a
        # run later is paid 50 to 60 minutes after it, so it is never older than the join's
        # watermark then: the newest order read (the hour's last, at 58.5 minutes) less the
        # allowed lateness (10 minutes). Spark drops a row older than that from a join's input.
        low, high = (0, 80) if pay_now else self.held_paid
        payments = []
        for order in new:
            if self.rng.random() < 0.8:
                paid = order["order_time"] + self.rng.randrange(low * 60_000, high * 60_000)
                if self.rng.random() < 0.1:
                    payments.append(
                        {
                            "payment_id": f"f-{order['order_id']}",
                            "order_id": order["order_id"],
                            "paid_amount": order["amount"],
                            "status": "failed",
                            "paid_time": paid - 1000,
                        }
                    )
                payments.append(
                    {
                        "payment_id": f"p-{order['order_id']}",
                        "order_id": order["order_id"],
                        "paid_amount": order["amount"],
                        "status": "paid",
                        "paid_time": paid,
                    }
                )
        if pay_now:
            self.pay(payments)
        return payments

    def pay(self, payments: list[dict]) -> None:
        self.payments.extend(payments)
        rows = [
            f"{p['payment_id']},{p['order_id']},{p['paid_amount']:.2f},{p['status']},{iso(p['paid_time'])}"
            for p in payments
        ]
        self._write(
            "payments",
            ".csv",
            HEADER + "\r\n" + "".join(row + "\r\n" for row in rows) + "p-x,o-x,1.00\r\n",
        )

    def expected(self) -> dict:
        kept = [order for order in self.orders if order["amount"] > 0]
        latest = {order["order_id"]: order for order in kept}
        paid = sorted(
            (payment["order_id"], payment["payment_id"])
            for payment in self.payments
            if payment["status"] == "paid"
            and payment["order_id"] in latest
            and 0 <= payment["paid_time"] - latest[payment["order_id"]]["order_time"] <= HOUR_MS
        )
        revenue: Counter = Counter()
        counts: Counter = Counter()
        for order_id, payment_id in paid:
            order = latest[order_id]
            key = (
                order["merchant_id"],
                order["currency"],
                order["order_time"] - order["order_time"] % HOUR_MS,
            )
            counts[key] += 1
            revenue[key] += next(
                p["paid_amount"] for p in self.payments if p["payment_id"] == payment_id
            )
        return {
            "orders": sorted(order["order_id"] for order in kept),
            "payments": sorted(p["payment_id"] for p in self.payments),
            "latest": sorted(latest),
            "paid": paid,
            "revenue": {key: (counts[key], revenue[key]) for key in counts},
        }


def actual(home: Path) -> dict:
    """Every table's rows as the expected tables give them, read by delta-rs
    (:func:`testkit.expected.delta_rows`: another Delta reader, milliseconds where Spark takes
    about two seconds for the five)."""
    from testkit.expected import delta_rows, utc_ms

    # none in a table not written yet (an aggregate of no paid order)
    def rows(name: str, *columns: str) -> list[tuple]:
        return (
            delta_rows(home, TABLES[name], *columns)
            if (home / TABLES[name] / "_delta_log").exists()
            else []
        )

    return {
        "orders": sorted(order for (order,) in rows("orders", "order_id")),
        "payments": sorted(payment for (payment,) in rows("payments", "payment_id")),
        "latest": sorted(order for (order,) in rows("latest", "order_id")),
        "paid": sorted(rows("paid", "order_id", "payment_id")),
        "revenue": {
            (merchant, currency, utc_ms(start)): (orders, revenue)
            for merchant, currency, start, orders, revenue in rows(
                "revenue", "merchant_id", "currency", "window_start", "paid_orders", "revenue"
            )
        },
    }


def assert_tables(home: Path, expected: dict, context: str = "") -> None:
    """Each table as ``expected`` says, a failure naming the table and the rows that differ."""
    found = actual(home)
    for name, rows in expected.items():
        extra, missing = sorted(set(found[name]) - set(rows)), sorted(set(rows) - set(found[name]))
        assert found[name] == rows, (
            f"{TABLES[name]}: extra {extra[:5]}, missing {missing[:5]}{context}"
        )


HOPS = ("bronze_orders", "bronze_payments", "silver_orders", "silver_paid", "gold_merchant_revenue")
# Each hop and the hops that read it, directly or not (the spec's graph, in HOPS' order).
BELOW = {
    "bronze_orders": HOPS[2:],
    "bronze_payments": HOPS[3:],
    "silver_orders": HOPS[3:],
    "silver_paid": HOPS[4:],
    "gold_merchant_revenue": (),
}


def _covered(hop: str, start: str, end: str, backfills: list[dict]) -> bool:
    """Whether one backfill of ``hop`` in a plan's list spans ``start`` .. ``end``."""
    moment = datetime.fromisoformat
    return any(
        each["hop"] == hop
        and moment(each["start"]) <= moment(start)
        and moment(end) <= moment(each["end"])
        for each in backfills
    )


class _Sequence(RandomSequence):
    """One random sequence of shop's lake: hours of orders and their payments landed, the model's
    tables from them."""

    name, hops = NAME, HOPS

    def __init__(self, spark, home: Path, seed: int, log):
        super().__init__(spark, home, seed, log)
        self.landing = Landing(home, seed)
        self.hour, self.later = 0, []

    @property
    def landed_any(self) -> bool:
        return self.hour > 0

    def check(self) -> None:
        assert_tables(self.home, self.landing.expected(), " after: " + "; ".join(self.transcript))

    def land(self) -> None:
        """The last increment's late payments first, then the next hour's orders."""
        self.landing.pay(self.later)
        pay_now = self.rng.random() < 0.7
        payments = self.landing.increment(
            self.hour, orders=self.rng.randrange(8, 30), pay_now=pay_now
        )
        self.later = [] if pay_now else payments
        self.note(f"land hour {self.hour} ({len(self.later)} payments held back)")
        self.hour += 1

    def note_plan(self, out: str) -> None:
        """The plan's backfills, each covering its step's ranges at its hop and every hop below."""
        plan = json.loads(out)["plan"]
        for step in plan["hops"]:
            for start, end in step["rebackfill"]:
                assert all(
                    _covered(hop, start, end, plan["backfills"])
                    for hop in (step["hop"], *BELOW[step["hop"]])
                )
        super().note_plan(out)

    def before_final_run(self) -> None:
        self.landing.pay(self.later)

    def backfill(self) -> None:
        """Every hop over whole landed hours, often with the hour after (where their late payments
        fall; without it the join's backfill needs payments beyond the range's end); a refusal (a
        stream has not read those files yet) changes nothing."""
        first = self.rng.randrange(self.hour)
        last = self.rng.randrange(first, self.hour) + self.rng.choice((1, 2))  # the end, exclusive
        start, end = (iso(START_MS + hour * HOUR_MS)[:-1] for hour in (first, last))
        self.refused_changes_nothing(
            ["backfill", NAME, "--start", start, "--end", end], f"backfill {start} .. {end}"
        )


def run_sequence(spark, home: Path, seed: int, steps: int, log=print) -> list[str]:
    """``steps`` random operations on the lake at ``home`` (``$LAKEHOUSE_HOME``), checked after each
    run, and a final run; the transcript (to keep a failing sequence as a regression case)."""
    return _Sequence(spark, home, seed, log).play(steps)


if __name__ == "__main__":
    sys.exit(main(run_sequence, __doc__.splitlines()[0]))
