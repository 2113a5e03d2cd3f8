"""Expected values, computed from the landing files in plain Python without the code under
test, and the tables as another reader (delta-rs) sees them."""

from __future__ import annotations

import csv
import datetime
import json
import os
import re
import time
from collections import Counter
from pathlib import Path

EVENT_TYPES = {"view", "click", "purchase"}


STRING_FIELDS = ("user_id", "page_id", "ad_id", "ad_type", "event_type", "ip_address")


def landing_lines(home: Path | str) -> list[tuple[str, str]]:
    """``(file name, line)`` for every line of every visible landing file (of a local lake, or
    through fsspec of an ``s3a://`` one), those retention moved to ``_archive/`` included."""
    from spark_jobs.logs.fs import filesystem, listing

    folder = f"{home}/landing/ad_events"
    fs = filesystem(folder)
    lines = []
    for path in sorted(listing(fs, folder) + listing(fs, f"{home}/_archive/landing/ad_events")):
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if name.startswith((".", "_")):
            continue
        lines.extend((name, line) for line in hadoop_lines(fs.cat_file(path)))
    return lines


def hadoop_lines(data: bytes) -> list[str]:
    """Lines as Spark's text source reads them: split at \\r\\n, \\n or \\r (nothing else),
    no empty last line after a final newline, bytes decoded as UTF-8 with U+FFFD for bad ones."""
    if not data:
        return []
    lines = re.split(rb"\r\n|\n|\r", data)
    if lines[-1] == b"":
        lines.pop()
    return [line.decode("utf-8", errors="replace") for line in lines]


def skeleton_events(files) -> list[dict]:
    """The valid events of landing files of a pipeline made by ``lakehouse new`` (its bronze rules:
    an object with a string ``id``, a ``kind`` of a, b or c, a number ``amount``, an integer
    ``event_time``), in file order."""
    events = []
    for path in files:
        for line in Path(path).read_text().splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if (
                isinstance(event, dict)
                and isinstance(event.get("id"), str)
                and event.get("kind") in ("a", "b", "c")
                and isinstance(event.get("amount"), (int, float))
                and isinstance(event.get("event_time"), int)
            ):
                events.append(event)
    return events


def valid_event(line: str) -> dict | None:
    """The event in a line, or None when the rules of DESIGN/issue make it invalid."""
    if "\ufffd" in line or len(line.encode("utf-8")) > 1 << 20:
        # bytes that are not UTF-8 (hadoop_lines made them U+FFFD), or longer than 1 MiB
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if not isinstance(event, dict) or any(
        event.get(key) is None for key in ("ad_id", "event_type", "event_time")
    ):
        return None
    if any(event.get(key) is not None and not isinstance(event[key], str) for key in STRING_FIELDS):
        return None
    number = event["event_time"]
    if (
        isinstance(number, bool)
        or not isinstance(number, (int, float))
        or event["event_type"] not in EVENT_TYPES
    ):
        return None
    if not 946_684_800_000 <= number < 4_102_444_800_000:  # [2000-01-01, 2100-01-01)
        return None
    return event


def campaigns_of(home: Path | str) -> dict[str, str]:
    from spark_jobs.logs.fs import filesystem

    path = f"{home}/landing/campaigns/campaigns.csv"
    text = filesystem(path).cat_file(path).decode()
    return {row["ad_id"]: row["campaign_id"] for row in csv.DictReader(text.splitlines())}


def expected_gold(home: Path | str, lines: list[str] | None = None) -> Counter:
    """Views per (campaign_id, window start ms) over every valid view in the landing files (or in
    ``lines``: a topic's records)."""
    campaigns = campaigns_of(home)
    counts: Counter = Counter()
    for line in [line for _name, line in landing_lines(home)] if lines is None else lines:
        event = valid_event(line)
        if event and event["event_type"] == "view" and event["ad_id"] in campaigns:
            time_ms = int(event["event_time"])
            counts[(campaigns[event["ad_id"]], time_ms - time_ms % 10_000)] += 1
    return counts


def gold_counter(spark, home: Path) -> Counter:
    rows = (
        spark.read.format("delta")
        .load(str(home / "tables" / "gold" / "campaign_views_10s"))
        .collect()
    )
    counter: Counter = Counter()
    for row in rows:
        window_ms = utc_ms(row.window_start)
        assert (row.window_end - row.window_start).total_seconds() == 10
        assert (row.campaign_id, window_ms) not in counter, "gold has a duplicate key"
        counter[(row.campaign_id, window_ms)] = row.views
    return counter


BUSINESS = {
    "bronze": (
        "tables/bronze/ad_events",
        [
            "user_id",
            "page_id",
            "ad_id",
            "ad_type",
            "event_type",
            "event_time",
            "event_ts",
            "ip_address",
            "event_date",
            "_source_file",
        ],
    ),
    "silver": (
        "tables/silver/ad_views",
        [
            "campaign_id",
            "ad_id",
            "user_id",
            "page_id",
            "ad_type",
            "event_time",
            "event_ts",
            "ip_address",
            "event_date",
        ],
    ),
    "gold": (
        "tables/gold/campaign_views_10s",
        ["campaign_id", "window_start", "window_end", "views"],
    ),
}


def table_rows(home: Path, hop: str, strip_home: bool = True) -> list[tuple]:
    """A hop's table as sorted tuples of its business columns (lineage columns left out),
    read by delta-rs.
    """
    relative, columns = BUSINESS[hop]
    rows = delta_rows(home, relative, *columns)
    if strip_home and "_source_file" in columns:
        index = columns.index("_source_file")
        rows = [row[:index] + (row[index].rsplit("/", 1)[-1],) + row[index + 1 :] for row in rows]
    return sorted(rows, key=repr)


def utc_ms(moment: datetime.datetime) -> int:
    """Milliseconds since the epoch of a timestamp as a reader returns it: aware (delta-rs), or
    naive in UTC (Spark in a UTC process)."""
    return int(
        (moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)).timestamp() * 1000
    )


def delta_rows(home: Path | str, relative: str, *columns: str) -> list[tuple]:
    """A table's rows (these columns), sorted, as delta-rs reads them: another Delta implementation
    (Rust, no JVM), so a reader independent of the Spark and Delta code that wrote the table, and
    one that costs milliseconds where a Spark read costs about a second per check. An S3 lake's
    store comes from the standard ``AWS_*`` variables."""
    from deltalake import DeltaTable

    options = {}
    if str(home).startswith(("s3://", "s3a://")):
        options = {
            key: os.environ[key]
            for key in (
                "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY",
                "AWS_ENDPOINT_URL",
                "AWS_REGION",
            )
            if os.environ.get(key)
        }
        options["AWS_ALLOW_HTTP"] = str(
            options.get("AWS_ENDPOINT_URL", "").startswith("http://")
        ).lower()
        home = "s3://" + str(home).split("://", 1)[1]
    table = DeltaTable(f"{home}/{relative}", storage_options=options).to_pyarrow_table(
        columns=list(columns)
    )
    return sorted(
        zip(*(table.column(column).to_pylist() for column in columns), strict=True), key=repr
    )


def _watermarks(consumer, partition) -> tuple[int, int]:
    """A partition's earliest and end offsets, asked again for up to 30 s while the broker (just
    restarted by a model step) says its leader is not elected yet or has moved."""
    from confluent_kafka import KafkaError, KafkaException

    deadline = time.monotonic() + 30
    while True:
        try:
            return consumer.get_watermark_offsets(partition, timeout=10)
        except KafkaException as error:
            moving = error.args[0].code() in (
                KafkaError.NOT_LEADER_FOR_PARTITION,
                KafkaError.LEADER_NOT_AVAILABLE,
            )
            if not (moving or error.args[0].retriable()) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def topic_records(client_config: dict, topic: str, text: bool = True) -> list[tuple[str, str]]:
    """``(address, value)`` of every record a Kafka topic holds (address as a topic-fed hop's
    ``_source_file``: ``kafka://<topic>/<partition>/<offset>``), read with a plain consumer; the
    value as UTF-8 text, or its bytes (``text`` false)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {**client_config, "log_level": 0, "group.id": "oracle", "enable.auto.commit": False}
    )
    try:
        found = []
        for partition in sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions):
            low, high = _watermarks(consumer, TopicPartition(topic, partition))
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, partition, low)])
            offset = low - 1
            while offset < high - 1:
                message = consumer.poll(10)
                assert message is not None and message.error() is None, message and message.error()
                offset = message.offset()
                value = message.value()
                found.append(
                    (
                        f"kafka://{topic}/{partition}/{offset}",
                        value.decode("utf-8", "replace") if text else value,
                    )
                )
        return found
    finally:
        consumer.close()


def source_name(path: str) -> str:
    """A landing file's name, or a record's whole address."""
    return path if path.startswith("kafka://") else path.rsplit("/", 1)[-1]


def assert_tables_match_landing(
    home: Path | str, lines: list[tuple[str, str]] | None = None
) -> None:
    """Every table holds exactly what the landing files say (or ``lines``: a topic's
    :func:`topic_records`), no row missing or twice.

    Bronze: one row per valid line (keyed by file, ad, type and time); quarantine: every
    invalid line; silver: one row per valid view with its campaign (None when the ad has
    none); gold: the plain-Python window counts, each key once. Read by delta-rs
    (:func:`delta_rows`); the model test's settle points read with Spark too and compare.
    """
    campaigns = campaigns_of(home)
    bronze, silver, quarantine = [], [], []
    lines = landing_lines(home) if lines is None else lines
    for name, line in lines:
        event = valid_event(line)
        if event is None:
            quarantine.append((line,))
            continue
        bronze.append((name, event["ad_id"], event["event_type"], int(event["event_time"])))
        if event["event_type"] == "view":
            silver.append((event["ad_id"], int(event["event_time"]), campaigns.get(event["ad_id"])))
    stored = [
        (source_name(path), *rest)
        for path, *rest in delta_rows(
            home, "tables/bronze/ad_events", "_source_file", "ad_id", "event_type", "event_time"
        )
    ]
    assert sorted(stored, key=repr) == sorted(bronze, key=repr), (
        "bronze differs from the landing files"
    )
    assert delta_rows(home, "tables/quarantine/ad_events", "raw_line") == sorted(
        quarantine, key=repr
    )
    assert delta_rows(
        home, "tables/silver/ad_views", "ad_id", "event_time", "campaign_id"
    ) == sorted(silver, key=repr)
    gold: Counter = Counter()
    for campaign, start, end, views in delta_rows(
        home, "tables/gold/campaign_views_10s", "campaign_id", "window_start", "window_end", "views"
    ):
        assert (end - start).total_seconds() == 10
        key = (campaign, utc_ms(start))
        assert key not in gold, f"gold has the key {key} twice"
        gold[key] = views
    assert gold == expected_gold(home, [line for _name, line in lines])
