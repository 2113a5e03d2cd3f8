"""``spark_jobs/control/rollback/journals.py``: where rollback journals are kept, against the
journal a real rollback wrote (``tests/fixtures/lakes/replayed``) and journals written here, read
back as plain JSON files (no JVM). A journal's own JSON round trip is ``test_plans.py``'s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_jobs.control.rollback.journals import read_rollbacks, write_journal
from spark_jobs.control.rollback.plans import Journal, JournalStatus, JournalStep, Plan, Request
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import load_spec
from testkit.lakes import example_copy, fixture_lake

pytestmark = pytest.mark.unit

FIXTURE_ID = "rb-20261129T073926Z-24b37e"


def _journal(rollback_id: str, created_at: float, pipeline: str = "ad_events") -> Journal:
    plan = Plan(rollback_id, pipeline, Request("silver", to_batch=1), 1)
    return Journal(plan, created_at=created_at, origin={"user": "ana", "interface": "cli"})


def test_the_journal_a_rollback_wrote_is_read_back_as_it_is_on_disk(tmp_path):
    lake = fixture_lake("replayed", tmp_path)
    [path] = Path(lake.rollbacks).glob("*.json")
    assert path.name == f"{FIXTURE_ID}.json"
    on_disk = json.loads(path.read_text())
    [journal] = read_rollbacks(lake)
    assert journal.rollback_id == FIXTURE_ID and journal.finished
    assert [str(step) for step in journal.done] == on_disk["done"]
    assert journal.done[-1] == JournalStep("checkpoint", "gold")
    assert journal.restored == on_disk["restored"]
    assert [step.hop for step in journal.plan.hops] == ["bronze", "silver", "gold"]
    assert journal.to_dict() == on_disk


def test_a_lake_without_rollbacks_has_no_journals(tmp_path):
    lake = fixture_lake("history", tmp_path)
    assert not Path(lake.rollbacks).exists()
    assert read_rollbacks(lake) == []


def test_a_journal_is_written_as_its_rollback_ids_json_file_in_the_pipelines_folder(tmp_path):
    lake = fixture_lake("history", tmp_path)
    journal = _journal("rb-20260401T000000Z-abcdef", 1_775_001_600.5)
    path = write_journal(lake, journal)
    assert path == f"{tmp_path}/history/_ops/rollbacks/ad_events/rb-20260401T000000Z-abcdef.json"
    written = json.loads(Path(path).read_text())
    assert written["plan"]["rollback_id"] == "rb-20260401T000000Z-abcdef"
    assert written["plan"]["request"] == {
        "hop": "silver",
        "to_batch": 1,
        "to_run": None,
        "to_time": None,
        "to_time_iso": None,
        "cascade": True,
    }
    assert (written["status"], written["created_at"], written["done"]) == (
        "running",
        1_775_001_600.5,
        [],
    )
    assert written["origin"] == {"user": "ana", "interface": "cli"}
    # written atomically: nothing but the journal is left in the folder
    assert sorted(each.name for each in Path(lake.rollbacks).iterdir()) == [Path(path).name]
    [read] = read_rollbacks(lake)
    assert read.to_dict() == written


def test_a_journal_written_after_each_step_stays_one_file_with_the_steps_done_so_far(tmp_path):
    lake = fixture_lake("history", tmp_path)
    journal = _journal("rb-1", 1000.0)
    write_journal(lake, journal)
    journal.done.append(JournalStep("restore", "silver", "/lake/tables/silver/ad_views"))
    journal.restored["/lake/tables/silver/ad_views"] = 5
    write_journal(lake, journal)
    journal.done.append(JournalStep("checkpoint", "silver"))
    journal.status = JournalStatus.SUCCEEDED
    journal.finished_at, journal.duration_s = 1012.0, 12.0
    write_journal(lake, journal)
    assert [each.name for each in Path(lake.rollbacks).iterdir()] == ["rb-1.json"]
    [read] = read_rollbacks(lake)
    assert read.finished and (read.finished_at, read.duration_s) == (1012.0, 12.0)
    assert [str(step) for step in read.done] == [
        "restore silver /lake/tables/silver/ad_views",
        "checkpoint silver",
    ]
    assert read.restored == {"/lake/tables/silver/ad_views": 5}


def test_journals_come_oldest_first_by_when_they_were_made_not_by_their_file_names(tmp_path):
    lake = fixture_lake("replayed", tmp_path)  # its journal made at 1795937966.68
    for rollback_id, created_at in [("rb-a", 3000.0), ("rb-b", 1000.0), ("rb-c", 2000.0)]:
        write_journal(lake, _journal(rollback_id, created_at))
    later = _journal("rb-0", 1_900_000_000.0)  # its name sorts first, it was made last
    write_journal(lake, later)
    assert [journal.rollback_id for journal in read_rollbacks(lake)] == [
        "rb-b",
        "rb-c",
        "rb-a",
        FIXTURE_ID,
        "rb-0",
    ]


def test_a_journal_written_before_its_creation_time_was_recorded_comes_first(tmp_path):
    lake = fixture_lake("replayed", tmp_path)
    write_journal(lake, _journal("rb-z", 5.0))
    older = _journal("rb-y", 0.0).to_dict()
    del older["created_at"]
    (Path(lake.rollbacks) / "rb-y.json").write_text(json.dumps(older))
    assert [journal.rollback_id for journal in read_rollbacks(lake)] == [
        "rb-y",
        "rb-z",
        FIXTURE_ID,
    ]


def test_a_write_cut_short_and_other_files_in_the_folder_are_not_journals(tmp_path):
    """A rollback that crashed while writing its journal leaves the dot-named staging file: not
    a journal (half of one would not even parse), nor is anything not named ``*.json``."""
    lake = fixture_lake("replayed", tmp_path)
    folder = Path(lake.rollbacks)
    (folder / ".rb-1.json.lakehouse-tmp").write_text('{"plan": {"rollback_i')
    (folder / "README.txt").write_text("audit records")
    assert [journal.rollback_id for journal in read_rollbacks(lake)] == [FIXTURE_ID]


def test_each_pipeline_of_a_lake_keeps_its_own_journals(tmp_path):
    lake = fixture_lake("replayed", tmp_path)
    shop = Lake(lake.home, load_spec(example_copy(tmp_path / "pipelines", "shop") / "shop.yaml"))
    path = write_journal(shop, _journal("rb-shop", 10.0, pipeline="shop"))
    assert path == f"{lake.home}/_ops/rollbacks/shop/rb-shop.json"
    assert [journal.rollback_id for journal in read_rollbacks(shop)] == ["rb-shop"]
    assert [journal.rollback_id for journal in read_rollbacks(lake)] == [FIXTURE_ID]
