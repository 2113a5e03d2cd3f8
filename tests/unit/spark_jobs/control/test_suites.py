"""``spark_jobs/control/suites.py``: which run ``lakehouse quality`` checks, read from the run
records a real lake holds (``tests/fixtures/lakes/history``; no JVM)."""

from __future__ import annotations

import json

import pytest

from spark_jobs.control.suites import run_to_check, suite_path
from spark_jobs.model.errors import UsageError
from testkit.lakes import fixture_lake
from testkit.paths import ROOT

pytestmark = pytest.mark.unit


def _with_suite(lake):
    """``lake`` with the example's suite of silver where the spec looks for it."""
    path = suite_path(lake.spec, lake.spec.hop("silver"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text((ROOT / "examples" / "ad_events" / "quality" / "silver.json").read_text())
    return path


def test_the_run_checked_is_the_last_succeeded_one_or_the_one_asked_for(tmp_path):
    lake = fixture_lake("history", tmp_path)
    _with_suite(lake)
    hop = lake.spec.hop("silver")
    # expected from the record files themselves, oldest first by their start
    records = [
        json.loads(path.read_text())
        for path in sorted((tmp_path / "history").rglob("*"))
        if path.suffix == ".json" and "/_ops/runs/" in path.as_posix()
    ]
    succeeded = sorted(
        (
            r
            for r in records
            if r["hop"] == "silver" and r["status"] == "succeeded" and r["mode"] != "continuous"
        ),
        key=lambda r: r["started_at"],
    )
    assert len(succeeded) >= 2
    assert run_to_check(lake, hop)["run_id"] == succeeded[-1]["run_id"]
    assert run_to_check(lake, hop, succeeded[0]["run_id"])["run_id"] == succeeded[0]["run_id"]
    with pytest.raises(
        UsageError, match="no succeeded run 'nope' of silver: see `lakehouse status"
    ):
        run_to_check(lake, hop, "nope")


def test_a_hop_without_a_suite_or_a_run_is_refused_with_the_fix(tmp_path):
    lake = fixture_lake("history", tmp_path)
    suite = _with_suite(lake)
    for path in (tmp_path / "history").rglob("*.json"):
        if "/_ops/runs/" in path.as_posix():
            path.unlink()
    with pytest.raises(
        UsageError, match="silver has no succeeded run to check yet: `lakehouse run"
    ):
        run_to_check(lake, lake.spec.hop("silver"))
    suite.unlink()
    with pytest.raises(UsageError, match="hop silver has no quality suite: add .*silver.json"):
        run_to_check(lake, lake.spec.hop("silver"))
