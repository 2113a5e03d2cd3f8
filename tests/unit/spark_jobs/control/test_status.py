"""``spark_jobs/control/status.py``: ``status`` on lakes real runs wrote (``tests/fixtures/lakes/``)
and its late-row count against a plain-Python history of runs and rollbacks (no JVM). Expected
values come from the lake's own files (listed here), never from the readers."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from spark_jobs.control.status import held_late_rows, pipeline_status
from testkit.lakes import fixture_lake
from tests.unit.spark_jobs.control._helpers import SCENARIOS, numbered

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("seed", range(30), ids=lambda seed: f"seed{seed}")
def test_the_late_count_is_that_of_the_batches_the_hop_still_holds(seed):
    """Random runs (each a few batches, each dropping some rows as late) and rollbacks (to any
    batch, -1 included): the count equals the late rows of the batches the model's history
    holds, however runs straddle a rollback's target and rollbacks follow each other."""
    rng = random.Random(seed)
    # the model: (batch id, late rows) of the batches the hop holds
    held: list[tuple[int, int]] = []
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
        batches = [
            (first + offset, rng.choice([0, 0, 1, 3])) for offset in range(rng.randint(0, 3))
        ]
        held.extend(batches)
        records.append(
            {
                "started_at": clock,
                "rows_dropped_late": sum(late for _batch, late in batches),
                "progress": [
                    {"batch_id": batch, "rows_dropped_late": late} for batch, late in batches
                ],
            }
        )
    assert held_late_rows(records, cuts) == sum(late for _batch, late in held)


def delta_versions(table: str) -> list[int]:
    return sorted(int(path.stem) for path in Path(table, "_delta_log").glob("*.json"))


@pytest.mark.parametrize("name", SCENARIOS)
def test_status_says_what_each_checkpoint_and_table_holds(tmp_path, name):
    lake = fixture_lake(name, tmp_path)
    status = pipeline_status(lake, None)
    assert [hop["hop"] for hop in status["hops"]] == list(lake.spec.hop_names)
    for shown in status["hops"]:
        hop = lake.spec.hop(shown["hop"])
        checkpoint = Path(lake.checkpoint(hop))
        offsets, commits = numbered(checkpoint / "offsets"), numbered(checkpoint / "commits")
        assert (shown["batches"], shown["last_batch"], shown["last_committed_batch"]) == (
            len(offsets),
            offsets[-1],
            commits[-1],
        )
        assert shown["pending_batch"] is None  # every batch of these lakes committed
        assert shown["query_id"] == json.loads((checkpoint / "metadata").read_text())["id"]
        assert shown["table_versions"] == {
            table: delta_versions(table)[-1] for table in lake.tables_of(hop)
        }
        records = [
            json.loads(path.read_text()) for path in Path(lake.runs).glob(f"*.{hop.name}.json")
        ]
        assert shown["runs"] == len(records)
        assert (
            shown["last_run"]["run_id"]
            == max(records, key=lambda record: record["started_at"])["run_id"]
        )


def test_status_says_how_far_back_a_rollback_reaches_in_batches_and_time(tmp_path):
    """history: every batch is still reachable (a rollback can undo all of them). With offsets/0
    gone, as Spark's retention takes it, batches 0 and 1 cannot be targets (each needs its own
    offsets and the one before): the window starts at batch 2, committed when its commit file was
    written."""
    import datetime as dt

    from spark_jobs.control.status import format_status, hop_status, pipeline_status

    lake = fixture_lake("history", tmp_path)
    checkpoint = Path(lake.checkpoint(lake.spec.hop("bronze")))
    commits = numbered(checkpoint / "commits")
    window = hop_status(lake, "bronze", detail=True)["rollback_window"]
    assert window == {
        "batch": -1,
        "since": None,
        "undoable_batches": len(commits),
        "declared": None,
    }
    (checkpoint / "offsets" / "0").unlink()
    shown = hop_status(lake, "bronze", detail=True)
    committed = dt.datetime.fromtimestamp((checkpoint / "commits" / "2").stat().st_mtime, dt.UTC)
    assert (
        shown["rollback_window"]["batch"] == 2
        and shown["rollback_window"]["undoable_batches"] == len(commits) - 3
    )
    assert shown["rollback_window"]["since"][:19] == committed.strftime("%Y-%m-%dT%H:%M:%S")
    text = format_status(pipeline_status(lake, "bronze"))
    assert (
        f"rollback reaches back to batch 2, committed at {shown['rollback_window']['since']}"
        in text
    )
