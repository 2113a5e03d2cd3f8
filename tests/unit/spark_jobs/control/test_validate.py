"""``spark_jobs/control/validate.py``: ``checkpoint validate`` on lakes real runs wrote, clean and
then with one file damaged at a time (no JVM)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_jobs.control.hop_state import HopState
from spark_jobs.control.rollback import lineage
from spark_jobs.control.validate import validate
from testkit.lakes import fixture_lake
from tests.unit.spark_jobs.control._helpers import SCENARIOS, numbered

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_lake_runs_wrote_validates_clean_and_is_rolled_back_as_far_as_its_logs_go(tmp_path, name):
    lake = fixture_lake(name, tmp_path)
    assert validate(lake) == []
    for hop in lake.spec.hops:
        assert (
            lineage.horizon(HopState(lake, hop)) == -1
        )  # every log kept: back to before the first batch


@pytest.mark.parametrize(
    "damage, kind",
    [
        ("truncate offsets", "damaged-offsets"),
        ("drop the last two commits", "commits-lag"),
        ("garble metadata", "damaged-metadata"),
        ("drop the compacted source log", "missing-compact"),
        ("drop the last source log", "missing-source-log"),
    ],
    ids=[
        "truncated-offsets",
        "commits-missing",
        "metadata",
        "compact-source-log",
        "last-source-log",
    ],
)
def test_one_damaged_file_is_found_and_named(tmp_path, damage, kind):
    lake = fixture_lake("history", tmp_path)
    bronze = lake.spec.hop("bronze")
    checkpoint = Path(lake.checkpoint(bronze))
    last = numbered(checkpoint / "offsets")[-1]
    if damage == "truncate offsets":
        (checkpoint / "offsets" / str(last)).write_text('v1\n{"batchWatermarkMs":')
    elif damage == "drop the last two commits":  # one missing is a batch to run again, not damage
        for batch in (last, last - 1):
            (checkpoint / "commits" / str(batch)).unlink()
    elif damage == "garble metadata":
        (checkpoint / "metadata").write_text("{not json")
    # the log compacts every 2 batches: 1.compact holds 0 and 1
    elif damage == "drop the compacted source log":
        (checkpoint / "sources" / "0" / "1.compact").unlink()
    # the offsets of the last batch name it: Spark would list its files as new and read them twice
    else:
        (checkpoint / "sources" / "0" / str(last)).unlink()
    found = validate(lake)
    assert [(finding.hop, finding.kind) for finding in found] == [("bronze", kind)], found
    assert found[0].fix
