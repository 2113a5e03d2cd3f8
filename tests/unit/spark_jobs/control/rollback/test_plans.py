"""``spark_jobs/control/rollback/plans.py``: plans and journals round-trip through JSON (an earlier
commit's journal included), and ``--exact`` refuses where a hop cannot replay as logged (no JVM)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_jobs.control.rollback import planner
from spark_jobs.control.rollback.plans import Journal, Plan, Request
from testkit.lakes import fixture_lake

pytestmark = pytest.mark.unit


def test_a_plan_and_an_earlier_commits_journal_round_trip_through_json(tmp_path):
    lake = fixture_lake("replayed", tmp_path)
    plan = planner.plan(lake, Request("bronze", to_batch=0))
    assert Plan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
    [path] = Path(lake.rollbacks).glob("*.json")
    written = json.loads(path.read_text())  # by the code that wrote the fixture
    assert Journal.from_dict(written).to_dict() == written
    # A journal from before joins: no restored_upstreams, one upstream's skip as skip_to_version.
    older = json.loads(path.read_text())
    for step in older["plan"]["hops"]:
        for key in ("restored_upstreams", "skip_versions", "rebackfill", "reread_files"):
            step.pop(key, None)
        step["skip_to_version"] = 3
    del older["plan"]["backfills"]
    loaded = Journal.from_dict(older)
    assert [step.skip_to_version for step in loaded.plan.hops] == [3, 3, 3]
    assert loaded.plan.hops[1].restored_upstreams == [] and loaded.plan.backfills == []


def test_an_exact_rollback_is_refused_where_a_hop_cannot_replay_as_logged(
    tmp_path, monkeypatch, capsys
):
    """``--exact``: the user's choice to refuse rather than plan afresh. Silver back to before its
    first batch starts over (silver and gold), so the rollback is refused with each hop's reason
    and its fix, and nothing changes; silver back to its batch 0 replays exactly and goes ahead
    (as a dry run here). ``--exact`` with ``--replan`` is a usage error."""
    from spark_jobs.cli import main
    from spark_jobs.logs.event_log import read as read_events
    from testkit.paths import unrefused_tree

    lake = fixture_lake("history", tmp_path)
    monkeypatch.setenv("LAKEHOUSE_HOME", lake.home)
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(tmp_path / "history-pipelines"))
    before = unrefused_tree(Path(lake.home))
    assert main(["rollback", "ad_events", "--hop", "silver", "--to-batch", "-1", "--exact"]) == 2
    error = capsys.readouterr().err
    for hop in ("silver", "gold"):
        assert (
            f"{hop}: cannot replay batches 0.." in error
            and "as logged (it starts over (back to before its first "
            "batch)): roll back with --replan to plan them afresh, or to another point"
            in error
        ), error
    # nothing changes but the record of the refusal, and its event in the event log
    assert unrefused_tree(Path(lake.home)) == before
    [refused] = [event for event in read_events(lake.events) if event["event_type"] == "refused"]
    assert refused["level"] == "ERROR" and "cannot replay batches 0.." in refused["message"]
    assert refused["details"]["origin"]["command"] == "rollback"
    assert (
        main(
            [
                "rollback",
                "ad_events",
                "--hop",
                "silver",
                "--to-batch",
                "0",
                "--exact",
                "--dry-run",
                "--json",
            ]
        )
        == 0
    )
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert plan["refused"] == [] and plan["request"]["exact"] is True
    assert (
        main(["rollback", "ad_events", "--hop", "silver", "--to-batch", "0", "--exact", "--replan"])
        == 2
    )
    assert "--replan and --exact contradict each other" in capsys.readouterr().err
    # a journal without it still reads (default off)
    assert "exact" not in Request("gold", to_batch=0).to_dict()
