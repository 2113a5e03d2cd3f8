"""``spark_jobs/engine/jvm.py``: the class-data sharing archive's key changes with whatever makes
the JVM refuse the archive: a reinstalled virtualenv at the same path has jars of the same names but
other modification times."""

from __future__ import annotations

import os

import pytest

from spark_jobs.engine import jvm


@pytest.fixture()
def spark_home(tmp_path, monkeypatch):
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    for name in ("spark-core.jar", "slf4j-api.jar"):
        (jars / name).write_bytes(b"jar")
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "spark"))
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    return jars


def test_a_jar_rewritten_under_the_same_name_changes_the_key(spark_home):
    before = jvm.archive_key()
    assert before is not None, "no java on this machine"
    assert jvm.archive_key() == before
    jar = spark_home / "slf4j-api.jar"
    stat = jar.stat()
    os.utime(jar, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    touched = jvm.archive_key()
    assert touched != before
    jar.write_bytes(b"jar2")
    os.utime(jar, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert jvm.archive_key() not in (before, touched)
