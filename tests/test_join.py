"""A join hop (issue 16): a stream-stream join of two ingest hops' tables within an event-time
bound, with watermarks on both sides (two upstreams, state stores on each side), and an hourly
aggregate below it. A team's pipeline written here (spec and code only); the platform's code
has no line for it.

Every table is compared with what the landing files say, computed here in plain Python: after
runs where payments land with their orders and runs where they land a run later (the join's
state holds the orders meanwhile), after a rollback of each source (the join and the aggregate
below follow, the other source does not), and a backfill into an empty lake equals the stream.
The stream equals the backfill when no row arrives later than the watermark allows (each
file's payments are never older than the newest orders of earlier runs minus the allowed
lateness): the conditions under which Spark's join drops nothing.
"""

from __future__ import annotations

import json
import random
import shutil
from collections import Counter
from pathlib import Path

import pytest

from spark_jobs.cli import main
from spark_jobs.logs import checkpoint_log, delta_log

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

NAME = "paid"
HOUR_MS = 3_600_000
START_MS = 1_772_323_200_000  # 2026-03-01T00:00:00Z
MERCHANTS = ("m1", "m2", "m3")
SPEC = f"""\
name: {NAME}
description: orders joined with their payments within an hour, revenue per merchant per hour
shuffle_partitions: 1
window: 1 hour
allowed_lateness: 10 minutes
hops:
  - {{name: orders, kind: ingest, landing: landing/{NAME}/orders, table: tables/bronze/{NAME}_orders,
     quarantine: tables/quarantine/{NAME}_orders, time_column: order_time}}
  - {{name: payments, kind: ingest, landing: landing/{NAME}/payments, table: tables/bronze/{NAME}_payments,
     quarantine: tables/quarantine/{NAME}_payments, time_column: paid_time}}
  - {{name: paid, kind: join, upstream: [orders, payments], within: 1 hour, table: tables/silver/{NAME}_paid,
     time_column: order_time}}
  - {{name: revenue, kind: aggregate, upstream: paid, table: tables/gold/{NAME}_revenue,
     keys: [merchant, window_start], time_column: window_start}}
"""
MODULE = '''\
import functools
import operator

from pyspark.sql import functions as F

FIELDS = {
    "orders": {"order_id": "string", "merchant": "string", "amount": "bigint", "order_time": "bigint"},
    "payments": {"payment_id": "string", "order_id": "string", "paid_time": "bigint"},
}


def parse(lines, fields):
    doc = F.col("_doc")
    parsed = lines.select("value", "_source_file", F.try_parse_json("value").alias("_doc")).select(
        "value", "_source_file", *[F.try_variant_get(doc, "$." + name, kind).alias(name) for name, kind in fields.items()])
    missing = functools.reduce(operator.or_, [F.col(name).isNull() for name in fields])
    time_column = [name for name in fields if name.endswith("_time")][0]
    return (parsed.withColumn("reason", F.when(missing, F.lit("a field is missing or of the wrong type")))
            .withColumn(time_column.replace("_time", "_ts"), F.timestamp_millis(time_column)))


def paid(frames, spec, inputs):
    orders = frames["orders"].withWatermark("order_ts", spec.allowed_lateness).alias("o")
    payments = frames["payments"].withWatermark("paid_ts", spec.allowed_lateness).alias("p")
    joined = orders.join(payments, F.expr(
        "o.order_id = p.order_id AND p.paid_ts >= o.order_ts AND p.paid_ts <= o.order_ts + INTERVAL 1 HOUR"))
    return joined.select("o.order_id", "o.merchant", "o.amount", "o.order_time", "o.order_ts", "p.payment_id",
                         "p.paid_time")


def revenue(frame, spec, inputs):
    hourly = (frame.withWatermark("order_ts", spec.allowed_lateness)
              .groupBy(F.window("order_ts", spec.window).alias("window"), "merchant")
              .agg(F.count(F.lit(1)).alias("orders"), F.sum("amount").alias("amount")))
    return hourly.select("merchant", F.col("window.start").alias("window_start"), "orders", "amount")


TRANSFORMS = {
    "orders": lambda frame, spec, inputs: parse(frame, FIELDS["orders"]),
    "payments": lambda frame, spec, inputs: parse(frame, FIELDS["payments"]),
    "paid": paid,
    "revenue": revenue,
}


def split_ingested(parsed):
    valid = parsed.where(F.col("reason").isNull()).drop("value", "reason")
    invalid = parsed.where(F.col("reason").isNotNull()).select(F.col("value").alias("raw_line"), "reason",
                                                               "_source_file")
    return valid, invalid
'''


class Landing:
    """Orders and payments written as JSON-lines files, and what the tables must then hold."""

    def __init__(self, home: Path, seed: int):
        self.home, self.rng = home, random.Random(seed)
        self.orders: dict[str, dict] = {}
        self.payments: list[dict] = []
        self.files = 0

    def _write(self, source: str, lines: list[str]) -> None:
        folder = self.home / f"landing/{NAME}/{source}"
        folder.mkdir(parents=True, exist_ok=True)
        self.files += 1
        (folder / f".{self.files:04d}.json").write_text("".join(line + "\n" for line in lines))
        (folder / f".{self.files:04d}.json").rename(folder / f"{self.files:04d}.json")

    def increment(self, hour: int, orders: int = 40, pay_now: bool = True) -> list[dict]:
        """``orders`` orders in ``hour`` (hours after START_MS), in time order, a bad line each
        way; their payments (most orders have one) landed now or returned to land later."""
        new = []
        for index in range(orders):
            order = {"order_id": f"o{hour}-{index}", "merchant": self.rng.choice(MERCHANTS),
                     "amount": self.rng.randrange(1, 500),
                     "order_time": START_MS + hour * HOUR_MS + index * (HOUR_MS // orders)}
            self.orders[order["order_id"]] = order
            new.append(order)
        self._write("orders", [json.dumps(order) for order in new] + ['{"order_id": "no time"}'])
        # Paid 0 to 80 minutes after the order (past the hour: not joined); a payment that lands a
        # run later is paid 40 to 60 minutes after it, so it is never older than the join's
        # watermark then (the hour before's payments, less the allowed lateness).
        low, high = (0, 80) if pay_now else (40, 60)
        payments = [{"payment_id": f"p-{order['order_id']}", "order_id": order["order_id"],
                     "paid_time": order["order_time"] + self.rng.randrange(low * 60_000, high * 60_000)}
                    for order in new if self.rng.random() < 0.8]
        if pay_now:
            self.pay(payments)
        return payments

    def pay(self, payments: list[dict]) -> None:
        self.payments.extend(payments)
        self._write("payments", [json.dumps(payment) for payment in payments] + ["not json"])

    def expected(self) -> dict:
        paid = sorted((payment["order_id"], payment["payment_id"]) for payment in self.payments
                      if 0 <= payment["paid_time"] - self.orders[payment["order_id"]]["order_time"] <= HOUR_MS)
        revenue: Counter = Counter()
        counts: Counter = Counter()
        for order_id, _payment in paid:
            order = self.orders[order_id]
            key = (order["merchant"], order["order_time"] - order["order_time"] % HOUR_MS)
            counts[key] += 1
            revenue[key] += order["amount"]
        return {"orders": sorted(self.orders), "payments": sorted(p["payment_id"] for p in self.payments),
                "paid": paid, "revenue": {key: (counts[key], revenue[key]) for key in counts}}


def actual(spark, home: Path) -> dict:
    def rows(relative: str):
        return spark.read.format("delta").load(str(home / relative)).collect()

    return {
        "orders": sorted(row.order_id for row in rows(f"tables/bronze/{NAME}_orders")),
        "payments": sorted(row.payment_id for row in rows(f"tables/bronze/{NAME}_payments")),
        "paid": sorted((row.order_id, row.payment_id) for row in rows(f"tables/silver/{NAME}_paid")),
        "revenue": {(row.merchant, int(row.window_start.timestamp() * 1000)): (row.orders, row.amount)
                    for row in rows(f"tables/gold/{NAME}_revenue")},
    }


@pytest.fixture
def team(tmp_path, monkeypatch):
    specs = tmp_path / "team"
    specs.mkdir()
    (specs / f"{NAME}.yaml").write_text(SPEC)
    (specs / f"{NAME}.py").write_text(MODULE)
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(specs))
    monkeypatch.setenv("LAKEHOUSE_QUALITY", str(tmp_path / "quality"))
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "lake"))
    return tmp_path / "lake"


def _rollback(capsys, hop: str, batch: int) -> dict:
    capsys.readouterr()
    assert main(["rollback", NAME, "--hop", hop, "--to-batch", str(batch), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_join_runs_in_increments_rolls_back_each_source_and_equals_its_backfill(spark, team, tmp_path, capsys,
                                                                                   monkeypatch):
    home = team
    landing = Landing(home, seed=5)
    landing.increment(0)
    assert main(["run", NAME]) == 0
    assert actual(spark, home) == landing.expected()
    landing.increment(1)
    later = landing.increment(2, pay_now=False)  # orders now, their payments a run later
    assert main(["run", NAME]) == 0
    assert actual(spark, home) == landing.expected()
    landing.pay(later)
    landing.increment(3)
    assert main(["run", NAME]) == 0
    expected = landing.expected()
    assert actual(spark, home) == expected and len(expected["paid"]) > 60

    # Undo the payments' last batch: the join and the aggregate below follow; the orders keep theirs.
    orders_version = delta_log.table_version(str(home / f"tables/bronze/{NAME}_orders"))
    orders_offsets = checkpoint_log.offset_batch_ids(str(home / f"checkpoints/{NAME}/orders"))
    document = _rollback(capsys, "payments", 1)
    steps = {step["hop"]: step for step in document["plan"]["hops"]}
    assert list(steps) == ["payments", "paid", "revenue"] and steps["payments"]["undone"] == [2]
    assert steps["paid"]["restored_upstreams"] == (["payments"] if steps["paid"]["target_batch"] >= 0 else [])
    assert delta_log.table_version(str(home / f"tables/bronze/{NAME}_orders")) == orders_version
    assert checkpoint_log.offset_batch_ids(str(home / f"checkpoints/{NAME}/orders")) == orders_offsets
    assert main(["run", NAME]) == 0
    assert actual(spark, home) == expected

    # Undo the orders' last two batches; a new increment lands before the replay: equal again.
    document = _rollback(capsys, "orders", 0)
    steps = {step["hop"]: step for step in document["plan"]["hops"]}
    assert list(steps) == ["orders", "paid", "revenue"] and steps["orders"]["undone"] == [1, 2]
    # The join's payments side was restored by the first rollback after its kept batches read it:
    # re-reading it from there would take the undone appends again, so the join starts over.
    assert steps["paid"]["target_batch"] == steps["revenue"]["target_batch"] == -1
    assert any(note.startswith("paid: starts over from payments's table") for note in document["plan"]["notes"])
    landing.increment(4)
    assert main(["run", NAME]) == 0
    expected = landing.expected()
    assert actual(spark, home) == expected
    # status and checkpoint validate read the join's two sources and its state stores (one
    # folder per side and kind in each partition) as plain files.
    capsys.readouterr()
    assert main(["status", NAME, "--hop", "paid", "--json"]) == 0
    paid = json.loads(capsys.readouterr().out)["hops"][0]
    assert paid["kind"] == "join" and paid["feeds"] == ["revenue"] and paid["pending_batch"] is None
    from spark_jobs.control.status import pending_work
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.spec import get_spec
    assert not any(pending_work(Lake.open(get_spec(NAME))).values())
    stores = checkpoint_log.state_files(str(home / f"checkpoints/{NAME}/paid"))
    assert {store.rsplit("/", 1)[-1] for store in stores} == {
        f"{side}-{kind}" for side in ("left", "right") for kind in ("keyToNumValues", "keyWithIndexToValue")}
    assert main(["checkpoint", "validate", NAME, "--json"]) == 0

    # The same landing files backfilled into an empty lake: every table equals the stream's.
    other = tmp_path / "backfilled"
    shutil.copytree(home / "landing", other / "landing")
    monkeypatch.setenv("LAKEHOUSE_HOME", str(other))
    assert main(["backfill", NAME, "--start", "2026-03-01T00:00:00", "--end", "2026-03-01T08:00:00"]) == 0
    assert actual(spark, other) == expected
