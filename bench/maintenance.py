"""Benchmark: a month of small commits, and what ``lakehouse maintain`` makes of it.

A table written the way a 30-minute stream DAG writes it (48 appends a day for
``--maintenance-days`` days, ``--maintenance-rows`` rows each, partitioned by day), read side by
side three ways:

- (s) the table as the month of appends left it (one small file per append);
- (m) a copy of it after maintenance (:func:`spark_jobs.engine.maintenance.maintain_tables`:
  compaction, then the files no version from the last one on uses deleted, and the log before its
  newest checkpoint);
- (f) a freshly compacted copy of the same rows (written once).

Each read is a full scan (count and sum) and a one-day filter, timed over ``--repeats`` rounds
of the three ways in turn. Also: the maintenance's own time, and the table's files and stored
bytes before and after. The target: (m) within 1.2x of (f).

    python -m bench.maintenance [--days 10] [--rows 500] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from bench.common import spread, stats

DAY_MS = 86_400_000
APPENDS_PER_DAY = 48
WAYS = ("small", "maintained", "fresh")


def _month(spark, table: str, days: int, rows: int) -> None:
    """``days`` x 48 appends of ``rows`` rows, each into the day it belongs to."""
    from pyspark.sql import functions as F

    for append in range(days * APPENDS_PER_DAY):
        start = append * rows
        (
            spark.range(start, start + rows, numPartitions=1)
            .withColumn("day", F.lit(f"2026-03-{1 + append // APPENDS_PER_DAY:02d}"))
            .withColumn("amount", (F.col("id") % 97).cast("double"))
            .write.format("delta")
            .mode("append")
            .partitionBy("day")
            .save(table)
        )


def _reads(spark, table: str) -> tuple[float, float, tuple]:
    from pyspark.sql import functions as F

    began = time.perf_counter()
    whole = spark.read.format("delta").load(table).agg(F.count("*"), F.sum("amount")).first()
    middle = time.perf_counter()
    spark.read.format("delta").load(table).where("day = '2026-03-01'").agg(F.count("*")).first()
    return middle - began, time.perf_counter() - middle, tuple(whole)


def _maintain(spark, table: str) -> tuple[float, dict]:
    """One maintenance of a table nothing else reads and no rollback window holds."""
    from spark_jobs.control.removable.table_files import TablePlan
    from spark_jobs.engine.maintenance import maintain_tables
    from spark_jobs.logs import delta_log

    def plan_now() -> list[TablePlan]:
        latest = delta_log.table_version(table)
        return [
            TablePlan(
                "bench",
                table,
                latest,
                latest,
                "the benchmark (nothing reads older versions)",
                int(delta_log.commit_info(table, latest)["timestamp"]),
            )
        ]

    began = time.perf_counter()
    done = maintain_tables(spark, plan_now, 8, dry_run=False)[0]
    return time.perf_counter() - began, done


def run(days: int, rows: int, repeats: int) -> dict:
    from spark_jobs.engine.session import build_session

    spark = build_session("lakehouse-bench")
    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-maintenance-"))
    tables = {way: str(root / way) for way in WAYS}
    try:
        began = time.perf_counter()
        _month(spark, tables["small"], days, rows)
        month_s = time.perf_counter() - began
        shutil.copytree(tables["small"], tables["maintained"])
        spark.read.format("delta").load(tables["small"]).coalesce(1).write.format(
            "delta"
        ).partitionBy("day").save(tables["fresh"])
        maintain_s, done = _maintain(spark, tables["maintained"])
        scans: dict[str, list[float]] = {way: [] for way in WAYS}
        days_read: dict[str, list[float]] = {way: [] for way in WAYS}
        for attempt in range(repeats + 1):  # the first round warms the JVM up and is not counted
            results = {}
            for way in WAYS:
                scan, day, results[way] = _reads(spark, tables[way])
                if attempt:
                    scans[way].append(scan)
                    days_read[way].append(day)
            if len(set(results.values())) != 1:
                raise RuntimeError(f"the three tables hold different rows: {results}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = {
        "days": days,
        "appends": days * APPENDS_PER_DAY,
        "rows_per_append": rows,
        "month_s": round(month_s, 1),
        "maintenance_s": round(maintain_s, 2),
        "files": {"before": done["files_before"], "after": done["files_after"]},
        "log_files_deleted": done["log_files_deleted"],
        "stored_bytes": {"before": done["stored_before"], "after": done["stored_after"]},
        "ways": {
            way: {"scan_s": stats(scans[way], 3), "day_s": stats(days_read[way], 3)} for way in WAYS
        },
    }
    median = {way: result["ways"][way]["scan_s"]["median"] for way in WAYS}
    result["scan_ratio_small_over_fresh"] = round(median["small"] / median["fresh"], 2)
    result["scan_ratio_maintained_over_fresh"] = round(median["maintained"] / median["fresh"], 2)
    return result


def markdown(result: dict) -> str:
    labels = {
        "small": "(s) the appends, as they left it",
        "maintained": "(m) the same after `maintain`",
        "fresh": "(f) the same rows written once",
    }
    lines = [
        f"{result['appends']:,} appends of {result['rows_per_append']:,} rows over "
        f"{result['days']} days (written in {result['month_s']} s); median of "
        f"{result['ways']['small']['scan_s']['n']} (min-max)",
        "",
        "| table | full scan s | one-day filter s |",
        "|---|---:|---:|",
    ]
    for way, row in result["ways"].items():
        lines.append(
            f"| {labels[way]} | {spread(row['scan_s'], '{:.3f}')} | "
            f"{spread(row['day_s'], '{:.3f}')} |"
        )
    lines.append(
        f"\nMaintenance took {result['maintenance_s']} s: files {result['files']['before']:,} -> "
        f"{result['files']['after']:,}, {result.get('log_files_deleted', 0):,} log files deleted, "
        f"stored {result['stored_bytes']['before']:,} -> "
        f"{result['stored_bytes']['after']:,} bytes. Full scan s/f = "
        f"{result['scan_ratio_small_over_fresh']}, m/f = "
        f"{result['scan_ratio_maintained_over_fresh']} (target: m/f at most 1.2)."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.maintenance", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--days", type=int, default=10)
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    result = run(args.days, args.rows, args.repeats)
    print(json.dumps(result, indent=2))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
