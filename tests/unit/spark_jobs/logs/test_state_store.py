"""``spark_jobs/logs/state_store.py``: which state versions load, and which old state files can go
while every version from the kept one still loads (random stores, no Spark)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from spark_jobs.logs import state_store

pytestmark = pytest.mark.unit


def test_state_versions_load_from_a_snapshot_or_an_unbroken_chain_of_deltas():
    deltas = {v: [(f"{v}.delta", "delta")] for v in range(1, 6)}
    assert state_store.state_loadable(deltas, 5)
    assert not state_store.state_loadable({k: v for k, v in deltas.items() if k != 3}, 5)
    assert state_store.state_loadable(
        {**{k: v for k, v in deltas.items() if k != 3}, 4: [("4.snapshot", "snapshot")]}, 5
    )
    assert state_store.state_loadable({}, 0) and not state_store.state_loadable({}, 1)
    rocks = {7: [("7_ab12.zip", "zip")], 8: [("8_cd34.changelog", "changelog")]}
    assert state_store.state_loadable(rocks, 8) and not state_store.state_loadable(rocks, 9)


@pytest.mark.parametrize("seed", range(30), ids=[f"seed{seed}" for seed in range(30)])
def test_old_state_files_go_and_every_version_from_the_kept_one_still_loads(tmp_path, seed):
    """Random HDFS-backed stores (deltas for versions 1..n, snapshots at random versions, some
    partitions of a join's several stores): after deleting what ``state_before(V)`` lists, every
    version from V on that loaded before still loads, and what is gone is exactly the files older
    than the newest snapshot at or before V (computed here by a loop over the files)."""
    from spark_jobs.logs import state_store

    rng = random.Random(seed)
    checkpoint = tmp_path / "checkpoint"
    latest = rng.randint(1, 30)
    written: dict[Path, int] = {}
    for partition in range(rng.randint(1, 3)):
        folder = checkpoint / "state" / "0" / str(partition)
        for store in ["left", "right"] if rng.random() < 0.3 else [""]:
            where = folder / store if store else folder
            where.mkdir(parents=True, exist_ok=True)
            for version in range(1, latest + 1):
                for kind in ["delta"] + (["snapshot"] if rng.random() < 0.25 else []):
                    path = where / f"{version}.{kind}"
                    path.write_text("x")
                    (where / f".{version}.{kind}.crc").write_text("c")
                    written[path] = version
    keep = rng.randint(0, latest)
    before = state_store.state_files(str(checkpoint))
    loadable = {
        (store, v)
        for store, versions in before.items()
        for v in range(keep, latest + 1)
        if state_store.state_loadable(versions, v)
    }
    expected = set()
    for store in {path.parent for path in written}:
        snapshots = [
            v
            for path, v in written.items()
            if path.parent == store and path.suffix == ".snapshot" and v <= keep
        ]
        if snapshots:
            expected |= {
                str(path)
                for path, v in written.items()
                if path.parent == store and v < max(snapshots)
            }
    old = state_store.state_before(str(checkpoint), keep)
    assert set(old) == expected
    for path in old:
        Path(path).unlink()
    after = state_store.state_files(str(checkpoint))
    assert {
        (store, v)
        for store, versions in after.items()
        for v in range(keep, latest + 1)
        if state_store.state_loadable(versions, v)
    } == loadable
