"""The Spark driver's JVM and session: its class-data sharing archive (spark_jobs/engine/jvm.py) is
really mapped, it starts no `readlink` process per rename, and it splits large reads evenly."""

from __future__ import annotations

import subprocess
import sys

import pytest

from testkit.paths import ROOT

pytestmark = [pytest.mark.spark]

DRIVER = """
import sys
from spark_jobs.engine.jvm import driver_java_options
from spark_jobs.engine.session import build_session
options = driver_java_options()
assert "SharedArchiveFile" in options, "no archive for this Java and Spark: make setup builds it"
spark = build_session("jvm-test", 2, java_options=f"{options} -Xshare:on -Xlog:class+load=info:file={sys.argv[1]}")
spark.range(3).count()
spark.stop()
"""  # noqa: E501


def test_a_driver_started_like_every_job_loads_spark_from_the_archive(tmp_path):
    """With ``-Xshare:on`` a JVM that cannot map the archive (another Java, another class path)
    refuses to start, so this fails when the key misses something; the class-load log then says
    where each class came from."""
    log = tmp_path / "classes.log"
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(log)], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # Spark's classes from its jars (lambdas are generated as the JVM runs; Delta's come from
    # --jars, through Spark's class loader, which the archive leaves out)
    spark_classes = [
        line
        for line in log.read_text().splitlines()
        if " org.apache.spark." in line and "$$Lambda" not in line and "delta-spark" not in line
    ]
    from_archive = [line for line in spark_classes if "source: shared objects file (top)" in line]
    assert len(spark_classes) > 3000 and len(from_archive) > 0.95 * len(spark_classes), (
        len(from_archive),
        len(spark_classes),
    )


def test_a_run_renames_its_checkpoint_and_delta_log_files_without_starting_readlink(
    spark, lake_home, tmp_path
):
    """Without Hadoop's native library, a FileContext rename on a local disk starts `readlink`
    processes (spark_jobs/engine/session.py, ``NO_SHELL_CONFS``): a run's checkpoint and Delta
    log files go through the FileSystem API, whose rename starts none. Java Flight Recorder's
    ProcessStart events of this process's JVM over two increments of all hops say which
    processes it started. (Each file created still gets a `chmod` from Hadoop's local file
    system, whatever the configuration.)"""
    from testkit.lakes import increment

    jvm = spark._jvm
    recording = jvm.jdk.jfr.Recording()
    recording.enable("jdk.ProcessStart")
    recording.start()
    try:
        increment(0)
        increment(1)
    finally:
        recording.stop()
    dump = jvm.java.io.File(str(tmp_path / "processes.jfr")).toPath()
    recording.dump(dump)
    recording.close()
    commands = [
        event.getString("command")
        for event in jvm.jdk.jfr.consumer.RecordingFile.readAllEvents(dump)
    ]
    assert (
        lake_home / "tables/gold/campaign_views_10s/_delta_log/00000000000000000001.json"
    ).exists()
    ours = [command for command in commands if str(lake_home) in command]
    # 4 per rename (source, target, their checksum files) before; a `chmod` per created file stays.
    assert ours and not [command for command in ours if command.startswith("readlink")], ours[:5]


def test_a_large_read_is_split_evenly_and_small_files_are_not_a_task_each(spark, tmp_path):
    """A large read is cut into pieces of at most ``MAX_SPLIT_BYTES``, not Spark's one per core
    (which left bronze's parse of a 2 M-event landing folder 5 tasks on 2 cores, the last alone);
    a read of a few small files (a Delta log replay, an hourly run's landing files) stays about
    one task per core, not one per file."""
    from spark_jobs.engine.session import MAX_SPLIT_BYTES

    cores, size = spark.sparkContext.defaultParallelism, 128 * 1024 * 1024
    with open(tmp_path / "big.txt", "wb") as handle:  # sparse: only its size counts when planning
        handle.truncate(size)
    assert (
        spark.read.text(str(tmp_path / "big.txt")).rdd.getNumPartitions() >= size // MAX_SPLIT_BYTES
    )
    small = tmp_path / "small"
    small.mkdir()
    for number in range(8):
        (small / f"{number}.txt").write_text("a line\n" * 100)
    assert spark.read.text(str(small)).rdd.getNumPartitions() <= cores
    ours = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.unset("spark.sql.files.maxPartitionBytes")
    try:
        # Spark's own
        assert spark.read.text(str(tmp_path / "big.txt")).rdd.getNumPartitions() <= cores + 1
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", ours)
