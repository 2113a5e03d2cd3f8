"""The one place that builds a SparkSession, with Delta configured from the local jar cache and,
for a lake on S3, Hadoop's ``s3a`` filesystem configured from the standard AWS variables."""

from __future__ import annotations

import os
import re
import shutil

from spark_jobs.engine.jars import cached_jars
from spark_jobs.engine.jvm import driver_java_options
from spark_jobs.model import settings
from spark_jobs.model.errors import SetupError

DELTA_CONFS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def check_java() -> None:
    """Fail with one clear line when no Java runtime is reachable."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.path.exists(os.path.join(java_home, "bin", "java")):
        return
    if shutil.which("java") is None:
        raise SetupError(
            "Java is not installed or not on PATH: install Java 17+ (e.g. apt-get install "
            "openjdk-17-jre-headless)"
        )


def session_confs(shuffle_partitions: int = 4) -> dict[str, str]:
    """Confs every lakehouse session shares: Delta, UTC, small shuffles, quiet UI."""
    confs = dict(DELTA_CONFS)
    confs.update(
        {
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.shuffle.partitions": str(shuffle_partitions),
            "spark.sql.streaming.numRecentProgressUpdates": "1000",
            "spark.ui.enabled": settings.SPARK_UI.value(),
            "spark.ui.showConsoleProgress": "false",
            "spark.databricks.delta.schema.autoMerge.enabled": "false",
            # New tables record their changes: a quality gate reads exactly the rows a run wrote.
            "spark.databricks.delta.properties.defaults.enableChangeDataFeed": "true",
            # Log replay runs as a Spark job; its default of 50 partitions is pure overhead on
            # tables whose logs are small (ours are: Delta checkpoints every 10 commits).
            "spark.databricks.delta.snapshotPartitions": settings.SNAPSHOT_PARTITIONS.value(),
        }
    )
    confs.update(NO_SHELL_CONFS)
    return confs


# Checkpoint and Delta log files through Hadoop's FileSystem API, not its FileContext one. Without
# Hadoop's native library (a pip-installed PySpark has none) a FileContext rename on a local disk
# starts a `readlink` process for the source, the target and their checksum files: with the `chmod`
# of each created file (which stays), about 75 processes a second in a busy driver (Java Flight
# Recorder's ProcessStart events), every checkpoint and Delta log file being written then renamed.
# Both managers do the same on a local disk (test that the target is absent, then rename: neither is
# atomic there, nor on S3), and the pipeline lock keeps writers of one pipeline apart. An in-process
# run took about a sixth less CPU and wall time (docs/design-notes.md). ``LocalLogStore`` is Delta's
# own for file: paths (the same rename, under a JVM-wide lock).
NO_SHELL_CONFS = {
    "spark.sql.streaming.checkpointFileManagerClass": "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",  # noqa: E501
    "spark.delta.logStore.file.impl": "io.delta.storage.LocalLogStore",
}


def s3a_confs(env: dict[str, str] | None = None) -> dict[str, str]:
    """Hadoop's S3A settings from the standard AWS variables: any S3-compatible store works
    without a setting of ours. A custom endpoint (``AWS_ENDPOINT_URL``) gets path-style access.
    The keys go into Hadoop's configuration, not only the driver's environment, so executors on
    other machines have them too (Spark redacts them in its UI and logs)."""
    env = os.environ if env is None else env
    # s3:// paths in a user's inputs
    confs = {"fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem"}
    if env.get("AWS_ENDPOINT_URL"):
        confs["fs.s3a.endpoint"] = env["AWS_ENDPOINT_URL"]
        confs["fs.s3a.path.style.access"] = "true"
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        confs["fs.s3a.endpoint.region"] = region
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        confs["fs.s3a.access.key"] = env["AWS_ACCESS_KEY_ID"]
        confs["fs.s3a.secret.key"] = env["AWS_SECRET_ACCESS_KEY"]
        if env.get("AWS_SESSION_TOKEN"):
            confs["fs.s3a.session.token"] = env["AWS_SESSION_TOKEN"]
    return confs


# The largest piece a read is cut into (docs/design-notes.md): a large read splits into even
# tasks on few cores, while a read of a few small files (a Delta log replay, a run's landing
# files) keeps Spark's one piece per core instead of a task per file.
MAX_SPLIT_BYTES = 32 * 1024 * 1024
_MAX_SPLIT = "spark.sql.files.maxPartitionBytes"


def properties_file(path: str) -> dict[str, str]:
    """A Spark properties file (``key value`` or ``key=value`` lines, ``#`` comments), as
    ``spark-submit --properties-file`` reads it."""
    with open(path) as handle:
        lines = [line.strip() for line in handle]
    return dict(
        re.split(r"\s*=\s*|\s+", line, maxsplit=1)
        for line in lines
        if line and not line.startswith("#")
    )


def build_session(app_name: str, shuffle_partitions: int = 4, java_options: str | None = None):
    """Get or create the SparkSession for ``app_name``.

    Under ``spark-submit`` the JVM already exists (its ``--jars`` carry Delta) and its master
    comes from the submit; otherwise a local JVM starts with ``$LAKEHOUSE_SPARK_MASTER``
    (default ``local[2]``), the properties in ``$LAKEHOUSE_SPARK_PROPERTIES`` if set (a
    cluster's shared secret: ``make run-cluster``'s, which ``lakehouse_platform.py env`` names),
    the cached Delta jars and ``java_options`` (default: the class-data sharing archive,
    :mod:`spark_jobs.engine.jvm`).
    """
    from pyspark.sql import SparkSession

    # spark-submit set the driver's address already
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    addresses = {} if submitted else settings.driver_addresses(settings.SPARK_MASTER.value())
    os.environ.setdefault("SPARK_LOCAL_IP", addresses.pop("SPARK_LOCAL_IP", settings.LOOPBACK))
    builder = SparkSession.builder.appName(app_name)
    for key, value in addresses.items():
        builder = builder.config(key, value)
    if not submitted:
        check_java()
        builder = builder.master(settings.SPARK_MASTER.value())
        if settings.SPARK_PROPERTIES.value():
            for key, value in properties_file(settings.SPARK_PROPERTIES.value()).items():
                builder = builder.config(key, value)
        builder = builder.config("spark.jars", ",".join(str(jar) for jar in cached_jars()))
        builder = builder.config("spark.driver.memory", settings.DRIVER_MEMORY.value())
        java_options = driver_java_options() if java_options is None else java_options
        if java_options:
            builder = builder.config("spark.driver.extraJavaOptions", java_options)
    for key, value in session_confs(shuffle_partitions).items():
        builder = builder.config(key, value)
    hadoop = s3a_confs()
    for key, value in hadoop.items():
        builder = builder.config(f"spark.hadoop.{key}", value)
    spark = builder.getOrCreate()
    if spark.conf.get(_MAX_SPLIT, None) is None:  # unless the properties file sets it
        spark.conf.set(_MAX_SPLIT, str(MAX_SPLIT_BYTES))
    # a session that already existed takes them too
    live = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in hadoop.items():
        live.set(key, value)
    spark.sparkContext.setLogLevel(settings.SPARK_LOG_LEVEL.value())
    return spark


def forget_table_logs() -> None:
    """Make the running session read every Delta log afresh: another process may have changed
    the tables since its last command (a backfill, a rollback), as a driver of its own would see."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
