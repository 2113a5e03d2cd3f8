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
