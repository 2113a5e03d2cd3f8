"""The randomized model check in CI: fixed seeds, a fixed budget of steps.

Each sequence lands files, runs all hops or one (sometimes with ``--max-files-per-trigger``),
rolls any hop back to a random batch, run or time (with or without cascade), backfills random
ranges of any hop, and SIGKILLs any of these at a random moment before running it again (and
compacts and vacuums, ``lakehouse maintain``, and switches bronze's source in the spec and back,
between steps); after
every step the tables are checked against the landing files in plain Python (``testkit/model.py``).
The soak in the benchmark suite runs hundreds of steps the same way.

Replay a failing sequence with ``python -m testkit.model --seed S --steps N``; keep it below.
"""

from __future__ import annotations

import os

import pytest

from testkit.model import run_sequence
from testkit.model_lake import write_spec

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

# (seed, steps): the CI budget, and every sequence that ever failed, kept as a regression case.
SEQUENCES = [
    (2, 10),  # the first steps of seed 2's failed sequence (the whole of it is in SOAK_REGRESSIONS)
]


@pytest.mark.parametrize("seed,steps", SEQUENCES, ids=[f"seed{seed}" for seed, _ in SEQUENCES])
def test_random_sequences_keep_every_table_equal_to_the_landing_files(
    spark, tmp_path, monkeypatch, seed, steps
):
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "lake"))
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(write_spec(tmp_path / "pipelines")))
    steps = int(os.environ.get("MODEL_STEPS", steps))
    sequence = run_sequence(spark, str(tmp_path / "lake"), seed, steps, maintain=True)
    print(sequence.transcript())
    assert sequence.settles >= 1 and sequence.counts["maintain"] >= 1
    between = sequence.counts["maintain"] + sequence.counts["advance"] + sequence.counts["switch"]
    assert sum(sequence.counts.values()) - between == steps + 2  # + land, settle
    _check_the_guides_queries(spark, str(tmp_path / "lake"))


def _check_the_guides_queries(spark, home: str) -> None:
    """The event log the sequence wrote (delta-rs) read by Spark: every row, and the guide's
    queries, answered as plain Python answers them from delta-rs's rows."""
    import json
    import time

    from spark_jobs.logs.event_log import read
    from tests.unit.spark_jobs.control.test_events import guide_blocks

    table = f"{home}/_ops/events"
    rows = read(table)
    by_spark = spark.read.format("delta").load(table)
    assert sorted(row.event_id for row in by_spark.select("event_id").collect()) == sorted(
        row["event_id"] for row in rows
    )
    dropped, last_rollback = (
        spark.sql(query.strip().rstrip(";").replace("/path/to/lake", home)).collect()
        for query in guide_blocks("sql")[0].split(";\n\n")
    )
    week_ago = time.time() - 7 * 86400
    assert sorted(row.run_id for row in dropped) == sorted(
        row["run_id"]
        for row in rows
        if row["hop"] == "silver"
        and row["event_type"] == "run_finished"
        and row["timestamp"] >= week_ago
        and row["details"]["rows_dropped_by_rule"]
    )
    rollbacks = [
        row
        for row in rows
        if row["event_type"] == "rollback_started"
        and any(step["hop"] == "gold" for step in row["details"]["hops"])
    ]
    latest = [max(rollbacks, key=lambda row: row["timestamp"])["message"]] if rollbacks else []
    assert [row.message for row in last_rollback] == latest
    assert all(row.who and row.through == "cli" for row in last_rollback)
    assert json.loads(by_spark.first().details) is not None


# The Kafka variant: bronze reads a topic; landings produce records; a step may restart the broker.
KAFKA_SEQUENCES = [
    (7, 8),
]


@pytest.mark.parametrize(
    "seed,steps", KAFKA_SEQUENCES, ids=[f"seed{seed}" for seed, _ in KAFKA_SEQUENCES]
)
def test_random_sequences_on_a_topic_keep_every_table_equal_to_its_records(
    spark, tmp_path, monkeypatch, seed, steps
):
    from testkit.model import started_broker

    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "lake"))
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(write_spec(tmp_path / "pipelines", kafka=True)))
    steps = int(os.environ.get("MODEL_STEPS", steps))
    with started_broker(tmp_path / "kafka") as broker:  # its settings in the environment meanwhile
        sequence = run_sequence(
            spark, str(tmp_path / "lake"), seed, steps, kafka=broker, maintain=True
        )
    print(sequence.transcript())
    assert sequence.settles >= 1 and sequence.counts["maintain"] >= 1
    between = sequence.counts["maintain"] + sequence.counts["advance"] + sequence.counts["switch"]
    assert sum(sequence.counts.values()) - between == steps + 2  # + land, settle


# Events beyond the allowed lateness: after every rollback's replay, each table equals a twin lake
# that never rolled back, late drops included (testkit/model_late.py).
LATE_SEQUENCES = [
    # two rollbacks replayed (gold alone; bronze with silver and gold below), a refusal to
    # run out of order
    (4, 12),
]


@pytest.mark.parametrize(
    "seed,steps", LATE_SEQUENCES, ids=[f"seed{seed}" for seed, _ in LATE_SEQUENCES]
)
def test_random_sequences_with_late_events_equal_a_twin_that_never_rolled_back(
    spark, tmp_path, monkeypatch, seed, steps
):
    from testkit.model_late import run_sequence, write_spec

    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "lake"))
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(write_spec(tmp_path / "pipelines")))
    steps = int(os.environ.get("MODEL_STEPS", steps))
    sequence, dropped_late = run_sequence(
        spark, str(tmp_path / "lake"), str(tmp_path / "twin"), seed, steps
    )
    print(sequence.transcript())
    taken = [
        step for step in sequence.steps if step.operation == "rollback" and step.outcome == "ok"
    ]
    assert len(taken) >= 2 and sequence.settles >= 1 and dropped_late > 0, (
        len(taken),
        dropped_late,
    )
