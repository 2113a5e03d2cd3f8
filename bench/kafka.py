"""Benchmark: ingest from a Kafka topic, the platform's run-once hop against a plain Structured
Streaming script reading the same topic, side by side in one process.

The throughput benchmark's YSB events (its generator, seed and hostile lines) are produced once,
one record per line, to a topic of two partitions on the embedded broker
(``include/scripts/kafka_server.py``, on loopback: the figures are the source's cost on this
machine, not a network's). Then, interleaved, each on a fresh lake and checkpoint:

- (k) ``lakehouse run ad_events --hop bronze`` on a copy of the spec whose bronze reads the topic
  (run-once, ``availableNow``; quality gates off, their share is :mod:`bench.quality`'s figure);
- (p) a plain Structured Streaming script: the Kafka source under ``availableNow``, the same
  parse and quarantine rules as the throughput benchmark's plain script (its own
  expressions), bronze and quarantine appended to Delta in ``foreachBatch``.

Both read every record in one batch with two tasks (one per partition). Each attempt checks that
both wrote the same rows. Beside the figures, the Structured Streaming paper's YSB throughput per
core (:data:`PAPER`).

    python -m bench.kafka [--events 1000000] [--repeats 3]
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

from bench.common import CORES, ROOT, spread, stats
from bench.throughput import HOSTILE_LINES, RANGE, plain_events, plain_invalid, plain_parse
from testkit.lakes import topic_spec_copy
from testkit.paths import environment_kept

sys.path.insert(0, str(ROOT / "include" / "scripts"))

TOPIC = "ysb"
WAYS = ("run", "plain")
# The Structured Streaming paper (Armbrust et al., SIGMOD 2018), its Yahoo! Streaming Benchmark
# figure: 65 million records/s on 5 c3.2xlarge workers (40 virtual cores), Kafka to Kafka.
PAPER = {"records_per_s": 65_000_000, "cores": 40}


def _lines(root: Path, events: int) -> list[bytes]:
    """The throughput benchmark's landing lines (its seed, 1% bad lines) and hostile lines."""
    from spark_jobs.cli import main

    source = root / "source"
    os.environ["LAKEHOUSE_HOME"] = str(source)
    os.environ["LAKEHOUSE_PIPELINES"] = str(ROOT / "examples")
    main(
        [
            "generate",
            "ad_events",
            "--events",
            str(events),
            "--files",
            "4",
            "--seed",
            "5",
            "--start",
            RANGE[0],
            "--bad-fraction",
            "0.01",
        ]
    )
    lines = [
        line
        for path in sorted((source / "landing/ad_events").glob("*.json"))
        for line in path.read_bytes().splitlines()
    ]
    hostile = max(events // 1000, len(HOSTILE_LINES))
    return lines + [HOSTILE_LINES[index % len(HOSTILE_LINES)] for index in range(hostile)]


def _run(home: Path) -> float:
    from spark_jobs.cli import main

    os.environ["LAKEHOUSE_HOME"] = str(home)
    began = time.perf_counter()
    code = main(["run", "ad_events", "--hop", "bronze", "--quality=off", "--run-id", "bench"])
    elapsed = time.perf_counter() - began
    if code != 0:
        raise RuntimeError(f"lakehouse run ad_events --hop bronze exited {code}")
    return elapsed


def _plain(spark, home: Path) -> float:
    """The plain script: the Kafka source, the plain parse, two Delta appends per batch."""
    from pyspark.sql import functions as F

    from spark_jobs.model.kafka import KafkaConnection

    began = time.perf_counter()
    records = (
        spark.readStream.format("kafka")
        .options(**KafkaConnection.from_env().spark_options())
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .load()
    )
    lines = records.select(
        F.col("value").cast("string").alias("value"),
        F.concat_ws("/", F.lit("kafka:/"), "topic", "partition", "offset").alias("_source_file"),
    )

    def write(batch, batch_id: int) -> None:
        parsed = plain_parse(batch).persist()
        plain_events(parsed).write.format("delta").mode("append").partitionBy("event_date").option(
            "txnAppId", "plain"
        ).option("txnVersion", batch_id).save(str(home / "bronze"))
        plain_invalid(parsed).write.format("delta").mode("append").option(
            "txnAppId", "plain"
        ).option("txnVersion", batch_id).save(str(home / "quarantine"))
        parsed.unpersist()

    query = (
        lines.writeStream.foreachBatch(write)
        .option("checkpointLocation", str(home / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return time.perf_counter() - began


def _counts(spark, bronze: Path, quarantine: Path) -> dict[str, int]:
    return {
        name: spark.read.format("delta").load(str(path)).count()
        for name, path in (("bronze", bronze), ("quarantine", quarantine))
    }


def _one(way: str, spark, home: Path) -> tuple[float, dict[str, int]]:
    if way == "plain":
        return _plain(spark, home), _counts(spark, home / "bronze", home / "quarantine")
    return _run(home), _counts(
        spark, home / "tables/bronze/ad_events", home / "tables/quarantine/ad_events"
    )


def run(events: int, repeats: int, warm_up: bool = True) -> dict:
    from kafka_server import KafkaServer

    from spark_jobs.control import topics
    from spark_jobs.engine.session import build_session

    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-kafka-"))
    server = KafkaServer(root / "kafka")
    with environment_kept("LAKEHOUSE_HOME", "LAKEHOUSE_PIPELINES", *server.env()):
        try:
            server.start()
            os.environ.update(server.env())
            server.create_topic(TOPIC, CORES)
            lines = _lines(root, events)
            began = time.perf_counter()
            topics.produce(TOPIC, lines)
            produce_s = time.perf_counter() - began
            os.environ["LAKEHOUSE_PIPELINES"] = str(
                topic_spec_copy(root / "pipelines", topic=TOPIC)
            )
            spark = build_session("lakehouse-bench")
            for way in WAYS if warm_up else ():
                _one(way, spark, root / f"warm-up-{way}")
                shutil.rmtree(root / f"warm-up-{way}")
            seconds: dict[str, list[float]] = {way: [] for way in WAYS}
            for attempt in range(repeats):
                counts = {}
                for way in WAYS:
                    home = root / f"{way}-{attempt}"
                    elapsed, counts[way] = _one(way, spark, home)
                    seconds[way].append(elapsed)
                    shutil.rmtree(home)
                    print(f"  kafka {attempt + 1}/{repeats} {way}: {elapsed:.1f} s", flush=True)
                if counts["run"] != counts["plain"] or sum(counts["run"].values()) != len(lines):
                    raise RuntimeError(
                        f"the hop and the plain script wrote different rows ({counts}) of "
                        f"{len(lines)} records, so they did not do the same work"
                    )
        finally:
            server.stop()
            shutil.rmtree(root, ignore_errors=True)
    result = {
        "records": len(lines),
        "partitions": CORES,
        "cores": CORES,
        "rows": counts["run"],
        "produce_records_per_s": round(len(lines) / produce_s),
        "ways": {},
        "paper_records_per_s_per_core": PAPER["records_per_s"] // PAPER["cores"],
    }
    for way in WAYS:
        rates = [len(lines) / value for value in seconds[way]]
        result["ways"][way] = {
            "seconds": stats(seconds[way]),
            "records_per_s": stats(rates, 0),
            "records_per_s_per_core": stats([rate / CORES for rate in rates], 0),
        }
    median = {way: result["ways"][way]["seconds"]["median"] for way in WAYS}
    result["ratio_run_over_plain"] = round(median["plain"] / median["run"], 2)
    return result


def markdown(result: dict) -> str:
    labels = {
        "run": "(k) lakehouse run, bronze from the topic",
        "plain": "(p) plain Structured Streaming script",
    }
    lines = [
        f"Ingest of {result['records']:,} YSB records from a Kafka topic of {result['partitions']} "
        f"partitions, {result['cores']} cores, median of "
        f"{result['ways']['run']['seconds']['n']} (min-max)",
        "",
        "| way | seconds | records/s | records/s per core |",
        "|---|---:|---:|---:|",
    ]
    for way, row in result["ways"].items():
        lines.append(
            f"| {labels[way]} | {spread(row['seconds'])} | "
            f"{spread(row['records_per_s'], '{:,.0f}')} | "
            f"{row['records_per_s_per_core']['median']:,.0f} |"
        )
    lines.append(
        "| the Structured Streaming paper's YSB figure | | | "
        f"{result['paper_records_per_s_per_core']:,} |"
    )
    lines.append(
        f"\nk/p = {result['ratio_run_over_plain']} (records/s of the run-once hop over the plain "
        "script's on the same topic; target >= 0.9). Both parse with the same rules and write "
        "bronze and quarantine; the paper's job parses, filters, joins and counts, from Kafka to "
        f"Kafka, on 40 cores. Produced at {result['produce_records_per_s']:,} "
        "records/s by the plain client."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.kafka", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    result = run(args.events, args.repeats)
    print(json.dumps(result, indent=2))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
