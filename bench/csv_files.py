"""Benchmark: CSV files with a header, the platform's parse (an ingest hop with ``format: csv``
and no transform) against a plain PySpark script with Spark's own CSV reader, side by side in
one process.

``--csv-rows`` sensor readings in 20 files (a tenth of them carrying an extra column, one row in
a thousand a temperature that is not a number) are read, interleaved, each way on a copy of the
landing folder:

- (c) ``lakehouse run sensors`` (quality gates off): fields by each file's header names, the
  extra column rescued into ``_rescued``, bad rows quarantined with a reason;
- (p) a plain Structured Streaming script: Spark's ``csv`` source with ``header`` and the schema
  under ``availableNow``, each batch appended to a Delta table, rows whose temperature does not
  parse left out (what it cannot do: find a column by name per file, or keep the extra one).

Each attempt checks that both kept the same number of good rows.

    python -m bench.csv_files [--rows 1000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.common import lakehouse_seconds, spread, stats
from testkit.paths import environment_kept
from testkit.sensors import COLUMNS, write_pipeline

WAYS = ("hop", "plain")
FILES = 20
QUOTED_NOTE = '"said ""hi"", then left"'  # a field holding the delimiter and doubled quotes
SCHEMA = ", ".join(f"{name} {kind.upper()}" for name, kind in COLUMNS.items())  # the plain reader's


def landing_files(folder: Path, rows: int) -> int:
    """``rows`` readings over :data:`FILES` files; returns how many are good (a number)."""
    folder.mkdir(parents=True, exist_ok=True)
    good = 0
    for index in range(FILES):
        # a file that gained a column, at the end (the plain reader's schema ignores it)
        extra = index % 10 == 9
        lines = ["sensor_id,reading_time,temperature_c,note" + (",battery" if extra else "")]
        for n in range(index, rows, FILES):
            bad = n % 1000 == 999
            good += not bad
            note = "ok" if n % 3 else QUOTED_NOTE
            lines.append(
                f"s{n % 500},2026-03-01T{n % 24:02d}:{n % 60:02d}:00,{'warm' if bad else round(n % 400 / 10, 1)},"  # noqa: E501
                f"{note}" + (f",{n % 100}" if extra else "")
            )
        (folder / f"readings-{index:02d}.csv").write_text("\n".join(lines) + "\n")
    return good


def _hop(home: Path) -> float:
    return lakehouse_seconds(home, ["run", "sensors", "--quality=off", "--run-id", "bench"])


def _plain(spark, home: Path) -> float:
    target = str(home / "plain")
    began = time.perf_counter()

    def append(batch, batch_id: int) -> None:
        batch.where("temperature_c IS NOT NULL").write.format("delta").mode("append").option(
            "txnAppId", "plain"
        ).option("txnVersion", batch_id).save(target)

    query = (
        spark.readStream.schema(SCHEMA)
        .option("header", True)
        .option("escape", '"')
        .option("mode", "PERMISSIVE")
        .csv(str(home / "landing/sensors"))
        .writeStream.foreachBatch(append)
        .option("checkpointLocation", str(home / "plain-checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return time.perf_counter() - began


def _one(way: str, spark, source: Path, home: Path) -> tuple[float, int]:
    shutil.copytree(source, home)
    if way == "plain":
        return _plain(spark, home), spark.read.format("delta").load(str(home / "plain")).count()
    return _hop(home), spark.read.format("delta").load(str(home / "tables/bronze/sensors")).count()


def run(rows: int, repeats: int, warm_up: bool = True) -> dict:
    from spark_jobs.engine.session import build_session

    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-csv-"))
    source = root / "source"
    with environment_kept("LAKEHOUSE_HOME", "LAKEHOUSE_PIPELINES"):
        os.environ["LAKEHOUSE_PIPELINES"] = str(write_pipeline(root / "pipelines"))
        try:
            good = landing_files(source / "landing" / "sensors", rows)
            spark = build_session("lakehouse-bench")
            for way in WAYS if warm_up else ():
                _one(way, spark, source, root / f"warm-up-{way}")
                shutil.rmtree(root / f"warm-up-{way}")
            seconds: dict[str, list[float]] = {way: [] for way in WAYS}
            for attempt in range(repeats):
                for way in WAYS:
                    home = root / f"{way}-{attempt}"
                    elapsed, kept = _one(way, spark, source, home)
                    shutil.rmtree(home)
                    seconds[way].append(elapsed)
                    print(f"  csv {attempt + 1}/{repeats} {way}: {elapsed:.1f} s", flush=True)
                    if kept != good:
                        raise RuntimeError(
                            f"{way} kept {kept:,} rows, not the {good:,} good "
                            "ones: not the same work"
                        )
        finally:
            shutil.rmtree(root, ignore_errors=True)
    result = {"rows": rows, "files": FILES, "good_rows": good, "ways": {}}
    for way in WAYS:
        result["ways"][way] = {
            "seconds": stats(seconds[way]),
            "rows_per_s": stats([rows / s for s in seconds[way]], 0),
        }
    median = {way: result["ways"][way]["seconds"]["median"] for way in WAYS}
    result["ratio_hop_over_plain"] = round(median["plain"] / median["hop"], 2)
    return result


def markdown(result: dict) -> str:
    labels = {
        "hop": "(c) lakehouse run, `format: csv` (by header names, rescue, quarantine)",
        "plain": "(p) plain script, Spark's csv source with a schema",
    }
    lines = [
        f"{result['rows']:,} CSV rows in {result['files']} files with a header "
        f"({result['good_rows']:,} good), read once; median of "
        f"{result['ways']['hop']['seconds']['n']} (min-max)",
        "",
        "| way | seconds | rows/s |",
        "|---|---:|---:|",
    ]
    for way, row in result["ways"].items():
        lines.append(
            f"| {labels[way]} | {spread(row['seconds'])} | {spread(row['rows_per_s'], '{:,.0f}')} |"
        )
    lines.append(
        f"\nc/p = {result['ratio_hop_over_plain']} (rows/s of the hop over the plain script's)."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.csv_files", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    result = run(args.rows, args.repeats)
    print(json.dumps(result, indent=2))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
