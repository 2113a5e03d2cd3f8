"""``lakehouse checkpoint validate`` on real checkpoints, damaged one way at a time
(docs/concepts/checkpoints.md).
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from spark_jobs.cli import main
from testkit.expected import assert_tables_match_landing
from testkit.lakes import increment

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _last(folder: Path) -> Path:
    return folder / str(max(int(path.name) for path in folder.iterdir() if path.name.isdigit()))


def _drop(path: Path) -> None:
    path.unlink()
    crc = path.parent / f".{path.name}.crc"
    if crc.exists():
        crc.unlink()


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    crc = path.parent / f".{path.name}.crc"
    if crc.exists():
        crc.unlink()


DAMAGE = {
    "empty offsets": (
        lambda c: _write(_last(c / "silver/offsets"), b""),
        "damaged-offsets",
        "empty file",
    ),
    "version line only": (
        lambda c: _write(_last(c / "silver/commits"), b"v1\n"),
        "damaged-commits",
        "version line only",
    ),
    "truncated JSON": (
        lambda c: _write(_last(c / "gold/commits"), b'v1\n{"nextBatchWatermarkMs":17'),
        "damaged-commits",
        "truncated",
    ),
    "garbage": (
        lambda c: _write(_last(c / "bronze/offsets"), b"\x00\xff\xfe garbage"),
        "damaged-offsets",
        "garbage",
    ),
    "unknown version": (
        lambda c: _write(_last(c / "bronze/commits"), b'v9\n{"nextBatchWatermarkMs":0}'),
        "damaged-commits",
        "INVALID_LOG_VERSION",
    ),
    "commits lag": (
        lambda c: [_drop(_last(c / "gold/commits")) for _ in range(2)],
        "commits-lag",
        "are lost",
    ),
    "commits ahead": (
        lambda c: _drop(_last(c / "silver/offsets")),
        "commit-without-offsets",
        "CONCURRENT",
    ),
    "missing compact": (
        lambda c: _drop(c / "bronze/sources/0/1.compact"),
        "missing-compact",
        "1.compact",
    ),
    "orphan crc": (
        lambda c: _last(c / "bronze/offsets").unlink(),
        "orphan-crc",
        "checksum without its file",
    ),
    "missing state": (
        lambda c: [
            _drop(p)
            for p in (c / "gold/state/0").glob("*/*.delta")
            if int(p.name.split(".")[0])
            == max(int(q.name.split(".")[0]) for q in p.parent.glob("*.delta"))
        ],
        "missing-state",
        "cannot be loaded",
    ),
    "missing metadata": (
        lambda c: (c / "silver/metadata").unlink(),
        "missing-metadata",
        "MISSING_METADATA",
    ),
}


@pytest.fixture
def damaged_lake(three_increments):
    return three_increments


def _validate(capsys, *extra: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["checkpoint", "validate", "ad_events", "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def test_each_kind_of_damage_is_found_with_its_fix(damaged_lake, tmp_path, monkeypatch, capsys):
    code, clean = _validate(capsys)
    assert (code, clean["findings"]) == (0, [])
    for name, (damage, kind, words) in DAMAGE.items():
        home = tmp_path / name.replace(" ", "-")
        shutil.copytree(damaged_lake, home, ignore=shutil.ignore_patterns("landing"))
        damage(home / "checkpoints/ad_events")
        monkeypatch.setenv("LAKEHOUSE_HOME", str(home))
        code, report = _validate(capsys)
        found = [finding for finding in report["findings"] if finding["kind"] == kind]
        assert code == 1 and found, f"{name}: {report['findings']}"
        assert words in found[0]["problem"] + found[0]["path"], f"{name}: {found[0]}"
        assert found[0]["fix"], name
        if name == "commits lag":  # a run refuses with the diagnosis instead of losing batches
            gold = home / "tables/gold/campaign_views_10s/_delta_log"
            logs = sorted(gold.iterdir())
            assert main(["run", "ad_events", "--hop", "gold"]) == 2
            assert "checkpoint of gold is damaged" in capsys.readouterr().err
            assert sorted(gold.iterdir()) == logs


def test_repair_then_run_and_rollback_to_the_suggested_batch(spark, damaged_lake, capsys):
    checkpoints = damaged_lake / "checkpoints/ad_events"
    _write(_last(checkpoints / "silver/commits"), b"v1\n")
    (checkpoints / "silver/metadata").unlink()
    code, report = _validate(capsys, "--repair")
    assert code == 0 and {f["kind"] for f in report["findings"]} == {
        "damaged-commits",
        "missing-metadata",
    }
    assert all(finding["repaired"] for finding in report["findings"])
    assert _validate(capsys) == (0, {"pipeline": "ad_events", "consistent": True, "findings": []})

    DAMAGE["missing state"][0](checkpoints)
    code, report = _validate(capsys, "--repair")
    (finding,) = report["findings"][:1]
    assert code == 1 and finding["kind"] == "missing-state" and not finding["repaired"]
    command = shlex.split(finding["fix"])
    assert command[:2] == ["lakehouse", "rollback"]
    assert main(command[1:]) == 0
    increment(7)
    assert_tables_match_landing(damaged_lake)


def test_a_lost_metadata_gets_the_id_of_the_last_rollback_or_the_table_log(
    spark, three_increments, capsys
):
    """After a rollback and before the next run, the checkpoint's query id is the rollback's new
    one, which no run record names yet: restoring the last run's id instead would make Delta skip
    the replayed batches (the txn trap). With no record at all, the table's log still names it."""
    home = three_increments
    silver = home / "checkpoints/ad_events/silver"
    capsys.readouterr()
    assert main(["rollback", "ad_events", "--hop", "silver", "--to-batch", "0", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    new_id = next(step["new_query_id"] for step in plan["hops"] if step["hop"] == "silver")
    (silver / "metadata").unlink()
    code, report = _validate(capsys, "--repair")
    assert code == 0 and [f["kind"] for f in report["findings"]] == ["missing-metadata"]
    assert json.loads((silver / "metadata").read_text())["id"] == new_id
    assert main(["run", "ad_events"]) == 0
    assert_tables_match_landing(home)

    shutil.rmtree(home / "_ops")
    gold = home / "checkpoints/ad_events/gold"
    (gold / "metadata").unlink()
    stream_ids = [
        action["txn"]["appId"]
        for log in sorted((home / "tables/gold/campaign_views_10s/_delta_log").glob("*.json"))
        for action in map(json.loads, log.read_text().splitlines())
        if "txn" in action
    ]
    code, report = _validate(capsys, "--repair")
    assert code == 0 and report["findings"][0]["repaired"]
    assert json.loads((gold / "metadata").read_text())["id"] == stream_ids[-1]
