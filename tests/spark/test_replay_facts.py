"""What Spark does with a logged batch it finds uncommitted, the ground a deterministic replay
would stand on (docs/concepts/checkpoints.md): plain Structured Streaming and Delta, none of the
platform's code.

A de-duplication under a watermark reads a Delta table. Its batch 2 drops rows later than the
watermark that batch 1 left. Undone (its output restored, its commit, state version and offsets
removed) and then replayed, what batch 2 writes depends on how it is replayed: with its logged
``offsets/N`` put back one at a time, Spark runs each again with the logged source range and the
logged watermark, and ``Trigger.Once`` stops right after it, whatever arrived meanwhile: the
replay equals the original run, and what comes after it equals a run that never rolled back.
Planned afresh, the replay reads what arrived meanwhile in the same batch, under an older
watermark, and keeps a row the original run would have dropped.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark]

T0 = dt.datetime(2026, 3, 1, 12, 0)


def _append(spark, table: Path, rows: list[tuple[int, int]]) -> None:
    """Rows (id, minutes after T0) appended to the source table."""
    frame = spark.createDataFrame(
        [(key, T0 + dt.timedelta(minutes=minute)) for key, minute in rows], "id INT, ts TIMESTAMP"
    )
    frame.write.format("delta").mode("append").save(str(table))


def _run(spark, source: Path, out: Path, checkpoint: Path, once: bool = False) -> None:
    from pyspark.sql import functions as F

    def write(batch, batch_id):
        batch.withColumn("batch", F.lit(batch_id)).write.format("delta").mode("append").save(
            str(out)
        )

    deduplicated = (
        spark.readStream.format("delta")
        .load(str(source))
        .withWatermark("ts", "10 minutes")
        .dropDuplicates(["id", "ts"])
    )
    writer = deduplicated.writeStream.foreachBatch(write).option(
        "checkpointLocation", str(checkpoint)
    )
    writer = writer.trigger(once=True) if once else writer.trigger(availableNow=True)
    writer.start().awaitTermination()


def _rows(spark, out: Path) -> list[tuple[int, int, int]]:
    """(id, minutes after T0, batch) of every output row."""
    return sorted(
        (row.id, int((row.ts - T0).total_seconds() // 60), row.batch)
        for row in spark.read.format("delta").load(str(out)).collect()
    )


def _ids(rows: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
    return sorted((key, minute) for key, minute, _batch in rows)


def _batch_ids(checkpoint: Path, log: str) -> list[int]:
    return sorted(int(path.name) for path in (checkpoint / log).iterdir() if path.name.isdigit())


def _undo_from(spark, checkpoint: Path, out: Path, batch: int, version: int) -> None:
    """Undo ``batch`` and those after it, as a rollback does: the output table back to ``version``,
    the batches' offsets and commits and the state versions they wrote removed."""
    for log in ("offsets", "commits"):
        for path in list((checkpoint / log).iterdir()):
            number = path.name.lstrip(".").split(".")[0]
            if number.isdigit() and int(number) >= batch:
                path.unlink()
    for path in list((checkpoint / "state").rglob("*")):
        number = path.name.lstrip(".").split(".")[0]
        if path.is_file() and number.isdigit() and int(number) > batch:
            path.unlink()
    spark.sql(f"RESTORE TABLE delta.`{out}` TO VERSION AS OF {version}")


def _version(spark, table: Path) -> int:
    return spark.sql(f"DESCRIBE HISTORY delta.`{table}`").agg({"version": "max"}).first()[0]


def test_a_logged_batch_put_back_runs_again_with_its_offsets_and_watermark_and_once_stops_after_it(
    spark, tmp_path
):
    source, out, checkpoint = tmp_path / "source", tmp_path / "out", tmp_path / "checkpoint"
    _append(spark, source, [(1, 0), (2, 30)])
    _run(spark, source, out, checkpoint)
    # the rows, then a no-data batch: the watermark to minute 20
    assert _batch_ids(checkpoint, "commits") == [0, 1]
    before_batch_2 = _version(spark, out)
    _append(spark, source, [(3, 5), (4, 25), (5, 40)])  # 3 is later than the watermark: dropped
    _run(spark, source, out, checkpoint)
    original = _rows(spark, out)
    # watermark now 30
    assert [(key, minute) for key, minute, batch in original if batch == 2] == [(4, 25), (5, 40)]
    # Batch 2 read the rows, and batch 3, a no-data batch, moved the watermark to minute 30: the
    # later rows a batch drops are those older than the watermark the batch before it left.
    assert _batch_ids(checkpoint, "commits") == [0, 1, 2, 3]
    logged = {batch: (checkpoint / "offsets" / str(batch)).read_text() for batch in (2, 3)}

    # Rows that arrive next: (7, 25) is later than the watermark batch 3 left, not than batch 1's.
    # A run that never rolled back drops it and keeps (6, 45).
    _append(spark, source, [(6, 45), (7, 25)])
    never_rolled_back = sorted([*_ids(original), (6, 45)])
    for replay_exactly in (False, True):
        lake = tmp_path / ("exact" if replay_exactly else "afresh")
        shutil.copytree(checkpoint, lake / "checkpoint")
        shutil.copytree(out, lake / "out")
        _undo_from(spark, lake / "checkpoint", lake / "out", 2, before_batch_2)
        assert _rows(spark, lake / "out") == [row for row in original if row[2] < 2]
        if replay_exactly:
            # Each undone batch put back in turn runs again with its logged range and watermark, and
            # Once stops right after it, though new rows wait.
            for batch, offsets in logged.items():
                (lake / "checkpoint" / "offsets" / str(batch)).write_text(offsets)
                _run(spark, source, lake / "out", lake / "checkpoint", once=True)
                assert _batch_ids(lake / "checkpoint", "commits") == list(range(batch + 1))
            assert _rows(spark, lake / "out") == original
        _run(spark, source, lake / "out", lake / "checkpoint")
        replayed = _ids(_rows(spark, lake / "out"))
        if replay_exactly:
            assert replayed == never_rolled_back
        # planned afresh: one batch reads both arrivals after batch 1's watermark, and keeps (7, 25)
        else:
            assert replayed == sorted([*never_rolled_back, (7, 25)])


def _land(folder: Path, name: str, keys: range) -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.json").write_text("".join(f'{{"id": {key}}}\n' for key in keys))


def _run_files(spark, landing: Path, out: Path, checkpoint: Path, once: bool = False) -> None:
    from pyspark.sql import functions as F

    def write(batch, batch_id):
        batch.withColumn("batch", F.lit(batch_id)).write.format("delta").mode("append").save(
            str(out)
        )

    writer = (
        spark.readStream.schema("id INT")
        .json(str(landing))
        .writeStream.foreachBatch(write)
        .option("checkpointLocation", str(checkpoint))
    )
    (
        writer.trigger(once=True) if once else writer.trigger(availableNow=True)
    ).start().awaitTermination()


def test_a_file_batch_put_back_with_its_source_log_reads_its_files_again_not_what_landed_since(
    spark, tmp_path
):
    """A file source takes an uncommitted logged batch's files from its log (``sources/0/N``, or
    ``N.compact`` at a compaction batch), not from a listing: put back with its offsets, the batch
    reads exactly the files it read, though others have landed since; cut from the log, those
    files are new again and the next batch reads them with whatever else landed."""
    landing, out, checkpoint = tmp_path / "landing", tmp_path / "out", tmp_path / "checkpoint"
    # batch 1 writes 1.compact
    spark.conf.set("spark.sql.streaming.fileSource.log.compactInterval", "2")
    try:
        for batch, name in enumerate("abc"):
            _land(landing, name, range(batch * 10, batch * 10 + 10))
            _run_files(spark, landing, out, checkpoint)
        original = sorted(
            (row.id, row.batch) for row in spark.read.format("delta").load(str(out)).collect()
        )
        assert {batch for _id, batch in original} == {0, 1, 2}
        logs = {
            log: {
                path.name: path.read_text()
                for path in (checkpoint / log).iterdir()
                if path.name[0].isdigit() and not path.name.startswith("0")
            }
            for log in ("offsets", "sources/0")
        }
        assert sorted(logs["sources/0"]) == ["1.compact", "2"] and sorted(logs["offsets"]) == [
            "1",
            "2",
        ]
        _land(landing, "d", range(30, 40))  # landed after the original run
        for exactly in (True, False):
            lake = tmp_path / ("exact" if exactly else "afresh")
            shutil.copytree(checkpoint, lake / "checkpoint")
            shutil.copytree(out, lake / "out")
            for log in logs:
                for name in logs[log]:
                    (lake / "checkpoint" / log / name).unlink()
            for path in (lake / "checkpoint" / "commits").iterdir():
                if path.name[0].isdigit() and not path.name.startswith("0"):
                    path.unlink()
            spark.sql(f"RESTORE TABLE delta.`{lake / 'out'}` TO VERSION AS OF 0")
            if exactly:
                for batch, source_log in (("1", "1.compact"), ("2", "2")):
                    (lake / "checkpoint" / "sources/0" / source_log).write_text(
                        logs["sources/0"][source_log]
                    )
                    (lake / "checkpoint" / "offsets" / batch).write_text(logs["offsets"][batch])
                    _run_files(spark, landing, lake / "out", lake / "checkpoint", once=True)
                replayed = sorted(
                    (row.id, row.batch)
                    for row in spark.read.format("delta").load(str(lake / "out")).collect()
                )
                assert replayed == original
            _run_files(spark, landing, lake / "out", lake / "checkpoint")
            rows = sorted(
                (row.id, row.batch)
                for row in spark.read.format("delta").load(str(lake / "out")).collect()
            )
            if exactly:  # the files as they were batched, then what landed since
                assert rows == sorted([*original, *((key, 3) for key in range(30, 40))])
            else:  # the cut files read again with the new one, in one batch
                assert rows == sorted(
                    [
                        *(row for row in original if row[1] == 0),
                        *((key, 1) for key in range(10, 40)),
                    ]
                )
    finally:
        spark.conf.unset("spark.sql.streaming.fileSource.log.compactInterval")
