"""The control layer's readers on lakes real runs wrote (``tests/fixtures/lakes/``), no JVM:
``status`` (control/status.py), batches and their table versions (control/batches.py) and
``checkpoint validate`` (control/validate.py), clean and then with one file damaged at a time.
Expected values come from the lake's own files (listed here), never from the readers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_jobs.control.rollback import lineage
from spark_jobs.control.status import pipeline_status
from spark_jobs.control.validate import validate
from testkit.lakes import fixture_lake

pytestmark = pytest.mark.unit

SCENARIOS = ["history", "replayed", "straddle"]


def numbered(folder: Path) -> list[int]:
    return sorted(int(path.name) for path in folder.iterdir() if path.name.isdigit())


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
        assert (shown["batches"], shown["last_batch"], shown["last_committed_batch"]) == (len(offsets), offsets[-1], commits[-1])
        assert shown["pending_batch"] is None  # every batch of these lakes committed
        assert shown["query_id"] == json.loads((checkpoint / "metadata").read_text())["id"]
        assert shown["table_versions"] == {table: delta_versions(table)[-1] for table in lake.tables_of(hop)}
        records = [json.loads(path.read_text()) for path in Path(lake.runs).glob(f"*.{hop.name}.json")]
        assert shown["runs"] == len(records)
        assert shown["last_run"]["run_id"] == max(records, key=lambda record: record["started_at"])["run_id"]


def test_each_batch_maps_to_the_table_version_it_wrote(tmp_path):
    """history: each run's record names the version its batches left the table at; the batch
    ids of the checkpoint's query give the same versions from the Delta log's ``txn`` marks."""
    lake = fixture_lake("history", tmp_path)
    for hop in lake.spec.hops:
        table = lake.table(hop)
        written = lineage.batch_versions(table, lineage.query_ids(lake, hop))
        for path in Path(lake.runs).glob(f"r*.{hop.name}.json"):
            record = json.loads(path.read_text())
            wrote = [written[batch] for batch in record["batch_ids"] if batch in written]
            assert wrote and max(wrote) == record["tables"][table]["version_after"], (hop.name, record["run_id"])
    # the backfill wrote gold without a stream's txn: no batch claims the version it made
    gold = lake.spec.hop("gold")
    backfilled = json.loads(Path(lake.runs, "b1.gold.json").read_text())["tables"][lake.table(gold)]["version_after"]
    assert backfilled not in lineage.batch_versions(lake.table(gold), lineage.query_ids(lake, gold)).values()


def test_an_earlier_rollback_keeps_its_old_query_id_in_the_lineage(tmp_path):
    lake = fixture_lake("replayed", tmp_path)
    journal = json.loads(next(Path(lake.rollbacks).glob("*.json")).read_text())
    for step in journal["plan"]["hops"]:
        ids = lineage.query_ids(lake, lake.spec.hop(step["hop"]))
        assert step["old_query_id"] in ids and step["new_query_id"] in ids


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_lake_runs_wrote_validates_clean_and_is_rolled_back_as_far_as_its_logs_go(tmp_path, name):
    lake = fixture_lake(name, tmp_path)
    assert validate(lake) == []
    for hop in lake.spec.hops:
        assert lineage.horizon(lake, hop) == -1  # every log kept: back to before the first batch


@pytest.mark.parametrize("damage, kind", [
    ("truncate offsets", "damaged-offsets"),
    ("drop the last two commits", "commits-lag"),
    ("garble metadata", "damaged-metadata"),
    ("drop the compacted source log", "missing-compact"),
    ("drop the last source log", "missing-source-log"),
], ids=["truncated-offsets", "commits-missing", "metadata", "compact-source-log", "last-source-log"])
def test_one_damaged_file_is_found_and_named(tmp_path, damage, kind):
    lake = fixture_lake("history", tmp_path)
    bronze = lake.spec.hop("bronze")
    checkpoint = Path(lake.checkpoint(bronze))
    last = numbered(checkpoint / "offsets")[-1]
    if damage == "truncate offsets":
        (checkpoint / "offsets" / str(last)).write_text("v1\n{\"batchWatermarkMs\":")
    elif damage == "drop the last two commits":  # one missing is a batch to run again, not damage
        for batch in (last, last - 1):
            (checkpoint / "commits" / str(batch)).unlink()
    elif damage == "garble metadata":
        (checkpoint / "metadata").write_text("{not json")
    elif damage == "drop the compacted source log":  # the log compacts every 2 batches: 1.compact holds 0 and 1
        (checkpoint / "sources" / "0" / "1.compact").unlink()
    else:  # the offsets of the last batch name it: Spark would list its files as new and read them twice
        (checkpoint / "sources" / "0" / str(last)).unlink()
    found = validate(lake)
    assert [(finding.hop, finding.kind) for finding in found] == [("bronze", kind)], found
    assert found[0].fix


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
    assert window == {"batch": -1, "since": None, "undoable_batches": len(commits), "declared": None}
    (checkpoint / "offsets" / "0").unlink()
    shown = hop_status(lake, "bronze", detail=True)
    committed = dt.datetime.fromtimestamp((checkpoint / "commits" / "2").stat().st_mtime, dt.UTC)
    assert shown["rollback_window"]["batch"] == 2 and shown["rollback_window"]["undoable_batches"] == len(commits) - 3
    assert shown["rollback_window"]["since"][:19] == committed.strftime("%Y-%m-%dT%H:%M:%S")
    text = format_status(pipeline_status(lake, "bronze"))
    assert f"rollback reaches back to batch 2, committed at {shown['rollback_window']['since']}" in text
