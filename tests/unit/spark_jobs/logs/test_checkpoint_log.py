"""``spark_jobs/logs/checkpoint_log.py`` on hand-made logs: offsets in both formats, parsing,
rewriting, restarts, Delta source positions (no Spark)."""

from __future__ import annotations

import json

import pytest

from spark_jobs.logs import checkpoint_log
from spark_jobs.logs import checkpoint_log as cl
from tests.unit.spark_jobs._helpers import _write_log
from tests.unit.spark_jobs.logs._helpers import _log_file

pytestmark = pytest.mark.unit


def test_offsets_v1_and_v2_formats(tmp_path):
    ckpt = tmp_path / "ckpt"
    _write_log(
        ckpt / "offsets/3",
        ["v1", '{"batchWatermarkMs":7,"batchTimestampMs":9,"conf":{}}', '{"logOffset":5}'],
    )
    _write_log(
        ckpt / "offsets/4",
        ["v2", '{"batchWatermarkMs":8,"batchTimestampMs":10,"conf":{}}', '0:{"logOffset":6}'],
    )
    _write_log(ckpt / "commits/3", ["v1", '{"nextBatchWatermarkMs":7}'])
    assert checkpoint_log.offset_batch_ids(str(ckpt)) == [3, 4]
    assert checkpoint_log.commit_batch_ids(str(ckpt)) == [3]
    assert checkpoint_log.read_offsets(str(ckpt), 3).sources == [{"logOffset": 5}]
    assert checkpoint_log.read_offsets(str(ckpt), 4).sources == [{"logOffset": 6}]
    assert checkpoint_log.read_offsets(str(ckpt), 4).watermark_ms == 8


def test_drop_batches_after_removes_logs_and_their_checksums(tmp_path):
    for log in ("offsets", "commits"):
        (tmp_path / log).mkdir()
        for batch in range(4):
            _log_file(tmp_path / log / str(batch), [{}])
    removed = cl.drop_batches_after(str(tmp_path), 1)
    assert removed == ["commits/3", "commits/2", "offsets/3", "offsets/2"]
    assert sorted(p.name for p in (tmp_path / "offsets").iterdir()) == [
        ".0.crc",
        ".1.crc",
        "0",
        "1",
    ]


def _killed_writes(folder) -> set[str]:
    """What a log write killed half-way leaves in ``folder``: Spark's temp file with its
    checksum, this package's temp file, a checksum whose file is gone."""
    names = {".4.0b1e2c3d.tmp", "..4.0b1e2c3d.tmp.crc", ".5.lakehouse-tmp", ".6.crc"}
    for name in names:
        (folder / name).write_text("{}")
    return names


def test_leftovers_of_killed_writes_go_and_the_batches_stay(tmp_path):
    for log in ("offsets", "commits"):
        (tmp_path / log).mkdir()
        for batch in range(2):
            _log_file(tmp_path / log / str(batch), [{}])
        leftovers = _killed_writes(tmp_path / log)
    removed = cl.drop_leftovers(str(tmp_path))
    assert sorted(removed) == sorted(
        f"{log}/{name}" for log in ("commits", "offsets") for name in leftovers
    )
    for log in ("offsets", "commits"):
        assert sorted(p.name for p in (tmp_path / log).iterdir()) == [".0.crc", ".1.crc", "0", "1"]
    assert cl.drop_leftovers(str(tmp_path)) == []


def test_a_query_that_starts_over_keeps_no_file_in_its_logs(tmp_path):
    # Spark starts a query with no batch only on empty offsets/ and commits/ (batch 0 refuses
    # otherwise): a rollback to -1 takes what killed writes left too (shop's test, in CI).
    for log in ("offsets", "commits"):
        (tmp_path / log).mkdir()
        _log_file(tmp_path / log / "0", [{}])
        _killed_writes(tmp_path / log)
    assert cl.drop_batches_after(str(tmp_path), -1) == ["commits/0", "offsets/0"]
    for log in ("offsets", "commits"):
        assert not (tmp_path / log).exists() or list((tmp_path / log).iterdir()) == []


@pytest.mark.parametrize(
    "source, expected",
    [
        (None, (-1, True)),
        ({"reservoirVersion": 5, "index": -1, "isStartingVersion": False}, (4, True)),
        ({"reservoirVersion": 5, "index": 3, "isStartingVersion": False}, (5, False)),
        ({"reservoirVersion": 5, "index": 2**62 + 1, "isStartingVersion": False}, (5, True)),
        ({"reservoirVersion": 5, "index": 3, "isStartingVersion": True}, (5, False)),
        ({"reservoirVersion": 5, "index": -1, "isStartingVersion": True}, (-1, True)),
    ],
)
def test_delta_source_positions(source, expected):
    assert cl.delta_position(source) == expected


@pytest.mark.parametrize(
    "batch, watermark, source, expected",
    [
        # all of version 4
        (0, 0, {"reservoirVersion": 5, "index": -1, "isStartingVersion": False}, True),
        # all of version 4
        (0, 0, {"reservoirVersion": 4, "index": 2**62, "isStartingVersion": False}, True),
        # part of the snapshot
        (0, 0, {"reservoirVersion": 4, "index": 3, "isStartingVersion": True}, False),
        # part of version 5
        (0, 0, {"reservoirVersion": 5, "index": 3, "isStartingVersion": False}, False),
        # a restart's watermark
        (0, 7000, {"reservoirVersion": 5, "index": -1, "isStartingVersion": False}, False),
        # not the first batch
        (1, 0, {"reservoirVersion": 5, "index": -1, "isStartingVersion": False}, False),
    ],
)
def test_a_first_batch_saw_its_whole_table_only_complete_and_without_a_watermark(
    tmp_path, batch, watermark, source, expected
):
    (tmp_path / "offsets").mkdir()
    header = {"batchWatermarkMs": watermark, "batchTimestampMs": 9}
    (tmp_path / f"offsets/{batch}").write_text(f"v1\n{json.dumps(header)}\n{json.dumps(source)}")
    assert cl.saw_whole_table(str(tmp_path), batch) is expected


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"", "empty file"),
        (b"v1\n", "version line only"),
        (b'v1\n{"nextBatchWatermarkMs":1', "truncated JSON"),
        (b"\xff\xfe\x00", "not UTF-8"),
        (b"hello\n{}", "no version line"),
        (b"v7\n{}", "unknown log version v7"),
        (b"v1\n{}\nnot json\n", "a line is not JSON"),
    ],
)
def test_damaged_log_files_are_named_with_what_spark_would_say(tmp_path, content, reason):
    path = tmp_path / "3"
    path.write_bytes(content)
    with pytest.raises(cl.DamagedLog, match=reason):
        cl.parse_log_file(cl.filesystem(str(path)), str(path))


def test_offset_log_v2_lines_parse(tmp_path):
    path = tmp_path / "0"
    path.write_text('v2\n{"batchWatermarkMs":0}\n0:{"logOffset":4}\n1:-')
    assert cl.parse_log_file(cl.filesystem(str(path)), str(path)) == (
        2,
        [{"batchWatermarkMs": 0}, {"logOffset": 4}, "1:-"],
    )


def test_a_restart_keeps_one_batchs_offsets_as_batch_0_and_a_crash_in_the_swap_is_finished(
    tmp_path,
):
    """``restart_at`` (a state rebuild, :mod:`spark_jobs.control.rollback.rebuild`): the new
    checkpoint holds the new id and, as ``offsets/0``, the chosen batch's file line for line; a
    staged restart that was whole when the process stopped is swapped in by the next start, a
    partial one is dropped and the checkpoint kept."""
    checkpoint = tmp_path / "ckpt"
    for folder in ("offsets", "commits", "state/0/0"):
        (checkpoint / folder).mkdir(parents=True)
    header = {
        "batchWatermarkMs": 7000,
        "batchTimestampMs": 9,
        "conf": {"spark.sql.shuffle.partitions": "1"},
    }
    source = {
        "sourceVersion": 1,
        "reservoirId": "r",
        "reservoirVersion": 4,
        "index": -1,
        "isStartingVersion": False,
    }
    for batch in range(3):
        (checkpoint / f"offsets/{batch}").write_text(
            f"v1\n{json.dumps({**header, 'batch': batch})}\n{json.dumps(source)}"
        )
        (checkpoint / f"commits/{batch}").write_text("v1\n{}")
    (checkpoint / "metadata").write_text('{"id":"old"}\n')
    (checkpoint / "state/0/0/1.delta").write_bytes(b"state")
    chosen = (checkpoint / "offsets/1").read_text()

    cl.restart_at(str(checkpoint), 1, "new")
    assert sorted(
        str(path.relative_to(checkpoint))
        for path in checkpoint.rglob("*")
        if not path.name.startswith(".")
    ) == ["metadata", "offsets", "offsets/0"]
    assert (checkpoint / "offsets/0").read_text() == chosen and cl.query_id(
        str(checkpoint)
    ) == "new"
    assert (
        cl.read_offsets(str(checkpoint), 0).watermark_ms == 7000
        and cl.planned_batch(str(checkpoint)) == 0
    )
    assert not (tmp_path / "ckpt.restarted").exists()

    staged = tmp_path / "ckpt.restarted"
    (staged / "offsets").mkdir(parents=True)
    (staged / "offsets/0").write_text(
        chosen.replace('"reservoirVersion": 4', '"reservoirVersion": 5')
    )
    cl.finish_restart(str(checkpoint))  # no metadata yet: the stop came while staging
    assert not staged.exists() and (checkpoint / "offsets/0").read_text() == chosen
    (staged / "offsets").mkdir(parents=True)
    (staged / "offsets/0").write_text(
        chosen.replace('"reservoirVersion": 4', '"reservoirVersion": 5')
    )
    (staged / "metadata").write_text('{"id":"newer"}\n')
    cl.finish_restart(str(checkpoint))  # whole: swapped in
    assert not staged.exists() and cl.query_id(str(checkpoint)) == "newer"
    assert cl.read_offsets(str(checkpoint), 0).sources[0]["reservoirVersion"] == 5
