"""The model test's world (:mod:`testkit.model`): the test spec, a lake's landing files (or a
topic's records) drawn at random, what its tables must hold computed from those in plain Python,
and the tables as Spark and delta-rs read them, compared whole or in part."""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from spark_jobs.logs.fs import filesystem, listing, write_text
from testkit.expected import hadoop_lines, source_name, topic_records, utc_ms, valid_event

T0 = 1_780_000_000_000 - 1_780_000_000_000 % 3_600_000  # an hour boundary in 2026
SPAN_MS = 40 * 60 * 1000  # every event time lies in [T0, T0 + SPAN_MS), within the allowed lateness
HOPS = ("bronze", "silver", "gold")
ADS = [(f"ad-{n:02d}", f"campaign-{n % 5}") for n in range(20)]
NO_CAMPAIGN_AD = "ad-orphan"
BAD_LINES = (
    "not json",
    "[1,2]",
    '{"event_type":"view","event_time":1}',
    '{"ad_id":"x","event_type":"view","event_time":"soon"}',
    '{"ad_id":7,"event_type":"view","event_time":1780000000000}',
    "",
)
# ``maintain`` steps archive the landing files of batches older than bronze's rollback window,
# which is 20 minutes or the checkpoints' 8 batches, whichever reaches less far (``advance`` steps
# move the clock on).
WINDOW_MS = 20 * 60_000
SPEC_CHANGES = {
    "allowed_lateness": "1 hour",
    "min_batches_to_retain": 8,
    "source_log_compact_interval": 3,
    "compact_min_files": 3,
    "retention": {"landing": "1 second", "rollback": "20 minutes"},
}
TOPIC = "model_events"  # the Kafka variant's bronze reads it, at most 40 records a batch


class ModelMismatch(AssertionError):
    """A table differs from the model; the message names the table and the difference."""


@dataclass
class Step:
    number: int
    operation: str
    argv: list[str]
    outcome: str = ""
    seconds: float = 0.0

    def __str__(self) -> str:
        return (
            f"{self.number:3d} {self.operation:<9} {' '.join(self.argv)} -> {self.outcome} "
            f"({self.seconds:.1f} s)"
        )


@dataclass
class Sequence:
    seed: int
    steps: list[Step] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    refusals: Counter = field(default_factory=Counter)
    settles: int = 0

    def transcript(self) -> str:
        return f"model sequence seed={self.seed}\n" + "\n".join(map(str, self.steps))


def write_spec(folder: Path, kafka: bool = False) -> Path:
    """The test's copy of the ad_events spec (see :data:`SPEC_CHANGES`); with ``kafka``, bronze
    reads :data:`TOPIC`."""
    import yaml

    from testkit.lakes import spec_copy
    from testkit.paths import EXAMPLES

    changes = dict(SPEC_CHANGES)
    if kafka:
        hops = yaml.safe_load((EXAMPLES / "ad_events" / "ad_events.yaml").read_text())["hops"]
        hops[0].update(topic=TOPIC, max_offsets_per_trigger=40)
        changes["hops"] = hops
    return spec_copy(folder, **changes)


class Lake:
    """The landing files the test wrote (or, given a Kafka ``client`` configuration, the records it
    produced to :data:`TOPIC`), and what every table must hold because of them."""

    def __init__(self, home: str, rng: random.Random, client: dict | None = None):
        self.home = home
        self.client = client
        self.fs = filesystem(home)
        self.rng = rng
        self.files = 0
        self.landing = f"{home}/landing/ad_events"
        self.fs.makedirs(self.landing, exist_ok=True)
        self.fs.makedirs(f"{home}/landing/campaigns", exist_ok=True)
        self.fs.pipe(
            f"{home}/landing/campaigns/campaigns.csv",
            ("ad_id,campaign_id\n" + "".join(f"{a},{c}\n" for a, c in ADS)).encode(),
        )

    def land(self) -> str:
        """One new landing file of 10-60 lines: events at random times (so many are
        late), some invalid.
        """
        lines = []
        for _ in range(self.rng.randint(10, 60)):
            if self.rng.random() < 0.06:
                lines.append(self.rng.choice(BAD_LINES))
                continue
            ad = NO_CAMPAIGN_AD if self.rng.random() < 0.05 else self.rng.choice(ADS)[0]
            lines.append(
                json.dumps(
                    {
                        "user_id": f"u{self.rng.randrange(10**6)}",
                        "page_id": "p",
                        "ad_id": ad,
                        "ad_type": "banner",
                        "event_type": self.rng.choice(("view", "view", "click")),
                        "event_time": T0 + self.rng.randrange(SPAN_MS),
                        "ip_address": "1.2.3.4",
                    }
                )
            )
        name = f"events-{self.files:05d}.json"
        self.files += 1
        if self.client is not None:
            return self._produce(lines)
        write_text(f"{self.landing}/{name}", "".join(line + "\n" for line in lines))
        return name

    def _produce(self, lines: list[str]) -> str:
        """The lines as records of :data:`TOPIC`, by a plain producer (none of the
        platform's code).
        """
        from confluent_kafka import Producer

        producer = Producer({**self.client, "log_level": 0})
        for line in lines:
            producer.produce(TOPIC, value=line.encode())
        if producer.flush(60):
            raise ModelMismatch(f"the broker did not take the {len(lines)} records")
        return f"{len(lines)} records"

    def sources(self) -> list[tuple[str, str]]:
        """``(where from, line)`` of every line the tables must account for: each landing file's
        lines, or each record of the topic (read back from the broker)."""
        if self.client is not None:
            return topic_records(self.client, TOPIC)
        found = []
        # where maintain moves expired files
        archive = self.landing.replace("/landing/", "/_archive/landing/")
        for path in sorted(listing(self.fs, self.landing) + listing(self.fs, archive)):
            name = path.rsplit("/", 1)[-1]
            if not name.startswith((".", "_")):
                found.extend((name, line) for line in hadoop_lines(self.fs.cat_file(path)))
        return found

    # -- what the tables must hold --------------------------------------------------------------

    def expected(self) -> dict[str, Counter]:
        campaigns = dict(ADS)
        bronze, quarantine, silver, gold = Counter(), Counter(), Counter(), Counter()
        for name, line in self.sources():
            event = valid_event(line)
            if event is None:
                quarantine[(line,)] += 1
                continue
            time_ms = int(event["event_time"])
            bronze[(name, event["ad_id"], event["event_type"], time_ms, event["user_id"])] += 1
            if event["event_type"] == "view":
                campaign = campaigns.get(event["ad_id"])
                silver[(event["ad_id"], time_ms, event["user_id"], campaign)] += 1
                if campaign is not None:
                    gold[(campaign, time_ms - time_ms % 10_000)] += 1
        return {"bronze": bronze, "quarantine": quarantine, "silver": silver, "gold": gold}


def stored(spark, home: str) -> dict[str, Counter]:
    """Every table's rows as a multiset, read by Spark (gold: its counts per key, a duplicate
    key is an error).
    """
    fs = filesystem(home)

    def rows(relative: str, *columns: str) -> list[tuple]:
        path = f"{home}/{relative}"
        if not fs.exists(f"{path}/_delta_log"):
            return []
        return [
            tuple(row) for row in spark.read.format("delta").load(path).select(*columns).collect()
        ]

    return _tables(rows)


def stored_by_delta_rs(home: str) -> dict[str, Counter]:
    """The same, read by delta-rs (:func:`testkit.expected.delta_rows`): another Delta
    implementation (Rust, no JVM), so a reader independent of the Spark and Delta code that wrote
    the tables."""
    from testkit.expected import delta_rows

    fs = filesystem(home)

    def rows(relative: str, *columns: str) -> list[tuple]:
        if not fs.exists(f"{home}/{relative}/_delta_log"):
            return []
        return delta_rows(home, relative, *columns)

    return _tables(rows)


def _tables(rows) -> dict[str, Counter]:
    bronze = Counter(
        (source_name(source), *rest)
        for source, *rest in rows(
            "tables/bronze/ad_events",
            "_source_file",
            "ad_id",
            "event_type",
            "event_time",
            "user_id",
        )
    )
    gold: Counter = Counter()
    for campaign, start, views in rows(
        "tables/gold/campaign_views_10s", "campaign_id", "window_start", "views"
    ):
        key = (campaign, utc_ms(start))
        if key in gold:
            raise ModelMismatch(f"gold has key {key} twice")
        gold[key] = views
    return {
        "bronze": bronze,
        "quarantine": Counter(rows("tables/quarantine/ad_events", "raw_line")),
        "silver": Counter(
            rows("tables/silver/ad_views", "ad_id", "event_time", "user_id", "campaign_id")
        ),
        "gold": gold,
    }


def _sample(counter: Counter) -> str:
    return ", ".join(f"{key}: {count}" for key, count in list(counter.items())[:3])


def check_part_of(actual: dict[str, Counter], expected: dict[str, Counter]) -> None:
    """Safety, after every step: nothing a line does not justify, nothing twice."""
    for table in ("bronze", "quarantine", "silver"):
        extra = actual[table] - expected[table]
        if extra:
            raise ModelMismatch(
                f"{table} has {sum(extra.values())} rows the landing files do not justify or "
                f"holds them twice: {_sample(extra)}"
            )
    silver_views: Counter = Counter()
    for (_ad, time_ms, _user, campaign), count in actual["silver"].items():
        if campaign is not None:
            silver_views[(campaign, time_ms - time_ms % 10_000)] += count
    over = {
        key: (count, silver_views[key], expected["gold"][key])
        for key, count in actual["gold"].items()
        if count > min(silver_views[key], expected["gold"][key]) or count <= 0
    }
    if over:
        raise ModelMismatch(
            "gold counts above silver's views or the files' (gold, silver, files): "
            f"{list(over.items())[:3]}"
        )


def check_equal(actual: dict[str, Counter], expected: dict[str, Counter]) -> None:
    """At a settle point: every table equals the landing files."""
    for table in ("bronze", "quarantine", "silver", "gold"):
        if actual[table] != expected[table]:
            missing, extra = expected[table] - actual[table], actual[table] - expected[table]
            raise ModelMismatch(
                f"{table} differs from the landing files: {sum(missing.values())} missing "
                f"({_sample(missing)}), {sum(extra.values())} extra ({_sample(extra)})"
            )
