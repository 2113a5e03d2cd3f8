"""``spark_jobs/control/hop_state.py``: one hop of one lake as the runner, the rollback planner
and the readers take it, against the spec files and the checkpoint folders themselves (no JVM):
its paths and the tables it writes (the runner records a version of each, a rollback restores
each), the spec as the hop sees it, and its checkpoint's batch ids, read once."""

from __future__ import annotations

import shutil

import pytest
import yaml

from spark_jobs.control.hop_state import HopState
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import get_spec, load_spec
from testkit.lakes import fixture_lake, spec_copy
from testkit.paths import EXAMPLES
from tests.unit.spark_jobs.control._helpers import numbered

pytestmark = pytest.mark.unit


def _raw_hops(pipeline: str) -> dict[str, dict]:
    spec = yaml.safe_load((EXAMPLES / pipeline / f"{pipeline}.yaml").read_text())
    return {hop["name"]: hop for hop in spec["hops"]}


@pytest.mark.parametrize("home", ["/data/lake", "s3a://bucket/lake"])
def test_a_hops_paths_are_its_lakes_and_it_lists_every_table_it_writes(home):
    for pipeline, hop, deleted_keys in (
        ("ad_events", "bronze", False),
        ("ad_events", "gold", False),
        # a changes hop fed by a log (its table keeps the sequence) remembers its deleted keys
        ("crm", "customers", True),
    ):
        raw = _raw_hops(pipeline)[hop]
        state = HopState(Lake(home, get_spec(pipeline)), get_spec(pipeline).hop(hop))
        table = f"{home}/{raw['table']}"
        quarantine = f"{home}/{raw['quarantine']}" if "quarantine" in raw else None
        assert (state.checkpoint, state.table, state.quarantine) == (
            f"{home}/checkpoints/{pipeline}/{hop}",
            table,
            quarantine,
        )
        others = [quarantine] if quarantine else []
        others += [f"{table}_deleted_keys"] if deleted_keys else []
        assert state.tables == [table, *others], (pipeline, hop)


def test_the_spec_is_the_pipelines_with_the_hops_own_event_time(tmp_path):
    pipeline = yaml.safe_load((EXAMPLES / "ad_events" / "ad_events.yaml").read_text())
    hops = pipeline["hops"]
    hops[-1].update(window="1 minute", allowed_lateness="5 minutes")  # gold's own
    folder = spec_copy(tmp_path / "pipelines", hops=hops)
    spec = load_spec(folder / "ad_events" / "ad_events.yaml")
    lake = Lake(str(tmp_path / "lake"), spec)
    gold, silver = (HopState(lake, spec.hop(name)).spec for name in ("gold", "silver"))
    assert (gold.window, gold.allowed_lateness) == ("1 minute", "5 minutes")
    assert (silver.window, silver.allowed_lateness) == (
        pipeline["window"],
        pipeline["allowed_lateness"],
    )
    # the rest is the pipeline's
    assert (gold.name, gold.hops, gold.freshness) == (spec.name, spec.hops, spec.freshness)


def test_batch_ids_are_read_once_and_a_new_state_sees_a_batch_planned_since(tmp_path):
    lake = fixture_lake("history", tmp_path)
    hop = lake.spec.hop("gold")
    state = HopState(lake, hop)
    folder = tmp_path / "history" / "checkpoints" / "ad_events" / "gold"
    planned, committed = numbered(folder / "offsets"), numbered(folder / "commits")
    assert planned and (state.offsets, state.committed) == (planned, committed)

    # The next batch planned (its offsets file written), not committed yet.
    following = planned[-1] + 1
    shutil.copy(folder / "offsets" / str(planned[-1]), folder / "offsets" / str(following))
    assert (state.offsets, state.committed) == (planned, committed)  # as first read
    fresh = HopState(lake, hop)
    assert (fresh.offsets, fresh.committed) == (planned + [following], committed)
