"""``status``'s late-row count against a plain-Python history of runs and rollbacks (no JVM)."""

from __future__ import annotations

import random

import pytest

from spark_jobs.control.status import held_late_rows

pytestmark = [pytest.mark.unit]


@pytest.mark.parametrize("seed", range(30), ids=lambda seed: f"seed{seed}")
def test_the_late_count_is_that_of_the_batches_the_hop_still_holds(seed):
    """Random runs (each a few batches, each dropping some rows as late) and rollbacks (to any
    batch, -1 included): the count equals the late rows of the batches the model's history
    holds, however runs straddle a rollback's target and rollbacks follow each other."""
    rng = random.Random(seed)
    held: list[tuple[int, int]] = []  # the model: (batch id, late rows) of the batches the hop holds
    records, cuts = [], []
    clock = 0.0
    for _step in range(rng.randint(3, 25)):
        clock += 1
        if held and rng.random() < 0.3:
            target = rng.randint(-1, held[-1][0])
            held = [(batch, late) for batch, late in held if batch <= target]
            cuts.append((clock, target))
            continue
        first = held[-1][0] + 1 if held else 0
        batches = [(first + offset, rng.choice([0, 0, 1, 3])) for offset in range(rng.randint(0, 3))]
        held.extend(batches)
        records.append({"started_at": clock, "rows_dropped_late": sum(late for _batch, late in batches),
                        "progress": [{"batch_id": batch, "rows_dropped_late": late} for batch, late in batches]})
    assert held_late_rows(records, cuts) == sum(late for _batch, late in held)
