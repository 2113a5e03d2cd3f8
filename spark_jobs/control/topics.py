"""A topic-fed hop against its broker, through the plain Kafka client (no JVM): how far each
partition goes, how far the hop's checkpoint has read, what is left to read (the stream DAG's
"new data?" check and the Lakehouse page's backlog), and whether the broker still holds what a
rollback would read again (:func:`replay_problems`)."""

from __future__ import annotations

import json
import time

from spark_jobs.logs import checkpoint_log
from spark_jobs.logs.fs import filesystem
from spark_jobs.model.errors import LakehouseError
from spark_jobs.model.kafka import KafkaConnection
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import HopSpec

# librdkafka logs connection trouble to stderr by itself; the errors it raises say the same.
_QUIET = {"log_level": 0}
TIMEOUT_S = 15.0


class TopicError(LakehouseError):
    """The broker cannot say what it holds (down, wrong login, no such topic)."""


def _consumer(connection: KafkaConnection):
    from confluent_kafka import Consumer

    return Consumer({**connection.client_config(), **_QUIET, "group.id": "lakehouse-offsets",
                     "enable.auto.commit": False})


def watermarks(topic: str, connection: KafkaConnection | None = None) -> dict[int, tuple[int, int]]:
    """Per partition of ``topic``: the earliest offset the broker still holds and the end offset
    (one past the last record)."""
    return _ask(topic, connection, _watermarks)


def offsets_at(topic: str, time_ms: int, connection: KafkaConnection | None = None) -> dict[int, int]:
    """Per partition of ``topic``: the first offset whose record time is ``time_ms`` or later (the
    end offset where there is none)."""
    from confluent_kafka import TopicPartition

    def question(consumer, topic: str, connection: KafkaConnection) -> dict[int, int]:
        ends = _watermarks(consumer, topic, connection)
        found = consumer.offsets_for_times([TopicPartition(topic, partition, time_ms) for partition in ends],
                                           timeout=TIMEOUT_S)
        return {each.partition: each.offset if each.offset >= 0 else ends[each.partition][1] for each in found}

    return _ask(topic, connection, question)


def _ask(topic: str, connection: KafkaConnection | None, question):
    """``question(consumer, topic, connection)`` of the brokers, asked again while they say to."""
    from confluent_kafka import KafkaException

    connection = connection or KafkaConnection.from_env()
    consumer = _consumer(connection)
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while True:
            try:
                return question(consumer, topic, connection)
            except KafkaException as error:
                # A broker that has just started, or a partition whose leader moves, says so for a moment.
                if not _passing(error.args[0]) or time.monotonic() > deadline:
                    raise TopicError(f"the Kafka brokers at {connection.bootstrap_servers} did not answer "
                                     f"({error.args[0]}): check that they run and the LAKEHOUSE_KAFKA_* settings") from None
                time.sleep(0.5)
    finally:
        consumer.close()


def _passing(error) -> bool:
    """Whether a Kafka error is one a moment later may not repeat: librdkafka's retriable ones, and
    a partition whose leader is not yet elected or has just moved (which it does not flag so)."""
    from confluent_kafka import KafkaError

    return error.retriable() or error.code() in (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)


def _watermarks(consumer, topic: str, connection: KafkaConnection) -> dict[int, tuple[int, int]]:
    from confluent_kafka import TopicPartition

    metadata = consumer.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
    if metadata is None or metadata.error is not None:
        raise TopicError(f"topic {topic!r} is not on the brokers at {connection.bootstrap_servers}: create it, "
                         "or fix the hop's `topic`")
    return {partition: consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT_S)
            for partition in sorted(metadata.partitions)}


def produce(topic: str, lines: list[str] | list[bytes], connection: KafkaConnection | None = None) -> None:
    """Produce each line (text, as UTF-8, or bytes as they are) as one record's value (no key:
    the client spreads them over the partitions), and wait until the broker has them all."""
    from confluent_kafka import Producer

    connection = connection or KafkaConnection.from_env()
    producer = Producer({**connection.client_config(), **_QUIET, "linger.ms": 20})
    failed: list[str] = []

    def delivered(error, _message) -> None:
        if error is not None:
            failed.append(str(error))

    for line in lines:
        while True:
            try:
                value = line.encode("utf-8") if isinstance(line, str) else line
                producer.produce(topic, value=value, on_delivery=delivered)
                break
            except BufferError:  # the client's queue is full: let it send some
                producer.poll(0.5)
    left = producer.flush(TIMEOUT_S * 4) + len(failed)
    if left:
        why = (failed or ["timed out"])[0]
        raise TopicError(f"{left} records were not delivered to topic {topic!r} at {connection.bootstrap_servers} "
                         f"({why}): "
                         "check that the brokers run and the topic exists")


def logged_offsets(lake: Lake, hop: HopSpec, batch_id: int | None = None) -> dict[int, int] | None:
    """Per partition, the offset the hop's batch ``batch_id`` (default: its last) reads up to, as
    its checkpoint logged it; None before its first batch."""
    checkpoint = lake.checkpoint(hop)
    batch_ids = checkpoint_log.offset_batch_ids(checkpoint)
    if batch_id is None and not batch_ids:
        return None
    sources = checkpoint_log.read_offsets(checkpoint, batch_ids[-1] if batch_id is None else batch_id).sources
    ends = (sources[0] or {}).get(hop.topic, {}) if sources else {}
    return {int(partition): int(offset) for partition, offset in ends.items()}


def unread(lake: Lake, hop: HopSpec) -> dict[int, int]:
    """Per partition with records the hop has not read yet, how many (offsets behind the end)."""
    marks = watermarks(hop.topic)
    read_to = logged_offsets(lake, hop)
    if read_to is None:  # the first run starts at the earliest record, or at the end
        start = {partition: (low if hop.starting_offsets == "earliest" else high)
                 for partition, (low, high) in marks.items()}
    else:  # a partition added since the last batch is read from its earliest record
        start = {partition: read_to.get(partition, low) for partition, (low, high) in marks.items()}
    return {partition: high - start[partition] for partition, (_low, high) in marks.items()
            if high > start[partition]}


def news(lake: Lake, hop: HopSpec) -> str | None:
    """Why the topic-fed ``hop`` has work (records past its last logged offsets), or None."""
    behind = unread(lake, hop)
    if not behind:
        return None
    return f"{sum(behind.values())} new records in topic {hop.topic} ({len(behind)} of its partitions)"


def initial_offsets(lake: Lake, hop: HopSpec) -> dict[int, int] | None:
    """Per partition, where the hop's first batch began: Spark's Kafka source writes it once, on
    the query's first run, to ``sources/0/0`` (a NUL byte, then ``v1`` and the offsets as JSON)."""
    path = f"{lake.checkpoint(hop)}/sources/0/0"
    fs = filesystem(path)
    if not fs.exists(path):
        return None
    with fs.open(path, "rb") as handle:
        lines = handle.read().lstrip(b"\x00").decode("utf-8").splitlines()
    starts = json.loads(lines[-1]).get(hop.topic, {})
    return {int(partition): int(offset) for partition, offset in starts.items()}


def lost_ranges(lake: Lake, hop: HopSpec, target: int) -> dict[int, tuple[int, int]]:
    """Per partition, the offsets ``[first, end)`` that the hop's batches after ``target`` read
    and the broker no longer holds (retention, deleted records, a deleted partition)."""
    start = logged_offsets(lake, hop, target) if target >= 0 else initial_offsets(lake, hop)
    end = logged_offsets(lake, hop)
    if start is None or end is None:
        return {}
    marks = watermarks(hop.topic)
    lost = {}
    for partition, read_to in end.items():
        begin = start.get(partition, 0)
        earliest = marks[partition][0] if partition in marks else read_to
        if read_to > begin and earliest > begin:
            lost[partition] = (begin, min(earliest, read_to))
    return lost


def reread(hop: HopSpec, target: int) -> str:
    """What the topic-fed ``hop`` reads again after a rollback to ``target`` (a plan's words)."""
    if target >= 0:
        return f"records of topic {hop.topic} after batch {target}"
    return f"topic {hop.topic} from {'the earliest record it holds' if hop.starting_offsets == 'earliest' else 'its end'}"


def replay_problems(lake: Lake, hop: HopSpec, target: int, replan: bool) -> list[str]:
    """Why a rollback of ``hop`` to ``target`` cannot replay what it undoes (empty: it can, or it
    does not read a topic): the broker no longer holds some of the records. Back to before the
    first batch with ``replan``, the hop starts over at the earliest record the broker holds,
    which is allowed."""
    if not hop.reads_topic:
        return []
    lost = lost_ranges(lake, hop, target)
    if not lost or (target < 0 and replan):
        return []
    ranges = ", ".join(f"partition {partition} offsets {first}..{end - 1}" for partition, (first, end) in sorted(lost.items()))
    count = sum(end - first for first, end in lost.values())
    return [f"{hop.name}: topic {hop.topic} no longer holds {count} records that batches after {target} read ({ranges}): "
            "roll back to a later batch, backfill the range from another copy of the records, or start the hop over "
            "from the earliest record the broker holds (`--to-batch -1 --replan`)"]


def check_nothing_lost(lake: Lake, hop: HopSpec) -> None:
    """Refuse a run of the topic-fed ``hop`` that would meet records gone from the broker before it
    read them, or a topic whose offsets went back (deleted and created again), naming them and the
    ways on (:class:`TopicError`). One question to the broker; nothing before the first batch."""
    read_to = logged_offsets(lake, hop)
    if read_to is None:
        return
    marks = watermarks(hop.topic)
    start_over = f"`lakehouse rollback {lake.spec.name} --hop {hop.name} --to-batch -1 --replan`"
    back = {partition: marks[partition][1] if partition in marks else None for partition in sorted(read_to)
            if partition not in marks or marks[partition][1] < read_to[partition]}
    if back:
        where = ", ".join(f"partition {partition} {'is gone' if end is None else f'ends at {end}'}, "
                          f"read up to {read_to[partition]}" for partition, end in back.items())
        raise TopicError(f"{hop.name}: topic {hop.topic} holds fewer records than the hop has read ({where}): it was "
                         f"deleted and created again; start the hop over on the new topic ({start_over})")
    gone = [partition for partition in sorted(read_to) if marks[partition][0] > read_to[partition]]
    if gone:
        ranges = ", ".join(f"partition {partition} offsets {read_to[partition]}..{marks[partition][0] - 1}"
                           for partition in gone)
        raise TopicError(f"{hop.name}: topic {hop.topic} no longer holds records the hop has not read yet ({ranges}): "
                         "backfill them from another copy of the records, or start the hop over from the earliest "
                         f"record the broker holds ({start_over})")
