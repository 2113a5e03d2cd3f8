"""A rollback's table step (:func:`spark_jobs.control.rollback.restore.restore_table`): RESTORE in a
session of its own, after checking from the log that every file the version needs is still there."""

from __future__ import annotations

import pytest

from spark_jobs.control.rollback.plans import TableStep
from spark_jobs.control.rollback.restore import restore_table
from spark_jobs.logs import delta_log
from spark_jobs.model.errors import DataGone
from testkit.expected import delta_rows

pytestmark = [pytest.mark.spark]


def _table(spark, path) -> None:
    """Version 0 holds ids 0-2, version 1 adds 3-5, version 2 overwrites them all with 6-8."""
    for ids, mode in ((range(3), "append"), (range(3, 6), "append"), (range(6, 9), "overwrite")):
        spark.createDataFrame([(i,) for i in ids], "id INT").write.format("delta").mode(mode).save(
            str(path)
        )


def _step(path, to: int) -> TableStep:
    return TableStep(table=str(path), label="t", version_now=2, restore_to=to, action="restore")


def test_a_restore_brings_the_version_back_and_leaves_the_session_as_it_was(spark, tmp_path):
    path = tmp_path / "t"
    _table(spark, path)
    before = {
        key: spark.conf.get(key, None)
        for key in ("spark.sql.shuffle.partitions", "spark.sql.files.ignoreMissingFiles")
    }
    assert restore_table(spark, _step(path, 1)) == 3
    assert delta_rows(tmp_path, "t", "id") == [(i,) for i in range(6)]
    assert {key: spark.conf.get(key, None) for key in before} == before


def test_a_file_gone_since_the_plan_refuses_the_restore_and_changes_nothing(spark, tmp_path):
    path = tmp_path / "t"
    _table(spark, path)
    removed = sorted(
        action["remove"]["path"]
        for action in delta_log.read_commit(str(path), 2)
        if "remove" in action
    )
    # as by hand: maintenance does not run while a rollback is unfinished
    (path / removed[0]).unlink()
    with pytest.raises(DataGone, match=f"data file {removed[0]} of version 1 is gone"):
        restore_table(spark, _step(path, 1))
    assert delta_log.table_version(str(path)) == 2
    assert delta_rows(tmp_path, "t", "id") == [(i,) for i in range(6, 9)]
    # Why the check: with the setting on, Delta restores the version without the file, and
    # commits a table that names a file it does not have.
    session = spark.newSession()
    session.conf.set("spark.sql.files.ignoreMissingFiles", "true")
    session.sql(f"RESTORE TABLE delta.`{path}` TO VERSION AS OF 1")
    added = [
        action["add"]["path"] for action in delta_log.read_commit(str(path), 3) if "add" in action
    ]
    assert removed[0] in added and not (path / removed[0]).exists()
