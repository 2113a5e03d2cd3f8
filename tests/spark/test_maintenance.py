"""``lakehouse maintain`` against real Spark and Delta (docs/guides/maintenance.md): compaction
changes no row and no rollback target; VACUUM deletes only what no rollback inside the declared
window and no stream reading the table still needs; a target outside the window is refused
before anything changes; a reader that lagged behind reads on, and every table still equals the
landing files. The randomized model test runs ``maintain`` steps too (testkit/model.py)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

import pytest

from spark_jobs import service
from spark_jobs.cli import main
from spark_jobs.control.hop_state import HopState
from spark_jobs.control.overview import pipeline_overview
from spark_jobs.control.rollback import lineage
from spark_jobs.control.status import unread_upstream_versions
from spark_jobs.logs import checkpoint_log, delta_log
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import get_spec
from testkit.expected import assert_tables_match_landing
from testkit.lakes import increment, spec_copy
from testkit.paths import file_tree, refusals, unrefused_tree

pytestmark = [pytest.mark.spark, pytest.mark.integration]

HOPS = ("bronze", "silver", "gold")


def _cli(capsys, *argv: str) -> tuple[int, dict | None]:
    capsys.readouterr()
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if code == 0 else None


def _rows(spark, home: Path) -> dict[str, list]:
    tables = sorted(str(path.parent) for path in home.glob("tables/*/*/_delta_log"))
    return {
        table: sorted(map(tuple, spark.read.format("delta").load(table).collect()), key=repr)
        for table in tables
    }


def _example_hops() -> list[dict]:
    import yaml

    from testkit.lakes import EXAMPLES

    return yaml.safe_load((EXAMPLES / "ad_events" / "ad_events.yaml").read_text())["hops"]


def _ingested(spark, lake: Lake) -> dict[str, list]:
    """Bronze's rows and quarantined lines with their source file, lineage stamps aside."""
    bronze = lake.spec.hop("bronze")
    found = {}
    for table in (lake.table(bronze), lake.quarantine(bronze)):
        rows = spark.read.format("delta").load(table).drop("_batch_id", "_ingest_time")
        found[table] = sorted(map(tuple, rows.collect()), key=repr)
    return found


def _data_files(table: str) -> int:
    """Parquet files on disk under the table (the log and checksum files aside)."""
    return sum(1 for path in Path(table).rglob("*.parquet") if "_delta_log" not in path.parts)


def _by_table(document: dict) -> dict[str, dict]:
    return {lineage.table_label(entry["table"]): entry for entry in document["tables"]}


def test_maintain_keeps_the_window_and_what_a_lagging_reader_needs(
    spark, three_increments, tmp_path, monkeypatch, capsys
):
    hops = [
        hop | {"zorder_by": ["ad_id"]} if hop["name"] == "silver" else hop
        for hop in _example_hops()
    ]
    # Gold's few files (a file per shuffle partition a batch) are compacted too: its MERGEs of new
    # windows only insert, so only a compaction leaves files of its that a later vacuum deletes.
    monkeypatch.setenv(
        "LAKEHOUSE_PIPELINES",
        str(
            spec_copy(
                tmp_path / "pipelines",
                source_log_compact_interval=2,
                retention={"rollback": "1 day", "landing": "1 day"},
                compact_min_files=4,
                hops=hops,
            )
        ),
    )
    increment(3, hop="bronze")
    # gold lags behind silver
    service.run("ad_events", "silver", progress=lambda line: None).raise_for_gate()
    lake = Lake.open(get_spec("ad_events"))
    horizons = {hop: lineage.horizon(HopState(lake, lake.spec.hop(hop))) for hop in HOPS}
    rows = _rows(spark, three_increments)

    # Inside the window (every batch is younger than a day): compaction only; nothing a version
    # names is deleted (only what appends of no rows left, which no commit names).
    code, document = _cli(capsys, "maintain", "ad_events")
    assert code == 0
    compacted = [
        entry
        for entry in document["tables"]
        if entry["files_before"] >= lake.spec.compact_min_files
    ]
    assert compacted, "no table had enough files to compact: the test exercises nothing"
    assert document["totals"]["landing_pruned"] == 0 and document["landing"][0]["files"] == 0
    for entry in document["tables"]:
        assert entry["files_vacuumed"] == entry["files_named_by_none"], entry
        assert (entry["files_after"] < entry["files_before"]) == (entry in compacted), entry
    assert _rows(spark, three_increments) == rows
    assert {hop: lineage.horizon(HopState(lake, lake.spec.hop(hop))) for hop in HOPS} == horizons
    # Silver declares zorder_by: its compaction Z-ordered the partitions with many files.
    silver_table = lake.table(lake.spec.hop("silver"))
    assert "Z-ordered by ad_id" in _by_table(document)["silver/ad_views"]["compacted"]
    optimized = delta_log.commit_info(silver_table, delta_log.table_version(silver_table))
    assert (
        optimized["operation"] == "OPTIMIZE"
        and "ad_id" in optimized["operationParameters"]["zOrderBy"]
    ), optimized

    # Two days later every batch is older than the window: what is left is what readers need.
    monkeypatch.setenv("LAKEHOUSE_CLOCK_SHIFT", "2 days")
    tree = file_tree(three_increments)
    code, dry = _cli(capsys, "maintain", "ad_events", "--dry-run")
    assert code == 0 and dry["dry_run"] and file_tree(three_increments) == tree
    landed = sorted(path.name for path in (three_increments / "landing" / "ad_events").iterdir())
    code, document = _cli(capsys, "maintain", "ad_events")
    tables = _by_table(document)
    gold, silver = tables["gold/campaign_views_10s"], tables["silver/ad_views"]
    assert gold["files_vacuumed"] > 0 and _data_files(gold["table"]) == gold["files_after"]
    # gold has not read silver's last batch
    assert silver["held_by"].startswith("gold's stream"), silver
    # the compacted files gold may still read
    assert _data_files(silver["table"]) > silver["files_after"]
    # Gold's window shrank to its last batches: a rollback inside it plans, one outside is refused
    # (naming the vacuumed file) and changes nothing.
    reach = lineage.horizon(HopState(lake, lake.spec.hop("gold")))
    assert reach > horizons["gold"]
    tree, refused = unrefused_tree(three_increments), refusals(three_increments)
    assert (
        main(["rollback", "ad_events", "--hop", "gold", "--to-batch", str(reach), "--dry-run"]) == 0
    )
    capsys.readouterr()
    assert main(["rollback", "ad_events", "--hop", "gold", "--to-batch", str(reach - 1)]) == 2
    assert "vacuumed" in capsys.readouterr().err
    assert unrefused_tree(three_increments) == tree
    assert refusals(three_increments) == refused + 1

    # Bronze has committed every landing file, all older than a day and read by batches outside its
    # window: archived (its window now starts at its last batch). A backfill over their events reads
    # the archive: the same rows and quarantined lines, each still named by its landing path; a
    # rollback that would replay them names the archive.
    archive = three_increments / "_archive" / "landing" / "ad_events"
    assert document["totals"]["landing_pruned"] == len(landed) > 0
    assert sorted(path.name for path in archive.iterdir()) == landed
    assert not list((three_increments / "landing" / "ad_events").iterdir())
    ingested = _ingested(spark, lake)
    assert (
        main(
            [
                "backfill",
                "ad_events",
                "--hop",
                "bronze",
                "--start",
                "2026-04-01T00:00:00",
                "--end",
                "2026-04-02T00:00:00",
            ]
        )
        == 0
    )
    assert _ingested(spark, lake) == ingested and "/landing/ad_events/" in repr(ingested)
    bronze = lake.spec.hop("bronze")
    assert (
        main(
            [
                "rollback",
                "ad_events",
                "--hop",
                "bronze",
                "--to-batch",
                str(lineage.horizon(HopState(lake, bronze)) - 1),
                "--dry-run",
            ]
        )
        == 2
    )
    refused = capsys.readouterr().out
    assert "read landing file" in refused and "_archive/" in refused, refused

    _code, status = _cli(capsys, "status", "ad_events")
    assert status["last_maintenance"]["maintenance_id"] == document["maintenance_id"]
    # the Lakehouse page's line
    assert pipeline_overview(lake)["maintenance"] == status["last_maintenance"]

    # A file the lagging reader has yet to read, gone (by hand: maintain keeps it): its run refuses
    # before reading anything, naming the file and the command that recovers.
    unread = unread_upstream_versions(HopState(lake, lake.spec.hop("gold")))
    added = [
        action["add"]["path"]
        for action in delta_log.read_commit(silver["table"], unread[0])
        if "add" in action
    ]
    hidden = Path(silver["table"], added[0])
    hidden.rename(hidden.with_name("hidden"))
    offsets = checkpoint_log.offset_batch_ids(lake.checkpoint(lake.spec.hop("gold")))
    assert main(["run", "ad_events", "--hop", "gold"]) == 1
    error = capsys.readouterr().err
    assert f"data file {added[0]} of silver's version {unread[0]}" in error
    assert "`lakehouse refresh ad_events --hop gold`" in error
    assert checkpoint_log.offset_batch_ids(lake.checkpoint(lake.spec.hop("gold"))) == offsets
    # The command it names recovers: gold recomputed from silver's table as it is now (which no
    # longer uses the file: a compaction replaced it), every table equal to the landing files.
    assert main(["refresh", "ad_events", "--hop", "gold"]) == 0
    capsys.readouterr()
    assert_tables_match_landing(three_increments)
    hidden.with_name("hidden").rename(hidden)
    increment(4)
    assert_tables_match_landing(three_increments)


def test_an_append_of_no_rows_leaves_a_data_file_no_commit_names(spark, tmp_path):
    """The Delta fact behind deleting files no commit names: appending an empty frame commits
    nothing, yet writes a data file; maintain's vacuum deletes those (and only those) once they
    are older than the kept version's commit."""
    import os

    from spark_jobs.control.removable.table_files import TablePlan, vacuum

    table = str(tmp_path / "t")
    spark.range(3).write.format("delta").save(table)
    for _ in range(3):
        spark.range(0).write.format("delta").mode("append").save(table)
    named = {unquote(path) for path in delta_log.live_files(table)}
    on_disk = {path.name for path in Path(table).glob("*.parquet")}
    assert delta_log.versions(table) == [0] and len(on_disk) > len(named) >= 1
    for path in Path(table).glob("*.parquet"):
        os.utime(path, (1, 1))
    done = vacuum(TablePlan("t", table, 0, 0, "test", 10_000), dry_run=False)
    assert done["files_named_by_none"] == len(on_disk) - len(named)
    assert {path.name for path in Path(table).glob("*.parquet")} == named
    assert spark.read.format("delta").load(table).count() == 3


def test_a_restarting_delta_stream_reads_its_last_batch_again_from_the_offsets_before_it(
    spark, tmp_path
):
    """Plain Spark and Delta, none of the platform's code: a stream restarting asks its Delta
    source for its last logged batch again, from the offsets of the batch before it (committed,
    here), and fails when that version has left the upstream's log, though every later version is
    there. Why ``maintain`` keeps an upstream's log from the batch before a reader's last one
    (``maintenance._reader_needs``)."""
    import shutil

    upstream, out, checkpoint = tmp_path / "up", tmp_path / "out", tmp_path / "checkpoint"
    for n in range(6):  # versions 0..5, a Delta checkpoint every 2 commits
        spark.range(n, n + 1).write.format("delta").mode("append").option(
            "delta.checkpointInterval", "2"
        ).save(str(upstream))

    def run() -> None:
        stream = (
            spark.readStream.format("delta")
            .option("startingVersion", "0")
            .option("maxFilesPerTrigger", "2")
        )
        (
            stream.load(str(upstream))
            .writeStream.format("delta")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start(str(out))
            .awaitTermination()
        )

    run()
    last = max(int(path.name) for path in (checkpoint / "offsets").iterdir() if path.name.isdigit())

    def version(batch: int) -> int:
        return json.loads((checkpoint / "offsets" / str(batch)).read_text().splitlines()[-1])[
            "reservoirVersion"
        ]

    before, at = version(last - 1), version(last)
    assert before < at
    for n in range(6, 10):  # versions 6..9 the stream has yet to read; Delta checkpoints at 6 and 8
        spark.range(n, n + 1).write.format("delta").mode("append").save(str(upstream))
    logs = upstream / "_delta_log"
    saved = tmp_path / "saved-log"
    shutil.copytree(logs, saved)

    # as a log clean-up does: JSON commits and checkpoints before ``first``
    def cut_log_below(first: int) -> None:
        shutil.rmtree(logs)
        shutil.copytree(saved, logs)
        kept = max(
            int(path.name.split(".")[0])
            for path in logs.glob("*.checkpoint.parquet")
            if int(path.name.split(".")[0]) <= first
        )
        for path in logs.iterdir():
            if path.name[:20].isdigit() and int(path.name[:20]) < kept:
                path.unlink()
        (logs / "_last_checkpoint").unlink(missing_ok=True)

    cut_log_below(at)  # every version from the last batch's offsets on is there, not the one before
    assert before < min(delta_log.versions(str(upstream))) <= at
    with pytest.raises(Exception, match="DELTA_MISSING_FILES_UNEXPECTED_VERSION"):
        run()
    cut_log_below(before)  # the batch before the last one's version kept: the restart reads on
    assert min(delta_log.versions(str(upstream))) <= before
    run()
    assert sorted(row.id for row in spark.read.format("delta").load(str(out)).collect()) == list(
        range(10)
    )
