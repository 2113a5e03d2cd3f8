"""Benchmark: applying a change feed, the platform's ``changes`` hop against a plain
``foreachBatch`` MERGE script, side by side in one process; then an incremental run of 1% of the
keys, and the share of the table's files it rewrote.

A feed of ``--changes`` Debezium events over ``--keys`` customers (inserts, updates, a few
deletes and re-inserts, in sequence order, so both ways must give the same table) is ingested
once by the ``crm`` example's bronze hop. Then, interleaved, each on a copy of that lake:

- (c) ``lakehouse run crm --hop customers`` (SCD type 1; quality gates off);
- (p) a plain Structured Streaming script: bronze's Delta table under ``availableNow``, each
  batch reduced to its last change per key and MERGEd into the table on the key, newer
  sequences only (the hand-written MERGE the hop replaces).

Each attempt checks that both wrote the same rows. Last, on the lake the copies were made of, a
file of changes to 1% of the keys is ingested and applied: its time, and the files its MERGE rewrote
(Delta's ``numTargetFilesRemoved``) over the files the table had, beside the plain script's
incremental run on the same lake; then the same on a lake whose feed is ``--longer`` times
longer (same keys): an incremental batch's cost should follow the batch, not the feed.

    python -m bench.changes [--changes 1000000] [--keys 100000] [--repeats 3] [--longer 10]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, lakehouse_seconds, spread, stats
from spark_jobs.model.settings import CHANGES_FROM_TABLE_ROWS
from testkit.paths import environment_kept

WAYS = ("hop", "plain")
T0_MS = 1_780_000_000_000
TIERS = ("bronze", "silver", "gold")
COLUMNS = ("customer_id", "name", "email", "tier", "position")


def _event(key: str, lsn: int, op: str, rng: random.Random) -> str:
    name = rng.choice(("Ada", "Bo", "Cy", "Di", "Ed"))
    row = {
        "customer_id": key,
        "name": name,
        "email": f"{name.lower()}.{key}@example.com",
        "tier": rng.choice(TIERS),
    }
    return json.dumps(
        {
            "before": row if op == "d" else None,
            "after": None if op == "d" else row,
            "op": op,
            "ts_ms": T0_MS + lsn,
            "source": {"lsn": lsn},
        },
        separators=(",", ":"),
    )


def feed(changes: int, keys: int, seed: int = 7) -> list[str]:
    """``changes`` events over ``keys`` customers in sequence order: a key's first change an
    insert, then mostly updates, a delete now and then, and an insert after a delete."""
    rng = random.Random(seed)
    live: dict[str, bool] = {}
    lines = []
    for lsn in range(1, changes + 1):
        key = f"c-{rng.randrange(keys):07d}"
        op = rng.choices("ud", weights=(19, 1))[0] if live.get(key) else "c"
        live[key] = op != "d"
        lines.append(_event(key, lsn, op, rng))
    return lines


def _write(landing: Path, name: str, lines: list[str]) -> None:
    landing.mkdir(parents=True, exist_ok=True)
    (landing / name).write_text("\n".join(lines) + "\n")


def _lakehouse(home: Path, hop: str) -> float:
    return lakehouse_seconds(
        home, ["run", "crm", "--hop", hop, "--quality=off", "--run-id", f"bench-{hop}"]
    )


def _plain(spark, home: Path) -> float:
    """The plain script: bronze as a stream, each batch's last change per key MERGEd, newer only."""
    from delta.tables import DeltaTable
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    target = str(home / "plain")
    began = time.perf_counter()

    def merge(batch, batch_id: int) -> None:
        last = Window.partitionBy("customer_id").orderBy(F.col("position").desc())
        latest = (
            batch.withColumn("_n", F.row_number().over(last)).where("_n = 1").select(*COLUMNS, "op")
        )
        if not DeltaTable.isDeltaTable(spark, target):
            latest.where("op != 'd'").drop("op").write.format("delta").save(target)
            return
        (
            DeltaTable.forPath(spark, target)
            .alias("t")
            .merge(latest.alias("s"), "t.customer_id = s.customer_id")
            .whenMatchedDelete("s.position > t.position AND s.op = 'd'")
            .whenMatchedUpdate(
                "s.position > t.position", set={name: f"s.{name}" for name in COLUMNS}
            )
            .whenNotMatchedInsert("s.op != 'd'", values={name: f"s.{name}" for name in COLUMNS})
            .execute()
        )

    query = (
        spark.readStream.format("delta")
        .load(str(home / "tables/bronze/crm_customers"))
        .writeStream.foreachBatch(merge)
        .option("checkpointLocation", str(home / "plain-checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return time.perf_counter() - began


def _rows(spark, table: Path) -> set[tuple]:
    return {
        tuple(row) for row in spark.read.format("delta").load(str(table)).select(*COLUMNS).collect()
    }


def _one(way: str, spark, source: Path, home: Path) -> tuple[float, set[tuple]]:
    shutil.copytree(source, home)
    if way == "plain":
        return _plain(spark, home), _rows(spark, home / "plain")
    return _lakehouse(home, "customers"), _rows(spark, home / "tables/silver/crm_customers")


def _rewritten(spark, table: Path) -> dict:
    """The last commit's files removed and added, against the files the table had before it."""
    from delta.tables import DeltaTable

    history = DeltaTable.forPath(spark, str(table)).history(2).collect()
    metrics = history[0]["operationMetrics"]
    before = (
        spark.read.format("delta").option("versionAsOf", history[1]["version"]).load(str(table))
    )
    files = len(before.inputFiles())
    removed = int(metrics.get("numTargetFilesRemoved", 0))
    return {
        "operation": history[0]["operation"],
        "files_before": files,
        "files_removed": removed,
        "files_added": int(metrics.get("numTargetFilesAdded", 0)),
        "deletion_vectors_added": int(metrics.get("numTargetDeletionVectorsAdded", 0)),
        "rewritten_share": round(removed / files, 4) if files else 0.0,
    }


def _incremental(spark, home: Path, changes: int, keys: int) -> dict:
    """1% of the keys changed once more (newer sequences), ingested, then applied by the hop."""
    rng = random.Random(11)
    touched = rng.sample(range(keys), max(keys // 100, 1))
    lines = [
        _event(f"c-{key:07d}", changes + 1 + index, "u", rng) for index, key in enumerate(touched)
    ]
    _write(home / "landing/crm/customers", "changes-incremental.json", lines)
    _lakehouse(home, "bronze_customers")
    seconds = _lakehouse(home, "customers")
    plain_s = _plain(spark, home)
    if _rows(spark, home / "tables/silver/crm_customers") != _rows(spark, home / "plain"):
        raise RuntimeError("the hop and the plain script disagree after the incremental run")
    return {
        "changed_keys": len(touched),
        "seconds": round(seconds, 3),
        "plain_seconds": round(plain_s, 3),
        **_rewritten(spark, home / "tables/silver/crm_customers"),
        "plain": _rewritten(spark, home / "plain"),
    }


def _loaded(spark, home: Path, changes: int, keys: int) -> None:
    """A lake at ``home`` whose bronze, hop and plain table hold a feed of ``changes``."""
    lines = feed(changes, keys)
    for part in range(4):
        _write(home / "landing/crm/customers", f"changes-{part}.json", lines[part::4])
    _lakehouse(home, "bronze_customers")
    _lakehouse(home, "customers")
    _plain(spark, home)


def run(changes: int, keys: int, repeats: int, warm_up: bool = True, longer: int = 10) -> dict:
    from spark_jobs.engine.session import build_session

    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-changes-"))
    source = root / "source"
    with environment_kept("LAKEHOUSE_HOME", "LAKEHOUSE_PIPELINES"):
        os.environ["LAKEHOUSE_PIPELINES"] = str(ROOT / "examples")
        try:
            lines = feed(changes, keys)
            for part in range(4):
                _write(source / "landing/crm/customers", f"changes-{part}.json", lines[part::4])
            ingest_s = _lakehouse(source, "bronze_customers")
            spark = build_session("lakehouse-bench")
            for way in WAYS if warm_up else ():
                _one(way, spark, source, root / f"warm-up-{way}")
                shutil.rmtree(root / f"warm-up-{way}")
            seconds: dict[str, list[float]] = {way: [] for way in WAYS}
            for attempt in range(repeats):
                rows = {}
                for way in WAYS:
                    home = root / f"{way}-{attempt}"
                    elapsed, rows[way] = _one(way, spark, source, home)
                    seconds[way].append(elapsed)
                    shutil.rmtree(home)
                    print(f"  changes {attempt + 1}/{repeats} {way}: {elapsed:.1f} s", flush=True)
                if rows["hop"] != rows["plain"] or not rows["hop"]:
                    raise RuntimeError(
                        f"the hop and the plain script wrote different tables ({len(rows['hop'])} "
                        f"and {len(rows['plain'])} rows), so they did not do the same work"
                    )
            # the source lake's own (its bronze checkpoint names its files)
            _lakehouse(source, "customers")
            _plain(spark, source)
            incremental = _incremental(spark, source, changes, keys)
            _loaded(spark, root / "longer", changes * longer, keys)
            incremental_longer = _incremental(spark, root / "longer", changes * longer, keys)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    result = {
        "changes": changes,
        "keys": keys,
        "rows": len(rows["hop"]),
        "ingest_s": round(ingest_s, 3),
        "ways": {},
        "incremental": incremental,
        "longer": longer,
        # a batch of newer changes applies from the tables once the feed holds this many rows
        "from_table_rows": int(CHANGES_FROM_TABLE_ROWS.value()),
        "incremental_longer": incremental_longer,
        # the incremental batch's speed against the plain script's (target >= 1.0), and its time
        # on the longer feed over its time on this one (target <= 1.3)
        "incremental_hop_over_plain": round(
            incremental["plain_seconds"] / incremental["seconds"], 2
        ),
        "incremental_longer_over_shorter": round(
            incremental_longer["seconds"] / incremental["seconds"], 2
        ),
    }
    for way in WAYS:
        result["ways"][way] = {
            "seconds": stats(seconds[way]),
            "changes_per_s": stats([changes / value for value in seconds[way]], 0),
        }
    median = {way: result["ways"][way]["seconds"]["median"] for way in WAYS}
    result["ratio_hop_over_plain"] = round(median["plain"] / median["hop"], 2)
    return result


def markdown(result: dict) -> str:
    labels = {
        "hop": "(c) lakehouse run, the changes hop (SCD 1)",
        "plain": "(p) plain foreachBatch MERGE script",
    }
    lines = [
        f"{result['changes']:,} changes over {result['keys']:,} keys ({result['rows']:,} live "
        f"rows), applied from bronze; median of {result['ways']['hop']['seconds']['n']} (min-max)",
        "",
        "| way | seconds | changes/s |",
        "|---|---:|---:|",
    ]
    for way, row in result["ways"].items():
        lines.append(
            f"| {labels[way]} | {spread(row['seconds'])} | "
            f"{spread(row['changes_per_s'], '{:,.0f}')} |"
        )
    inc = result["incremental"]
    lines.append(
        f"\nc/p = {result['ratio_hop_over_plain']} (changes/s of the hop over the plain script's; "
        f"target >= 1.0). An incremental run changing {inc['changed_keys']:,} keys (1%) took "
        f"{inc['seconds']} s (the plain script's {inc['plain_seconds']} s); its {inc['operation']} "
        f"rewrote {inc['files_removed']} of the table's {inc['files_before']} files "
        f"({inc['rewritten_share']:.1%}; target <= 2%; the plain script's "
        f"{inc['plain']['rewritten_share']:.1%}), added {inc['files_added']} and "
        f"{inc['deletion_vectors_added']} deletion vectors."
    )
    if "incremental_longer" in result:
        longer = result["incremental_longer"]
        lines.append(
            f"\nBatches of newer changes apply from the tables once the feed holds "
            f"{result.get('from_table_rows', 1_000_000):,} rows. "
            f"Incremental c/p = {result['incremental_hop_over_plain']} (target >= 1.0). On a "
            f"feed {result['longer']} times longer over the same keys the same batch took "
            f"{longer['seconds']} s (the plain script's {longer['plain_seconds']} s): "
            f"{result['incremental_longer_over_shorter']} times its time on the shorter feed "
            "(target <= 1.3)."
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.changes", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--longer", type=int, default=10, help="the second feed is this many times longer"
    )
    args = parser.parse_args(argv)
    result = run(args.changes, args.keys, args.repeats, longer=args.longer)
    print(json.dumps(result, indent=2))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
