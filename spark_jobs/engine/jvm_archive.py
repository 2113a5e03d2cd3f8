"""Building the Spark drivers' class-data sharing archive (:mod:`spark_jobs.engine.jvm`): a
short training job, run once by ``lakehouse setup``, whose driver writes the archive as it exits."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from spark_jobs.engine.jvm import archive_options, archive_path, installation
from spark_jobs.engine.session import build_session


def _train(lake: str, archive: str) -> None:
    """A small job that loads what hop runs load: a file stream into Delta through
    ``foreachBatch``, a Delta stream with a watermarked window (a state store), a MERGE, a
    change-feed read and a RESTORE."""
    from pyspark.sql import functions as F

    spark = build_session(
        "lakehouse-jvm-training",
        2,
        java_options=archive_options(Path(archive), "ArchiveClassesAtExit"),
    )
    landing, bronze, hourly = f"{lake}/landing", f"{lake}/bronze", f"{lake}/hourly"
    os.makedirs(landing)
    with open(f"{landing}/events.json", "w") as out:
        out.writelines(
            f'{{"id": {n}, "at": "2026-01-01T00:{n % 60:02d}:00Z"}}\n' for n in range(200)
        )
    schema = "id INT, at TIMESTAMP"

    def append(batch, batch_id):
        parsed = batch.select(F.from_json("value", schema).alias("row")).select("row.*")
        parsed.write.format("delta").mode("append").option("txnAppId", "training").option(
            "txnVersion", batch_id
        ).save(bronze)

    spark.readStream.format("text").load(landing).writeStream.foreachBatch(append).option(
        "checkpointLocation", f"{lake}/_cp/bronze"
    ).trigger(availableNow=True).start().awaitTermination()
    counts = (
        spark.readStream.format("delta")
        .option("skipChangeCommits", "true")
        .load(bronze)
        .withWatermark("at", "10 minutes")
        .groupBy(F.window("at", "1 hour"))
        .count()
    )
    counts.writeStream.format("delta").outputMode("append").option(
        "checkpointLocation", f"{lake}/_cp/hourly"
    ).trigger(availableNow=True).start(hourly).awaitTermination()
    spark.sql(f"ALTER TABLE delta.`{bronze}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    spark.sql(
        f"MERGE INTO delta.`{bronze}` t USING (SELECT 1 AS id, current_timestamp() AS at) s "
        "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 2).load(
        bronze
    ).count()
    spark.sql(f"DESCRIBE HISTORY delta.`{bronze}`").collect()
    spark.sql(f"RESTORE TABLE delta.`{bronze}` TO VERSION AS OF 1")
    spark.stop()


def build_archive() -> Path | None:
    """Write this machine's archive once (about half a minute); ``None`` without Java.

    The training job runs in a child process whose driver writes the archive as it exits;
    it is moved into place only when complete, so two setups at once cannot leave half of one.
    """
    target = archive_path()
    if target is None or target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.{os.getpid()}")
    with tempfile.TemporaryDirectory(prefix="lakehouse-jvm-") as lake:
        done = subprocess.run(
            [sys.executable, "-m", "spark_jobs.engine.jvm_archive", "--train", lake, str(staging)],
            capture_output=True,
            text=True,
        )
    if done.returncode != 0 or not staging.exists():
        staging.unlink(missing_ok=True)
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        print(
            "warning: no class-data sharing archive, Spark drivers start "
            f"without one ({last[:300]})",
            file=sys.stderr,
        )
        return None
    staging.replace(target)
    # This installation's archives of a previous Java or Spark (other virtualenvs keep theirs).
    for old in target.parent.glob(f"spark-driver-{installation()}-*.jsa"):
        if old != target:
            old.unlink()
    return target


def main() -> int:
    """``make setup``'s step: build the archive when this machine has none."""
    if sys.argv[1:2] == ["--train"]:
        _train(sys.argv[2], sys.argv[3])
        return 0
    archive = build_archive()
    if archive is not None:
        print(f"class-data sharing archive for Spark drivers: {archive}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
