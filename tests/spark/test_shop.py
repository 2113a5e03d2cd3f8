"""The shipped ``shop`` pipeline, a graph of hops written only as a spec, its code
and suites in include/: orders (JSON lines) and payments (CSV with a header) each ingested with
quarantine, orders de-duplicated within the watermark, a stream-stream join of each order with
its payment within an hour (two upstreams, state stores on each side), and an hourly aggregate
below it. Its quality gates run on every run (the shipped suites).

Every table is compared with what the landing files say, computed here in plain Python: after
runs where payments land with their orders and runs where they land a run later (the join's
state holds the orders meanwhile), resends of an order in the same file and in the next run's
(silver keeps one), after a run SIGKILLed at a random moment and run again, after a rollback of
each source (the hops below follow, the other source does not), and a backfill into an empty
lake equals the stream.
The stream equals the backfill when no row arrives later than the watermark allows: each
file's payments are never older than the newest orders of earlier runs minus the allowed
lateness, and an order's resend lands before the watermark passes the order's time plus the
allowed lateness (the conditions under which Spark's join and de-duplication drop nothing).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import time
from collections import Counter

import pytest

from spark_jobs.cli import main
from spark_jobs.logs import checkpoint_log, delta_log, state_store
from spark_jobs.logs.ops import read_records
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import get_spec
from testkit.paths import EXAMPLES, VENV_BIN, killed_mid_run
from testkit.shop_model import HOPS, NAME, TABLES, Landing, actual, assert_tables

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow, pytest.mark.quality]


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A lake of its own; the shipped spec, code and suites."""
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "lake"))
    return tmp_path / "lake"


def _rollback(capsys, hop: str, batch: int) -> dict:
    capsys.readouterr()
    assert main(["rollback", NAME, "--hop", hop, "--to-batch", str(batch), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_shop_runs_in_increments_rolls_back_each_source_and_equals_its_backfill(
    spark, airflow_in_process, home, tmp_path, capsys, monkeypatch
):
    from testkit.airflow import dag_test

    landing = Landing(home, seed=5)
    landing.increment(0)
    # The first increment through the platform's stream DAG (Airflow's dag.test(), the Spark
    # commands in this process): both sources side by side, the join after both, every gate.
    _run_id, state, tasks = dag_test(f"{NAME}__stream")
    assert state == "success" and {
        task: tasks[task]
        for task in (
            "bronze_orders",
            "bronze_payments",
            "silver_paid",
            "gate_gold_merchant_revenue",
            "undo",
        )
    } == {
        "bronze_orders": "success",
        "bronze_payments": "success",
        "silver_paid": "success",
        "gate_gold_merchant_revenue": "success",
        "undo": "skipped",
    }, tasks
    assert_tables(home, landing.expected())
    # The other runs check only bronze_orders' suite, whose drop rule the expected tables count
    # on (every gate ran above; each costs about half a second a run).
    drop_only = home.parent / "suites"
    (drop_only / NAME).mkdir(parents=True)
    shutil.copy(EXAMPLES / NAME / "quality" / "bronze_orders.json", drop_only / NAME)
    monkeypatch.setenv("LAKEHOUSE_QUALITY", str(drop_only))
    landing.increment(1)
    later = landing.increment(2, pay_now=False)  # orders now, their payments a run later
    assert main(["run", NAME]) == 0
    assert_tables(home, landing.expected())
    landing.pay(later)
    landing.increment(3)
    # This run is SIGKILLed (the CLI and its JVM) at a seeded random moment after bronze_orders
    # committed its batch, then run again: as if it had never been interrupted (each hop's batch
    # is the one the killed run planned, or the same one planned again).
    seed = int(os.environ.get("KILL_SEED", random.randrange(10**6)))
    extra = random.Random(seed).uniform(0, 6)
    killed, code, _out = killed_mid_run(
        ["run", NAME], extra, after=home / f"checkpoints/{NAME}/bronze_orders/commits/2"
    )
    print(f"KILL_SEED={seed}: killed {extra:.1f} s after bronze_orders' batch 2 (exit {code})")
    assert killed, "the run ended before the kill: not a mid-run kill"
    assert main(["run", NAME]) == 0, f"KILL_SEED={seed}"  # the seed that reproduces it
    expected = landing.expected()
    assert_tables(home, expected)
    assert len(expected["paid"]) > 60
    # The header lines were dropped, not quarantined: each payments file quarantined
    # its one bad row.
    payments_bad = spark.read.format("delta").load(str(home / "tables/quarantine/shop_payments"))
    assert (
        sorted(row.raw_line.rstrip("\r") for row in payments_bad.collect()) == ["p-x,o-x,1.00"] * 4
    )
    # Each orders file's bad line (it lacks fields) and its order of amount zero, which the
    # shipped suite's drop rule took out of bronze_orders.
    orders_bad = (
        spark.read.format("delta").load(str(home / "tables/quarantine/shop_orders")).collect()
    )
    assert (
        sorted(row.raw_line for row in orders_bad if not row.reason.startswith("quality:"))
        == ['{"order_id": "o-no-time"}'] * 4
    )
    assert sorted(
        json.loads(row.raw_line)["order_id"]
        for row in orders_bad
        if row.reason.startswith("quality:")
    ) == sorted(order["order_id"] for order in landing.orders if order["amount"] == 0)
    # Each run's record counts what the rule dropped as the quarantine holds it, batch by batch
    # (the quarantine's emptiness check once made the count one row's).
    rule = "expect_column_values_to_be_between(amount)"
    by_batch = Counter(row._batch_id for row in orders_bad if row.reason == f"quality: {rule}")
    records = [
        record
        for record in read_records(Lake.open(get_spec(NAME)), "bronze_orders")
        if record["status"] == "succeeded" and record["batch_ids"] and record["mode"] == "run-once"
    ]
    assert len(records) >= 2 and sum(by_batch.values()) >= 3
    for record in records:
        assert record["rows_dropped_by_rule"].get(rule, 0) == sum(
            by_batch[batch] for batch in record["batch_ids"]
        ), record

    # Undo the payments' last batch: the join and the aggregate below follow; the
    # orders keep theirs.
    orders_version = delta_log.table_version(str(home / TABLES["orders"]))
    orders_offsets = checkpoint_log.offset_batch_ids(
        str(home / f"checkpoints/{NAME}/bronze_orders")
    )
    document = _rollback(capsys, "bronze_payments", 1)
    steps = {step["hop"]: step for step in document["plan"]["hops"]}
    assert list(steps) == ["bronze_payments", "silver_paid", "gold_merchant_revenue"]
    assert steps["bronze_payments"]["undone"] == [2]
    assert steps["silver_paid"]["restored_upstreams"] == (
        ["bronze_payments"] if steps["silver_paid"]["target_batch"] >= 0 else []
    )
    assert delta_log.table_version(str(home / TABLES["orders"])) == orders_version
    assert (
        checkpoint_log.offset_batch_ids(str(home / f"checkpoints/{NAME}/bronze_orders"))
        == orders_offsets
    )
    assert main(["run", NAME]) == 0, f"KILL_SEED={seed}"  # the seed that reproduces it
    assert_tables(home, expected)

    # Undo the orders' last two batches through both hops below them; a new increment lands
    # before the replay: equal again.
    document = _rollback(capsys, "bronze_orders", 0)
    steps = {step["hop"]: step for step in document["plan"]["hops"]}
    assert list(steps) == ["bronze_orders", "silver_orders", "silver_paid", "gold_merchant_revenue"]
    assert steps["bronze_orders"]["undone"] == [1, 2]
    # The join's payments side was restored by the first rollback after its kept batches read it:
    # re-reading it from there would take the undone appends again, so the join starts over.
    assert (
        steps["silver_paid"]["target_batch"] == steps["gold_merchant_revenue"]["target_batch"] == -1
    )
    assert any(
        note.startswith("silver_paid: starts over from bronze_payments's table")
        for note in document["plan"]["notes"]
    ), document["plan"]["notes"]
    landing.increment(4)
    assert main(["run", NAME]) == 0, f"KILL_SEED={seed}"  # the seed that reproduces it
    expected = landing.expected()
    assert_tables(home, expected)
    # status and checkpoint validate read the join's two sources and its state stores (one
    # folder per side and kind in each partition) as plain files.
    capsys.readouterr()
    assert main(["status", NAME, "--hop", "silver_paid", "--json"]) == 0
    paid = json.loads(capsys.readouterr().out)["hops"][0]
    assert (
        paid["kind"] == "join"
        and paid["feeds"] == ["gold_merchant_revenue"]
        and paid["pending_batch"] is None
    )
    from spark_jobs.control.status import pending_work

    assert not any(pending_work(Lake.open(get_spec(NAME))).values())
    stores = state_store.state_files(str(home / f"checkpoints/{NAME}/silver_paid"))
    assert {store.rsplit("/", 1)[-1] for store in stores} == {
        f"{side}-{kind}"
        for side in ("left", "right")
        for kind in ("keyToNumValues", "keyWithIndexToValue")
    }
    assert main(["checkpoint", "validate", NAME, "--json"]) == 0

    # The same landing files backfilled into an empty lake: every table equals the stream's.
    other = tmp_path / "backfilled"
    shutil.copytree(home / "landing", other / "landing")
    monkeypatch.setenv("LAKEHOUSE_HOME", str(other))
    assert (
        main(["backfill", NAME, "--start", "2026-03-01T00:00:00", "--end", "2026-03-01T08:00:00"])
        == 0
    )
    assert_tables(other, expected)
    # Then the stream on that lake: the next increment resends the backfilled hour's last order,
    # which the stream's de-duplication never saw (it reads appends, not a backfill's rows);
    # silver_orders' `unique` keeps it once (shop's model, seed 41, found it written twice).
    landing.home = other
    landing.increment(5)
    assert main(["run", NAME]) == 0
    assert_tables(other, landing.expected())
    # A backfill over a streamed hour and one whose files no stream read yet (shop's model, seeds
    # 45 and 47): it rewrites silver_orders' rows of 05:xx, so its commit is one the join's stream
    # skips, and the orders of 06:xx reach the join only through silver_paid's backfill; their
    # payments made after 07:00 (outside the range) come through the stream, which pairs streamed
    # rows only. The run repairs the join over the range widened by its `within`, then gold.
    landing.increment(6)
    assert (
        main(["backfill", NAME, "--start", "2026-03-01T05:00:00", "--end", "2026-03-01T07:00:00"])
        == 0
    )
    capsys.readouterr()
    assert main(["run", NAME]) == 0
    said = capsys.readouterr().err
    assert_tables(other, landing.expected())
    repaired = re.search(r"\[silver_paid\] repair: recomputing (\S+) \.\. (\S+),", said)
    assert repaired and repaired[1] <= "2026-03-01T05:00" and repaired[2] >= "2026-03-01T08:00", (
        said[-2000:]
    )
    assert "[gold_merchant_revenue] repair: recomputing" in said

    # The same after an always-on session (`run --continuous`, stopped with Ctrl-C): it keeps the
    # tables current while it runs, and repairs the join when it stops, as a run-once run does
    # after each hop's stream (its payments of 08:xx meet the orders of 07:xx the backfill wrote).
    landing.increment(7)
    assert (
        main(["backfill", NAME, "--start", "2026-03-01T06:00:00", "--end", "2026-03-01T08:00:00"])
        == 0
    )
    stderr = tmp_path / "always-on.log"
    with stderr.open("w") as err:
        session = subprocess.Popen(
            [
                str(VENV_BIN / "lakehouse"),
                "run",
                NAME,
                "--continuous",
                "--trigger-interval",
                "2 seconds",
                "--json",
                "--run-id",
                "always-on",
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            start_new_session=True,
        )
    try:
        landing.increment(8)  # while it runs
        expected = landing.expected()

        # every row landed, and the pairs of the orders of 08:xx, streamed on both sides
        def current() -> bool:
            found = actual(other)
            return all(
                found[name] == expected[name] for name in ("orders", "payments", "latest")
            ) and {pair for pair in expected["paid"] if pair[0].startswith("o-8-")} <= set(
                found["paid"]
            )

        deadline = time.time() + 180
        while not current():
            assert session.poll() is None and time.time() < deadline, stderr.read_text()[-2000:]
            time.sleep(2)
        os.killpg(session.pid, signal.SIGINT)  # what Ctrl-C sends; pyspark's JVM ignores it
        out, _ = session.communicate(timeout=180)
    finally:
        if session.poll() is None:
            os.killpg(session.pid, signal.SIGKILL)
            session.wait()
    said = stderr.read_text()
    assert session.returncode == 0, said[-2000:]
    assert out.startswith("{"), out[:2000]
    assert [(hop["hop"], hop["mode"], hop["status"]) for hop in json.loads(out)["hops"]] == [
        (hop, "continuous", "succeeded") for hop in HOPS
    ]
    # Under --json the session prints no progress: its repair of the join is in the run records.
    repairs = [
        json.loads(path.read_text())
        for path in (other / "_ops/runs" / NAME).glob("always-on.repair-*.silver_paid.json")
    ]
    assert repairs and all(
        record["repair"] and record["status"] == "succeeded" for record in repairs
    ), said[-2000:]
    assert_tables(other, expected)


# Orders beyond the allowed lateness: after every run each table equals a twin lake that never
# rolled back, late drops included (testkit/shop_model_late.py).
LATE_SEQUENCES = [
    # a killed cascade from silver_orders replayed: red when the replay's offsets carry watermark 0
    (4, 12),
]


@pytest.mark.parametrize(
    "seed,steps", LATE_SEQUENCES, ids=[f"seed{seed}" for seed, _ in LATE_SEQUENCES]
)
def test_random_shop_sequences_with_late_orders_equal_a_twin_that_never_rolled_back(
    spark, home, monkeypatch, seed, steps
):
    from testkit.shop_model_late import run_sequence

    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(EXAMPLES))
    steps = int(os.environ.get("MODEL_STEPS", steps))
    sequence = run_sequence(spark, home, home.parent / "twin", seed, steps)
    print("\n".join(sequence.transcript))
    taken = [
        line
        for line in sequence.transcript
        if line.startswith("rollback") and "not taken" not in line
    ]
    assert taken and sequence.compared >= 3 and sequence.dropped_late > 0, (taken, sequence.figures)
