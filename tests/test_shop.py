"""The shipped ``shop`` pipeline (issue 16), a graph of hops written only as a spec, its code
and suites in include/: orders (JSON lines) and payments (CSV with a header) each ingested with
quarantine, orders de-duplicated within the watermark, a stream-stream join of each order with
its payment within an hour (two upstreams, state stores on each side), and an hourly aggregate
below it. Its quality gates run on every run (the shipped suites).

Every table is compared with what the landing files say, computed here in plain Python: after
runs where payments land with their orders and runs where they land a run later (the join's
state holds the orders meanwhile), resends of an order in the same file and in the next run's
(silver keeps one), after a rollback of each source (the hops below follow, the other source
does not), and a backfill into an empty lake equals the stream.
The stream equals the backfill when no row arrives later than the watermark allows: each
file's payments are never older than the newest orders of earlier runs minus the allowed
lateness, and an order's resend lands before the watermark passes the order's time plus the
allowed lateness (the conditions under which Spark's join and de-duplication drop nothing).
"""

from __future__ import annotations

import json
import random
import shutil
from collections import Counter
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from spark_jobs.cli import main
from spark_jobs.logs import checkpoint_log, delta_log

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow, pytest.mark.quality]

NAME = "shop"
HOUR_MS = 3_600_000
START_MS = 1_772_323_200_000  # 2026-03-01T00:00:00Z
MERCHANTS = ("m-1", "m-2", "m-3")
CURRENCIES = ("EUR", "USD")
HEADER = "payment_id,order_id,paid_amount,status,paid_time"
TABLES = {"orders": "tables/bronze/shop_orders", "payments": "tables/bronze/shop_payments",
          "latest": "tables/silver/shop_orders", "paid": "tables/silver/shop_paid",
          "revenue": "tables/gold/shop_merchant_revenue"}


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class Landing:
    """Orders written as JSON lines and payments as CSV files, and what the tables must then hold."""

    def __init__(self, home: Path, seed: int):
        self.home, self.rng = home, random.Random(seed)
        self.orders: list[dict] = []   # every valid order line, resends included
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
            order = {"order_id": f"o-{hour}-{index}", "customer_id": f"c-{self.rng.randrange(50)}",
                     "merchant_id": self.rng.choice(MERCHANTS), "currency": self.rng.choice(CURRENCIES),
                     "amount": Decimal(0 if index == 7 else self.rng.randrange(100, 50_000)) / 100,
                     "order_time": START_MS + hour * HOUR_MS + index * (HOUR_MS // orders)}
            new.append(order)
        resends = [new[3]] + ([self.last] if self.last else [])
        self.last = new[-1]
        lines = [json.dumps({**order, "amount": float(order["amount"]), "order_time": iso(order["order_time"])})
                 for order in new + resends]
        self.orders.extend(new + resends)
        self._write("orders", ".json", "".join(line + "\n" for line in lines) + '{"order_id": "o-no-time"}\n')
        # Paid 0 to 80 minutes after the order (past the hour: not joined); a payment that lands a
        # run later is paid 50 to 60 minutes after it, so it is never older than the join's
        # watermark then: the newest order read (the hour's last, at 58.5 minutes) less the
        # allowed lateness (10 minutes). Spark drops a row older than that from a join's input.
        low, high = (0, 80) if pay_now else (50, 60)
        payments = []
        for order in new:
            if self.rng.random() < 0.8:
                paid = order["order_time"] + self.rng.randrange(low * 60_000, high * 60_000)
                if self.rng.random() < 0.1:
                    payments.append({"payment_id": f"f-{order['order_id']}", "order_id": order["order_id"],
                                     "paid_amount": order["amount"], "status": "failed", "paid_time": paid - 1000})
                payments.append({"payment_id": f"p-{order['order_id']}", "order_id": order["order_id"],
                                 "paid_amount": order["amount"], "status": "paid", "paid_time": paid})
        if pay_now:
            self.pay(payments)
        return payments

    def pay(self, payments: list[dict]) -> None:
        self.payments.extend(payments)
        rows = [f"{p['payment_id']},{p['order_id']},{p['paid_amount']:.2f},{p['status']},{iso(p['paid_time'])}"
                for p in payments]
        self._write("payments", ".csv", HEADER + "\r\n" + "".join(row + "\r\n" for row in rows) + "p-x,o-x,1.00\r\n")

    def expected(self) -> dict:
        kept = [order for order in self.orders if order["amount"] > 0]
        latest = {order["order_id"]: order for order in kept}
        paid = sorted((payment["order_id"], payment["payment_id"]) for payment in self.payments
                      if payment["status"] == "paid" and payment["order_id"] in latest
                      and 0 <= payment["paid_time"] - latest[payment["order_id"]]["order_time"] <= HOUR_MS)
        revenue: Counter = Counter()
        counts: Counter = Counter()
        for order_id, payment_id in paid:
            order = latest[order_id]
            key = (order["merchant_id"], order["currency"], order["order_time"] - order["order_time"] % HOUR_MS)
            counts[key] += 1
            revenue[key] += next(p["paid_amount"] for p in self.payments if p["payment_id"] == payment_id)
        return {"orders": sorted(order["order_id"] for order in kept),
                "payments": sorted(p["payment_id"] for p in self.payments), "latest": sorted(latest),
                "paid": paid, "revenue": {key: (counts[key], revenue[key]) for key in counts}}


def actual(spark, home: Path) -> dict:
    def rows(name: str):
        return spark.read.format("delta").load(str(home / TABLES[name])).collect()

    return {
        "orders": sorted(row.order_id for row in rows("orders")),
        "payments": sorted(row.payment_id for row in rows("payments")),
        "latest": sorted(row.order_id for row in rows("latest")),
        "paid": sorted((row.order_id, row.payment_id) for row in rows("paid")),
        "revenue": {(row.merchant_id, row.currency, int(row.window_start.timestamp() * 1000)):
                    (row.paid_orders, row.revenue) for row in rows("revenue")},
    }


def assert_tables(spark, home: Path, expected: dict) -> None:
    """Each table as ``expected`` says, a failure naming the table and the rows that differ."""
    found = actual(spark, home)
    for name, rows in expected.items():
        extra, missing = sorted(set(found[name]) - set(rows)), sorted(set(rows) - set(found[name]))
        assert found[name] == rows, f"{TABLES[name]}: extra {extra[:5]}, missing {missing[:5]}"


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A lake of its own; the shipped spec, code and suites."""
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "lake"))
    return tmp_path / "lake"


def _rollback(capsys, hop: str, batch: int) -> dict:
    capsys.readouterr()
    assert main(["rollback", NAME, "--hop", hop, "--to-batch", str(batch), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_shop_runs_in_increments_rolls_back_each_source_and_equals_its_backfill(spark, airflow_in_process, home,
                                                                                  tmp_path, capsys, monkeypatch):
    from tests.conftest import dag_test

    landing = Landing(home, seed=5)
    landing.increment(0)
    # The first increment through the platform's stream DAG (Airflow's dag.test(), the Spark
    # commands in this process): both sources side by side, the join after both, every gate.
    _run_id, state, tasks = dag_test(f"{NAME}__stream")
    assert state == "success" and {task: tasks[task] for task in ("bronze_orders", "bronze_payments", "silver_paid",
                                                                   "gate_gold_merchant_revenue", "undo")} == {
        "bronze_orders": "success", "bronze_payments": "success", "silver_paid": "success",
        "gate_gold_merchant_revenue": "success", "undo": "skipped"}, tasks
    assert_tables(spark, home, landing.expected())
    landing.increment(1)
    later = landing.increment(2, pay_now=False)  # orders now, their payments a run later
    assert main(["run", NAME]) == 0
    assert_tables(spark, home, landing.expected())
    landing.pay(later)
    landing.increment(3)
    assert main(["run", NAME]) == 0
    expected = landing.expected()
    assert_tables(spark, home, expected)
    assert len(expected["paid"]) > 60
    # The header lines were dropped, not quarantined: each payments file quarantined its one bad row.
    payments_bad = spark.read.format("delta").load(str(home / "tables/quarantine/shop_payments"))
    assert sorted(row.raw_line.rstrip("\r") for row in payments_bad.collect()) == ["p-x,o-x,1.00"] * 4
    # Each orders file's bad line (it lacks fields) and its order of amount zero, which the
    # shipped suite's drop rule took out of bronze_orders.
    orders_bad = spark.read.format("delta").load(str(home / "tables/quarantine/shop_orders")).collect()
    assert sorted(row.raw_line for row in orders_bad if not row.reason.startswith("quality:")) == \
        ['{"order_id": "o-no-time"}'] * 4
    assert sorted(json.loads(row.raw_line)["order_id"] for row in orders_bad if row.reason.startswith("quality:")) \
        == sorted(order["order_id"] for order in landing.orders if order["amount"] == 0)

    # Undo the payments' last batch: the join and the aggregate below follow; the orders keep theirs.
    orders_version = delta_log.table_version(str(home / TABLES["orders"]))
    orders_offsets = checkpoint_log.offset_batch_ids(str(home / f"checkpoints/{NAME}/bronze_orders"))
    document = _rollback(capsys, "bronze_payments", 1)
    steps = {step["hop"]: step for step in document["plan"]["hops"]}
    assert list(steps) == ["bronze_payments", "silver_paid", "gold_merchant_revenue"]
    assert steps["bronze_payments"]["undone"] == [2]
    assert steps["silver_paid"]["restored_upstreams"] == (
        ["bronze_payments"] if steps["silver_paid"]["target_batch"] >= 0 else [])
    assert delta_log.table_version(str(home / TABLES["orders"])) == orders_version
    assert checkpoint_log.offset_batch_ids(str(home / f"checkpoints/{NAME}/bronze_orders")) == orders_offsets
    assert main(["run", NAME]) == 0
    assert_tables(spark, home, expected)

    # Undo the orders' last two batches through both hops below them; a new increment lands
    # before the replay: equal again.
    document = _rollback(capsys, "bronze_orders", 0)
    steps = {step["hop"]: step for step in document["plan"]["hops"]}
    assert list(steps) == ["bronze_orders", "silver_orders", "silver_paid", "gold_merchant_revenue"]
    assert steps["bronze_orders"]["undone"] == [1, 2]
    # The join's payments side was restored by the first rollback after its kept batches read it:
    # re-reading it from there would take the undone appends again, so the join starts over.
    assert steps["silver_paid"]["target_batch"] == steps["gold_merchant_revenue"]["target_batch"] == -1
    assert any(note.startswith("silver_paid: starts over from bronze_payments's table")
               for note in document["plan"]["notes"]), document["plan"]["notes"]
    landing.increment(4)
    assert main(["run", NAME]) == 0
    expected = landing.expected()
    assert_tables(spark, home, expected)
    # status and checkpoint validate read the join's two sources and its state stores (one
    # folder per side and kind in each partition) as plain files.
    capsys.readouterr()
    assert main(["status", NAME, "--hop", "silver_paid", "--json"]) == 0
    paid = json.loads(capsys.readouterr().out)["hops"][0]
    assert paid["kind"] == "join" and paid["feeds"] == ["gold_merchant_revenue"] and paid["pending_batch"] is None
    from spark_jobs.control.status import pending_work
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.spec import get_spec
    assert not any(pending_work(Lake.open(get_spec(NAME))).values())
    stores = checkpoint_log.state_files(str(home / f"checkpoints/{NAME}/silver_paid"))
    assert {store.rsplit("/", 1)[-1] for store in stores} == {
        f"{side}-{kind}" for side in ("left", "right") for kind in ("keyToNumValues", "keyWithIndexToValue")}
    assert main(["checkpoint", "validate", NAME, "--json"]) == 0

    # The same landing files backfilled into an empty lake: every table equals the stream's.
    other = tmp_path / "backfilled"
    shutil.copytree(home / "landing", other / "landing")
    monkeypatch.setenv("LAKEHOUSE_HOME", str(other))
    assert main(["backfill", NAME, "--start", "2026-03-01T00:00:00", "--end", "2026-03-01T08:00:00"]) == 0
    assert_tables(spark, other, expected)
