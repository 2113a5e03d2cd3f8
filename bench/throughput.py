"""Benchmark: the same work three ways on the same YSB landing files.

(a) ``lakehouse run ad_events`` (run-once, all hops), (b) a plain PySpark batch script
written here without the package's runner (same parse, quarantine rules and split, view
filter, campaign join and 10-second window count, with Delta writes), (c) ``lakehouse
backfill`` over the same range. A fourth way, (b0), is the plain script with only the
minimal rules (required fields, event type, time range): the price of the stricter rules.
All run in one process with one JVM (warmed by one run of each way), interleaved, each on a
fresh lake whose landing files are hard links to one generated set (plus lines only the
stricter rules catch); quality gates are off (their share is :mod:`bench.quality`'s
figure). Each attempt checks that (a), (b) and (c) wrote the same row counts, so their ratios
compare the same work.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from bench.common import CORES, link_landing, spread, stats, timed_lakehouse

WAYS = ("run", "plain", "backfill", "plain_minimal")
# plain_minimal skips rules, so it keeps lines the others quarantine
SAME_WORK = ("run", "plain", "backfill")
RANGE = ("2026-03-01T00:00:00", "2026-03-02T00:00:00")  # holds every generated event
# Lines the generator does not write but the quarantine rules catch: fields of the wrong
# JSON type and bytes that are not UTF-8 (one of these per 1,000 events, in their own file).
_EVENT = '"ad_id":"a1","event_type":"view","event_time":1772323200000'
HOSTILE_LINES = (
    '{"ad_id":7,"event_type":"view","event_time":1772323200000}'.encode(),
    ("{" + _EVENT + ',"user_id":{"id":"u1"}}').encode(),
    ("{" + _EVENT + ',"page_id":["p1"]}').encode(),
    ("{" + _EVENT + ',"ip_address":10}').encode(),
    '{"ad_id":"a1","event_type":"view","event_time":"1772323200000"}'.encode(),
    ("{" + _EVENT + ',"user_id":"caf').encode() + b"\xe9" + b'"}',
)


def add_hostile_lines(home: Path, count: int) -> None:
    folder = home / "landing/ad_events"
    lines = [HOSTILE_LINES[index % len(HOSTILE_LINES)] for index in range(count)]
    (folder / "hostile-lines.json").write_bytes(b"".join(line + b"\n" for line in lines))


def plain_batch(spark, home: Path, rules: str = "same") -> dict[str, Path]:
    """The YSB pipeline as a data engineer would write it as one PySpark batch script.

    ``rules="same"`` quarantines what the package's bronze does (with its own expressions):
    lines that are not UTF-8 or longer than 1 MiB, documents that are not objects, string
    fields holding another JSON type, a time that is not a number, plus the required fields,
    event type and time range; and it keeps unknown fields as JSON text (``_rescued``).
    ``rules="minimal"`` keeps only the last three checks, as a quicker script would, and so
    stores lines the others quarantine.
    """
    from pyspark.sql import functions as F

    lines = spark.read.text(str(home / "landing/ad_events")).select(
        "value", F.col("_metadata.file_path").alias("_source_file")
    )
    parsed = plain_parse(lines, rules).persist()
    events = plain_events(parsed)
    out = home / "plain"
    events.write.format("delta").mode("overwrite").partitionBy("event_date").save(
        str(out / "bronze")
    )
    plain_invalid(parsed).write.format("delta").mode("overwrite").save(str(out / "quarantine"))
    campaigns = (
        spark.read.option("header", True)
        .schema("ad_id string, campaign_id string")
        .csv(str(home / "landing/campaigns"))
    )
    views = events.where(F.col("event_type") == "view").join(campaigns, "ad_id", "left")
    views.write.format("delta").mode("overwrite").partitionBy("event_date").save(
        str(out / "silver")
    )
    counts = (
        views.where(F.col("campaign_id").isNotNull())
        .groupBy(F.window("event_ts", "10 seconds").alias("window"), "campaign_id")
        .agg(F.count(F.lit(1)).alias("views"))
        .select(
            "campaign_id",
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "views",
        )
    )
    counts.write.format("delta").mode("overwrite").save(str(out / "gold"))
    parsed.unpersist()
    return {name: out / name for name in ("bronze", "quarantine", "silver", "gold")}


def plain_parse(lines, rules: str = "same"):
    """``lines`` (``value``, ``_source_file``) parsed by the plain script's own expressions, each
    row with ``is_event`` (:func:`plain_batch` says what ``rules`` checks)."""
    from pyspark.sql import functions as F

    doc = F.try_parse_json("value")

    def field(name: str, kind: str = "string"):
        return F.try_variant_get(doc, f"$.{name}", kind)

    def json_type(name: str):
        return F.schema_of_variant(F.variant_get(doc, f"$.{name}", "variant"))

    names = ("user_id", "page_id", "ad_id", "ad_type", "event_type", "ip_address")
    parsed = lines.select(
        *[field(name).alias(name) for name in names],
        field("event_time", "double").cast("long").alias("event_time"),
        "value",
        "_source_file",
    )
    is_event = (
        F.col("ad_id").isNotNull()
        & F.col("event_type").isin("view", "click", "purchase")
        & F.col("event_time").between(946_684_800_000, 4_102_444_800_000 - 1)
    )
    if rules == "same":
        well_formed = F.is_valid_utf8("value") & (F.octet_length("value") <= 1 << 20)
        for name in names:
            well_formed = well_formed & F.coalesce(
                json_type(name).isin("STRING", "VOID"), F.lit(True)
            )
        number = json_type("event_time").rlike(
            "^(BIGINT|INT|SMALLINT|TINYINT|DOUBLE|FLOAT|DECIMAL.*)$"
        )
        is_event = is_event & well_formed & number
        # Fields an event has beyond the known ones, kept as JSON text (the package's `_rescued`).
        known = F.array(*[F.lit(name) for name in (*names, "event_time")])
        extra = F.map_filter(
            F.try_variant_get(doc, "$", "map<string,variant>"),
            lambda key, _v: ~F.array_contains(known, key),
        )
        parsed = parsed.withColumn("_rescued", F.when(F.size(extra) > 0, F.to_json(extra)))
    return parsed.withColumn("is_event", F.coalesce(is_event, F.lit(False)))


def plain_events(parsed):
    """The valid events of :func:`plain_parse`'s rows, with their timestamp and date."""
    from pyspark.sql import functions as F

    return (
        parsed.where("is_event")
        .drop("value", "is_event")
        .withColumn("event_ts", F.timestamp_millis("event_time"))
        .withColumn("event_date", F.to_date("event_ts"))
    )


def plain_invalid(parsed):
    """The quarantine rows of :func:`plain_parse`'s rows."""
    from pyspark.sql import functions as F

    return parsed.where(~F.col("is_event")).select(
        F.make_valid_utf8("value").alias("raw_line"), "_source_file"
    )


def _counts(spark, tables: dict[str, Path]) -> dict[str, int]:
    """Rows of each table, and the views gold counts (equal outputs prove equal work)."""
    found = {
        name: spark.read.format("delta").load(str(path)).count() for name, path in tables.items()
    }
    found["gold_views"] = (
        spark.read.format("delta").load(str(tables["gold"])).groupBy().sum("views").first()[0]
    )
    return found


def _lakehouse_counts(spark, home: Path) -> dict[str, int]:
    return _counts(
        spark,
        {
            "bronze": home / "tables/bronze/ad_events",
            "quarantine": home / "tables/quarantine/ad_events",
            "silver": home / "tables/silver/ad_views",
            "gold": home / "tables/gold/campaign_views_10s",
        },
    )


def _one(way: str, spark, source: Path, home: Path) -> tuple[float, dict[str, int]]:
    if way.startswith("plain"):
        link_landing(source, home)
        began = time.perf_counter()
        tables = plain_batch(spark, home, "minimal" if way == "plain_minimal" else "same")
        return time.perf_counter() - began, _counts(spark, tables)
    argv = (
        ["run", "ad_events"]
        if way == "run"
        else ["backfill", "ad_events", "--start", RANGE[0], "--end", RANGE[1]]
    )
    return timed_lakehouse(
        source, home, [*argv, "--quality=off", "--run-id", "bench"]
    ), _lakehouse_counts(spark, home)


def hop_times(home: Path) -> dict[str, float]:
    """Each hop's time from its run record: where a lakehouse run spends it."""
    return {
        hop: json.loads((home / f"_ops/runs/ad_events/bench.{hop}.json").read_text())["duration_s"]
        for hop in ("bronze", "silver", "gold")
    }


def run(events: int, repeats: int, files: int = 20, warm_up: bool = True) -> dict:
    from spark_jobs.cli import main
    from spark_jobs.engine.session import build_session

    spark = build_session("lakehouse-bench")
    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-throughput-"))
    try:
        source = root / "source"
        os.environ["LAKEHOUSE_HOME"] = str(source)
        main(
            [
                "generate",
                "ad_events",
                "--events",
                str(events),
                "--files",
                str(files),
                "--seed",
                "5",
                "--start",
                f"{RANGE[0]}",
                "--bad-fraction",
                "0.01",
            ]
        )
        add_hostile_lines(source, max(events // 1000, len(HOSTILE_LINES)))
        # JVM, code paths, Delta, the heap: warm on the same set before measuring. (After a tenth
        # of it, the first way measured, always (a), took 28.5 s in its first attempt and 26.0 in
        # its second.)
        for way in WAYS if warm_up else ():
            _one(way, spark, source, root / f"warm-up-{way}")
            shutil.rmtree(root / f"warm-up-{way}")
        seconds: dict[str, list[float]] = {way: [] for way in WAYS}
        hops: dict[str, list[dict]] = {"run": [], "backfill": []}
        for attempt in range(repeats):
            counts = {}
            for way in WAYS:
                home = root / f"{way}-{attempt}"
                elapsed, counts[way] = _one(way, spark, source, home)
                seconds[way].append(elapsed)
                if way in hops:
                    hops[way].append(hop_times(home))
                shutil.rmtree(home)
                print(
                    f"  throughput {attempt + 1}/{repeats} {way}: {seconds[way][-1]:.1f} s",
                    flush=True,
                )
            if len({json.dumps(counts[way], sort_keys=True) for way in SAME_WORK}) != 1:
                raise RuntimeError(
                    "run, plain and backfill wrote different rows, so they did not do "
                    f"the same work: {counts}"
                )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = {
        "events": events,
        "files": files,
        "cores": CORES,
        "rows": counts["run"],
        "ways": {},
        "hostile_lines": max(events // 1000, len(HOSTILE_LINES)),
        "plain_minimal_kept_of_quarantined": counts["run"]["quarantine"]
        - counts["plain_minimal"]["quarantine"],
    }
    for way in WAYS:
        rates = [events / value for value in seconds[way]]
        result["ways"][way] = {
            "seconds": stats(seconds[way]),
            "records_per_s": stats(rates, 0),
            "records_per_s_per_core": stats([rate / CORES for rate in rates], 0),
        }
    for way, samples in hops.items():
        result["ways"][way]["hop_seconds"] = {
            hop: stats([sample[hop] for sample in samples]) for hop in samples[0]
        }
    median = {way: result["ways"][way]["seconds"]["median"] for way in WAYS}
    result["ratios"] = {
        f"{way}_over_{base}": round(median[base] / median[way], 2)
        for base in ("plain", "plain_minimal")
        for way in ("run", "backfill")
    }
    return result


def markdown(result: dict) -> str:
    lines = [
        f"Throughput, {result['events']:,} events in {result['files']} files, {result['cores']} "
        f"cores, median of {result['ways']['run']['seconds']['n']} (min-max)",
        "",
        "| way | seconds | records/s | records/s per core | per hop s |",
        "|---|---:|---:|---:|---|",
    ]
    labels = {
        "run": "(a) lakehouse run",
        "plain": "(b) plain PySpark batch, same rules",
        "backfill": "(c) lakehouse backfill",
        "plain_minimal": "(b0) plain PySpark batch, minimal rules",
    }
    for way, row in result["ways"].items():
        per_hop = ", ".join(
            f"{hop} {value['median']:.1f}" for hop, value in row.get("hop_seconds", {}).items()
        )
        lines.append(
            f"| {labels[way]} | {spread(row['seconds'])} | "
            f"{spread(row['records_per_s'], '{:,.0f}')} | "
            f"{row['records_per_s_per_core']['median']:,.0f} | {per_hop or '-'} |"
        )
    ratios = result["ratios"]
    lines.append(
        f"\na/b = {ratios['run_over_plain']}, c/b = {ratios['backfill_over_plain']} "
        "(records/s over the plain script's with the same quarantine rules; target >= 0.8)"
    )
    lines.append(
        f"\na/b0 = {ratios['run_over_plain_minimal']}, c/b0 = "
        f"{ratios['backfill_over_plain_minimal']} against a script with minimal rules, which "
        f"stores {result['plain_minimal_kept_of_quarantined']:,} of the lines the rules quarantine "
        f"({result['hostile_lines']:,} lines with a field of the wrong JSON type or bytes that are "
        "not UTF-8 were added to the landing files)"
    )
    return "\n".join(lines)
