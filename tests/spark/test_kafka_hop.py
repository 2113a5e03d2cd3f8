"""An ingest hop that reads a Kafka topic, on a real broker: ad_events with bronze fed by a topic
of three partitions, the rest of the pipeline unchanged. The sample generator produces to the
topic; the expected tables are computed in plain Python from the records read back with a plain
consumer, not from anything the platform wrote."""

from __future__ import annotations

import importlib.util
import json
import random
import re
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from spark_jobs import service
from spark_jobs.control import quarantine, topics
from spark_jobs.control.hop_state import HopState
from spark_jobs.control.overview import pipeline_overview
from spark_jobs.control.rollback import planner
from spark_jobs.control.status import pending_work
from spark_jobs.model.errors import LakehouseError, RollbackRefused
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import get_spec
from spark_jobs.model.times import parse_time
from testkit.expected import assert_tables_match_landing, delta_rows, topic_records, valid_event
from testkit.lakes import topic_spec_copy
from testkit.paths import EXAMPLES, free_port

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

TOPIC = "ad_events_hop"


def _produce(seed: int) -> None:
    service.generate(
        "ad_events",
        300,
        files=2,
        seed=seed,
        start_ms=parse_time(f"2026-04-01T00:{seed:02d}:00", "start"),
        bad_fraction=0.05,
    )


def _assert_lake_matches_topic(kafka, home) -> None:
    assert_tables_match_landing(home, topic_records(kafka.connection().client_config(), TOPIC))


def test_a_topic_fed_pipeline_runs_once_checks_without_a_jvm_and_rolls_back_exactly(
    spark, kafka, tmp_path, monkeypatch
):
    _topic_fed(kafka, tmp_path, monkeypatch, topic=TOPIC, max_offsets_per_trigger=250)
    kafka.create_topic(TOPIC, 3)
    lake = Lake.open(get_spec("ad_events"))
    home = tmp_path / "lake"

    _produce(1)
    assert pending_work(lake)["bronze"] == f"300 new records in topic {TOPIC} (3 of its partitions)"
    service.run("ad_events", run_id="r1", progress=lambda line: None).raise_for_gate()
    _assert_lake_matches_topic(kafka, home)
    # the check reads the broker and the checkpoint: no JVM
    assert pending_work(lake)["bronze"] is None
    assert sum(topics.logged_offsets(HopState(lake, lake.spec.hop("bronze"))).values()) == 300
    # 300 records, 250 a batch
    assert len(service.status("ad_events", "bronze")["hops"][0]["batch_log"]) == 2

    _produce(2)
    service.run("ad_events", run_id="r2", progress=lambda line: None).raise_for_gate()
    _assert_lake_matches_topic(kafka, home)
    held = quarantine.summary(
        HopState(lake, lake.spec.hop("bronze"))
    )  # counted by partition, not by record
    refused = [
        address
        for address, value in topic_records(kafka.connection().client_config(), TOPIC)
        if not valid_event(value)
    ]
    assert held["rows"] == len(refused) > 0 and held["ingest_again"] == []
    assert {each["value"]: each["rows"] for each in held["files"]} == Counter(
        a.rsplit("/", 1)[0] for a in refused
    )
    before = {hop: delta_rows(home, *_table(hop)) for hop in ("bronze", "gold")}

    # Undo bronze's last batches and everything below, then run: the logged ranges are read again.
    service.rollback("ad_events", "bronze", to_batch=1, progress=lambda line: None)
    assert delta_rows(home, "tables/bronze/ad_events", "_source_file") != before["bronze"]
    service.run("ad_events", run_id="r3", progress=lambda line: None).raise_for_gate()
    _assert_lake_matches_topic(kafka, home)
    assert {hop: delta_rows(home, *_table(hop)) for hop in ("bronze", "gold")} == before

    # A backfill of the day into an empty lake reads the same topic: the same tables.
    other = tmp_path / "backfilled"
    shutil.copytree(home / "landing" / "campaigns", other / "landing" / "campaigns")
    monkeypatch.setenv("LAKEHOUSE_HOME", str(other))
    # the second rebuilds what the first wrote, the quarantine by record ranges
    for _again in range(2):
        service.backfill(
            "ad_events",
            parse_time("2026-04-01", "start"),
            parse_time("2026-04-02", "end"),
            hop="bronze" if _again else "all",
            progress=lambda line: None,
        ).raise_for_gate()
    monkeypatch.setenv("LAKEHOUSE_HOME", str(home))
    for table in (_table("bronze"), _table("gold"), QUARANTINE):
        assert delta_rows(other, *table) == delta_rows(home, *table), table[0]

    # The broker drops the first records after batch 0's end in one partition (as retention
    # would): a rollback to batch 0 is refused before anything changes; one that replays
    # nothing lost is not.
    checkpoint = home / "checkpoints" / "ad_events" / "bronze"
    files_before = sorted(path.name for path in (checkpoint / "offsets").iterdir())
    last = max(int(name) for name in files_before if name.isdigit())
    ends = {
        batch: json.loads((checkpoint / "offsets" / str(batch)).read_text().splitlines()[-1])[TOPIC]
        for batch in range(last + 1)
    }
    end_of_0, end = ends[0], ends[last]
    # one that batches after 0 read 2 or more of
    partition = max(end, key=lambda p: end[p] - end_of_0[p])
    assert end[partition] - end_of_0[partition] >= 2
    cut = TopicPartition(TOPIC, int(partition), end_of_0[partition] + 2)
    admin = AdminClient({**kafka.connection().client_config(), "log_level": 0})
    admin.delete_records([cut])[cut].result(30)
    with pytest.raises(RollbackRefused) as refused:
        service.rollback("ad_events", "bronze", to_batch=0, progress=lambda line: None)
    assert (
        f"bronze: topic {TOPIC} no longer holds 2 records that batches after 0 read (partition "
        f"{partition} offsets {end_of_0[partition]}..{end_of_0[partition] + 1})"
    ) in str(refused.value)
    assert sorted(path.name for path in (checkpoint / "offsets").iterdir()) == files_before
    assert {hop: delta_rows(home, *_table(hop)) for hop in ("bronze", "gold")} == before
    # read past the records lost
    whole = min(batch for batch in ends if ends[batch][partition] >= cut.offset)
    # what it would replay is all there
    assert not planner.plan_request(lake, "bronze", to_batch=whole).refused
    assert planner.plan_request(lake, "bronze", to_batch=whole - 1).refused
    assert planner.plan_request(lake, "bronze", to_batch=-1).refused
    # start over from the earliest
    assert not planner.plan_request(lake, "bronze", to_batch=-1, replan=True).refused

    # Records gone before the hop read them: the run refuses, naming them, and writes nothing.
    topics.produce(TOPIC, ['{"ad_id":"a","event_type":"view","event_time":1775001600000}'] * 20)
    backlog = pipeline_overview(lake)["hops"][0]["backlog"]["topic"]  # the Lakehouse page's figure
    assert backlog["topic"] == TOPIC and backlog["records"] == 20 == sum(
        backlog["partitions"].values()
    )
    marks = topics.watermarks(lake.spec.hop("bronze"))
    read_to = topics.logged_offsets(HopState(lake, lake.spec.hop("bronze")))
    fresh = next(p for p in sorted(marks) if marks[p][1] > read_to[p])
    gone = TopicPartition(*fresh, marks[fresh][1])
    admin.delete_records([gone])[gone].result(30)
    versions = sorted(
        path.name for path in (home / "tables/bronze/ad_events/_delta_log").glob("*.json")
    )
    with pytest.raises(
        LakehouseError,
        match=f"bronze: topic {TOPIC} no longer holds records the hop has not read yet "
        rf"\(partition {fresh[1]} offsets {read_to[fresh]}\.\.{marks[fresh][1] - 1}\)",
    ):
        service.run("ad_events", hop="bronze", progress=lambda line: None)
    assert (
        sorted(path.name for path in (home / "tables/bronze/ad_events/_delta_log").glob("*.json"))
        == versions
    )

    # The topic deleted and created again: runs refuse until the hop starts over on the new topic.
    admin.delete_topics([TOPIC])[TOPIC].result(30)
    deadline = time.time() + 60
    while TOPIC in admin.list_topics(timeout=10).topics:
        assert time.time() < deadline, "the broker did not delete the topic"
        time.sleep(0.5)
    # fewer partitions: where the old topic's first batch began is no start
    kafka.create_topic(TOPIC, 2)
    _produce(3)
    with pytest.raises(
        LakehouseError,
        match=f"topic {TOPIC} holds fewer records than the hop has read .* deleted and "
        "created again",
    ):
        service.run("ad_events", hop="bronze", progress=lambda line: None)
    service.rollback("ad_events", "bronze", to_batch=-1, replan=True, progress=lambda line: None)
    service.run("ad_events", run_id="r4", progress=lambda line: None).raise_for_gate()
    _assert_lake_matches_topic(kafka, home)  # the new topic's records, and nothing of the old one


def test_a_backfill_reads_a_topic_from_where_the_ranges_records_begin(
    spark, kafka, tmp_path, monkeypatch
):
    """Records the broker timed long before a range (and whose rows lie outside it) are not read
    by its backfill; the tables still equal the records. A range whose rows' records the broker
    no longer holds is refused, before anything changes."""
    from confluent_kafka import Producer

    topic = "ad_events_times"
    _topic_fed(kafka, tmp_path, monkeypatch, topic=topic)
    # Kept for good: the broker rolls a segment whose first record is older than a week at the next
    # append and would delete January's records by time at its next retention check.
    kafka.create_topic(topic, 2, **{"retention.ms": "-1"})
    home = tmp_path / "lake"
    january = parse_time("2026-01-01T00:10:00", "start")
    sample = _sample()
    producer, rng = Producer(kafka.connection().client_config()), random.Random(1)
    for n in range(30):  # timed (and happening) in January, long before the range below
        event = sample.event(rng, january + n * 1000)
        producer.produce(
            topic, value=json.dumps(event).encode(), partition=0, timestamp=january + n * 1000
        )
    producer.flush(30)
    service.generate(
        "ad_events",
        40,
        files=1,
        seed=5,
        start_ms=parse_time("2026-04-01T00:05:00", "start"),
        bad_fraction=0.0,
    )  # timed now, happening on 2026-04-01
    service.run("ad_events", progress=lambda line: None).raise_for_gate()
    records = topic_records(kafka.connection().client_config(), topic)
    assert len(records) == 70

    april = service.backfill(
        "ad_events",
        parse_time("2026-04-01", "start"),
        parse_time("2026-04-02", "end"),
        progress=lambda line: None,
    )
    # not January's 30
    assert [record.rows_in for record in april.records if record.hop == "bronze"] == [40]
    assert_tables_match_landing(home, records)

    admin = AdminClient({**kafka.connection().client_config(), "log_level": 0})
    first = TopicPartition(topic, 0, 1)  # partition 0's first record (one of January's) goes
    admin.delete_records([first])[first].result(30)
    versions = sorted(
        path.name for path in (home / "tables/bronze/ad_events/_delta_log").glob("*.json")
    )
    with pytest.raises(
        LakehouseError, match="which the broker no longer holds: a backfill would lose them"
    ):
        service.backfill(
            "ad_events",
            parse_time("2026-01-01", "start"),
            parse_time("2026-01-02", "end"),
            hop="bronze",
            progress=lambda line: None,
        )
    assert (
        sorted(path.name for path in (home / "tables/bronze/ad_events/_delta_log").glob("*.json"))
        == versions
    )


def _topic_fed(kafka, tmp_path, monkeypatch, **bronze) -> Path:
    """ad_events with bronze reading a topic (``bronze``: its keys) on the test's broker, in a lake
    of its own without suites; returns the pipelines folder."""
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "lake"))
    monkeypatch.setenv("LAKEHOUSE_QUALITY", str(tmp_path / "no-suites"))
    for key, value in kafka.env().items():
        monkeypatch.setenv(key, value)
    folder = topic_spec_copy(tmp_path / "pipelines", **bronze)
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(folder))
    return folder


def _sample():
    """The ad_events example's sample module (its ``event``)."""
    loader = importlib.util.spec_from_file_location(
        "ad_events_sample", EXAMPLES / "ad_events" / "ad_events_sample.py"
    )
    sample = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(sample)
    return sample


def _page(lake: Lake) -> str:
    """The Lakehouse page's HTML for ``lake``'s pipeline, from its template."""
    from lakehouse_airflow.ui.render import render

    return render("pipelines.html", pipelines=[pipeline_overview(lake)], broken={})


QUARANTINE = ("tables/quarantine/ad_events", "_source_file", "raw_line", "reason")


def _table(hop: str) -> tuple[str, ...]:
    return {
        "bronze": ("tables/bronze/ad_events", "_source_file", "event_time", "ad_id"),
        "gold": ("tables/gold/campaign_views_10s", "campaign_id", "window_start", "views"),
    }[hop]


def test_a_hop_reads_every_topic_its_pattern_matches_new_ones_included(
    spark, kafka, tmp_path, monkeypatch
):
    """``topic_pattern``: the hop reads each topic the expression finds in the name of, as Spark's
    ``subscribePattern`` does (anchored here: not clicks.us2, nor xclicks.eu); a matching topic
    created later is news to the JVM-free check and is read by the next run; a rollback replays
    exactly and a backfill over the lake keeps it equal to the records, per topic and partition."""
    _topic_fed(
        kafka, tmp_path, monkeypatch, topic_pattern=r"^clicks\.[a-z]+$", max_offsets_per_trigger=150
    )
    lake, home = Lake.open(get_spec("ad_events")), tmp_path / "lake"
    sample = _sample()
    rng, start = random.Random(3), parse_time("2026-04-01T00:00:00", "start")

    # events of ten minutes from ``minute`` on
    def produce(topic: str, count: int, minute: int = 0) -> None:
        events = [
            json.dumps(sample.event(rng, start + minute * 60_000 + rng.randrange(600_000)))
            for _ in range(count)
        ]
        topics.produce(topic, [*events, "not json"])

    def records() -> list:
        config = kafka.connection().client_config()
        return [
            record
            for topic in ("clicks.eu", "clicks.us", "clicks.asia")
            if topic in AdminClient({**config, "log_level": 0}).list_topics(timeout=10).topics
            for record in topic_records(config, topic)
        ]

    for topic, partitions in (
        ("clicks.eu", 2),
        ("clicks.us", 1),
        ("clicks.us2", 1),
        ("xclicks.eu", 1),
    ):
        kafka.create_topic(topic, partitions)
    for topic in ("clicks.eu", "clicks.us", "clicks.us2", "xclicks.eu"):
        produce(topic, 120)
    with pytest.raises(
        LakehouseError,
        match=re.escape(r"hop bronze reads the topics matching '^clicks\.[a-z]+$': "),
    ):
        service.generate("ad_events", 10, files=1, seed=1)
    service.run("ad_events", run_id="r1", progress=lambda line: None).raise_for_gate()
    assert_tables_match_landing(home, records())  # clicks.us2 and xclicks.eu are not read
    assert pending_work(lake)["bronze"] is None

    kafka.create_topic("clicks.asia", 1)
    produce("clicks.asia", 20, minute=20)  # later than the watermark: no event dropped as late
    assert (
        pending_work(lake)["bronze"]
        == r"21 new records in the topics matching '^clicks\.[a-z]+$' (1 of their partitions)"
    )
    assert pipeline_overview(lake)["hops"][0]["backlog"]["topic"]["partitions"] == {
        "clicks.asia/0": 21
    }
    # the Lakehouse page's backlog cell
    assert r"21 records of topics matching ^clicks\.[a-z]+$" in _page(lake)
    with monkeypatch.context() as down:  # no broker there: the page says so and still renders
        down.setenv("LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS", f"127.0.0.1:{free_port()}")
        down.setattr(topics, "TIMEOUT_S", 1.0)
        assert '">broker not answering</span>' in _page(lake)
    service.run("ad_events", run_id="r2", progress=lambda line: None).raise_for_gate()
    assert_tables_match_landing(home, records())
    before = {hop: delta_rows(home, *_table(hop)) for hop in ("bronze", "gold")}

    service.rollback("ad_events", "bronze", to_batch=0, progress=lambda line: None)
    service.run("ad_events", run_id="r3", progress=lambda line: None).raise_for_gate()
    assert {hop: delta_rows(home, *_table(hop)) for hop in ("bronze", "gold")} == before
    service.backfill(
        "ad_events",
        parse_time("2026-04-01", "start"),
        parse_time("2026-04-02", "end"),
        progress=lambda line: None,
    ).raise_for_gate()
    assert {hop: delta_rows(home, *_table(hop)) for hop in ("bronze", "gold")} == before
    assert_tables_match_landing(home, records())


# The example's events as an Avro record; encoded in the test below by hand (Avro's binary
# encoding: zig-zag varint longs, length-prefixed UTF-8 strings, fields in order), not by Spark.
EVENT_SCHEMA = {
    "type": "record",
    "name": "Event",
    "fields": [
        {"name": name, "type": "long" if name == "event_time" else "string"}
        for name in (
            "user_id",
            "page_id",
            "ad_id",
            "ad_type",
            "event_type",
            "event_time",
            "ip_address",
        )
    ],
}


def _avro(event: dict) -> bytes:
    def long(n: int) -> bytes:
        n, out = (n << 1) ^ (n >> 63), bytearray()
        while n > 0x7F:
            out.append(n & 0x7F | 0x80)
            n >>= 7
        return bytes(out) + bytes([n])

    body = b""
    for field in EVENT_SCHEMA["fields"]:
        value = event[field["name"]]
        body += (
            long(value) if field["type"] == "long" else long(len(value.encode())) + value.encode()
        )
    return b"\x00" + (7).to_bytes(4, "big") + body  # Confluent's header: magic byte, schema id 7


def test_avro_values_with_confluents_header_decode_to_the_same_tables_and_the_rest_is_quarantined(
    spark, kafka, tmp_path, monkeypatch
):
    """``avro: {schema, header: confluent}``: each value decodes into its record's JSON line, so
    the example's transform and tables are the same as for JSON records; a value that does not
    decode (cut short, or without the header) is quarantined with its bytes in hex."""
    topic = "ad_events_avro"
    folder = _topic_fed(
        kafka,
        tmp_path,
        monkeypatch,
        topic=topic,
        avro={"schema": "event.avsc", "header": "confluent"},
    )
    (folder / "ad_events" / "event.avsc").write_text(json.dumps(EVENT_SCHEMA))
    kafka.create_topic(topic, 2)
    sample = _sample()
    rng, start = random.Random(4), parse_time("2026-04-01T00:00:00", "start")
    events = [sample.event(rng, start + n * 100) for n in range(200)]
    encoded = {_avro(event): json.dumps(event) for event in events}
    # cut short, wrong magic byte, JSON
    bad = [_avro(events[0])[:9], b"\x01" + _avro(events[1])[1:], b"{}"]
    topics.produce(topic, [*encoded, *bad])
    with pytest.raises(
        LakehouseError, match="hop bronze reads Avro values and the sample writes text"
    ):
        service.generate("ad_events", 10, files=1, seed=1)

    service.run("ad_events", progress=lambda line: None).raise_for_gate()
    lines = [
        (address, encoded.get(value) or "undecodable Avro value: " + value.hex().upper())
        for address, value in topic_records(kafka.connection().client_config(), topic, text=False)
    ]
    assert sum(line.startswith("undecodable") for _address, line in lines) == 3
    assert_tables_match_landing(tmp_path / "lake", lines)


def test_the_crm_change_feed_from_a_topic_equals_the_model(spark, kafka, tmp_path, monkeypatch):
    """The crm example with its Debezium events produced to a topic instead of landing as files:
    the changes hops' SCD 1 and SCD 2 tables equal the plain-Python model, through a rollback of
    the topic-fed hop and its replay."""
    from testkit.changes_model import feed, scd1, scd2
    from testkit.changes_run import HOPS, tables
    from testkit.lakes import example_copy

    topic = "crm_changes"
    pipeline = example_copy(tmp_path / "pipelines", "crm", HOPS)
    spec = yaml.safe_load((pipeline / "crm.yaml").read_text())
    spec["hops"][0].pop("landing")
    spec["hops"][0].update(topic=topic, max_offsets_per_trigger=50)
    (pipeline / "crm.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    home = tmp_path / "lake"
    for key, value in {
        "LAKEHOUSE_HOME": str(home),
        "LAKEHOUSE_PIPELINES": str(tmp_path / "pipelines"),
        "LAKEHOUSE_QUALITY": str(tmp_path / "no-suites"),
        **kafka.env(),
    }.items():
        monkeypatch.setenv(key, value)
    kafka.create_topic(topic, 2)
    arrival = feed(7, keys=8, changes=80)
    half = len(arrival) // 2
    for part in (arrival[:half], arrival[half:]):
        topics.produce(topic, [change.line() for change in part])
        service.run("crm", progress=lambda line: None).raise_for_gate()
    expected = (scd1(arrival), scd2(arrival))
    assert tables(spark, home) == expected
    service.rollback("crm", "bronze_customers", to_batch=0, progress=lambda line: None)
    service.run("crm", progress=lambda line: None).raise_for_gate()
    assert tables(spark, home) == expected


def test_a_hop_switched_between_its_landing_folder_and_a_topic_refuses_until_it_starts_over(
    spark, kafka, tmp_path, monkeypatch
):
    """``make run``, then ``make run SOURCE=kafka`` on the same lake, then back: each switch is a
    code change that the check, the page and the run name before any query starts; a refresh
    starts the hop over on its new source and the tables hold what that source holds."""
    from spark_jobs.model.errors import CodeChanged
    from testkit.lakes import spec_copy

    folder = _topic_fed(kafka, tmp_path, monkeypatch, topic="ad_events_switch")
    spec_copy(folder)  # bronze fed by its landing folder first
    home = tmp_path / "lake"
    service.generate(
        "ad_events",
        240,
        files=2,
        seed=1,
        start_ms=parse_time("2026-04-01T00:01:00", "start"),
        bad_fraction=0.05,
    )
    service.run("ad_events", run_id="landing-1", progress=lambda line: None).raise_for_gate()
    assert_tables_match_landing(home)

    topic_spec_copy(folder, topic="ad_events_switch")
    kafka.create_topic("ad_events_switch", 2)
    _produce(2)  # to the topic: the spec says bronze reads it
    lake = Lake.open(get_spec("ad_events"))
    fix = "`lakehouse refresh ad_events --hop bronze`"
    with pytest.raises(
        CodeChanged,
        match="hop bronze now reads topic ad_events_switch but its checkpoint was "
        "written reading landing files",
    ):
        pending_work(lake)
    assert fix in _page(lake)
    log = sorted(path.name for path in (home / "tables/bronze/ad_events/_delta_log").glob("*.json"))
    with pytest.raises(CodeChanged, match=re.escape(fix)):
        service.run("ad_events", progress=lambda line: None)
    assert (
        sorted(path.name for path in (home / "tables/bronze/ad_events/_delta_log").glob("*.json"))
        == log
    )
    _undone, ran = service.refresh("ad_events", "bronze", progress=lambda line: None)
    ran.raise_for_gate()
    # The topic's records, nothing of the landing files.
    assert_tables_match_landing(
        home, topic_records(kafka.connection().client_config(), "ad_events_switch")
    )
    assert pending_work(lake)["bronze"] is None

    spec_copy(folder)  # and back to the landing folder
    lake = Lake.open(get_spec("ad_events"))
    assert (
        "now reads landing files but its checkpoint was written reading topic ad_events_switch"
        in pending_work(lake, strict=False)["bronze"]
    )
    service.refresh("ad_events", "bronze", progress=lambda line: None)[1].raise_for_gate()
    assert_tables_match_landing(home)


def test_a_topic_behind_mutual_tls_is_read_through_the_kafka_properties_file(
    spark, tmp_path, monkeypatch
):
    """The platform's broker with TLS on its client port (a CA made by the test) and mutual TLS:
    ``LAKEHOUSE_KAFKA_PROPERTIES`` names the CA, the client's certificate and key, which both the
    JVM-free check (librdkafka) and Spark's Kafka source (Java's PEM stores) read; a client that
    has only the CA is refused by the broker."""
    from confluent_kafka import KafkaException
    from kafka_server import KafkaServer

    from testkit.tls import make_ca

    server = KafkaServer(tmp_path / "kafka-tls", tls=make_ca(tmp_path / "tls"))
    server.start()
    try:
        _topic_fed(server, tmp_path, monkeypatch, topic="ad_events_tls")
        assert server.env()["LAKEHOUSE_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
        server.create_topic("ad_events_tls", 2)
        _produce(1)  # the producer is the JVM-free client, through TLS
        lake = Lake.open(get_spec("ad_events"))
        assert (
            pending_work(lake)["bronze"]
            == "300 new records in topic ad_events_tls (2 of its partitions)"
        )
        service.run("ad_events", run_id="tls-1", progress=lambda line: None).raise_for_gate()
        assert_tables_match_landing(
            tmp_path / "lake", topic_records(server.connection().client_config(), "ad_events_tls")
        )
        no_certificate = {
            key: value
            for key, value in server.connection().client_config().items()
            if key not in ("ssl.certificate.location", "ssl.key.location")
        }
        with pytest.raises(KafkaException):
            AdminClient({**no_certificate, "log_level": 0}).list_topics(timeout=5)
    finally:
        server.stop()
