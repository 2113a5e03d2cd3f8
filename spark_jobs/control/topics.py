"""A topic-fed hop against its broker, through the plain Kafka client (no JVM): how far each
partition goes, how far the hop's checkpoint has read, what is left to read (the stream DAG's
"new data?" check and the Lakehouse page's backlog), and whether the broker still holds what a
rollback would read again (:func:`replay_problems`)."""

from __future__ import annotations

import json
import re
import time

from spark_jobs.control import source_switch
from spark_jobs.control.hop_state import HopState
from spark_jobs.logs import checkpoint_log
from spark_jobs.logs.fs import filesystem
from spark_jobs.model.errors import LakehouseError
from spark_jobs.model.kafka import KafkaConnection
from spark_jobs.model.spec import HopSpec

# librdkafka logs connection trouble to stderr by itself; the errors it raises say the same.
_QUIET = {"log_level": 0}
TIMEOUT_S = 15.0


class TopicError(LakehouseError):
    """The broker cannot say what it holds (down, wrong login, no such topic)."""


def _consumer(connection: KafkaConnection):
    from confluent_kafka import Consumer

    return Consumer(
        {
            **connection.client_config(),
            **_QUIET,
            "group.id": "lakehouse-offsets",
            "enable.auto.commit": False,
        }
    )


# A partition of a topic, as the offsets' dictionaries key it.
Partition = tuple[str, int]


def watermarks(
    hop: HopSpec, connection: KafkaConnection | None = None
) -> dict[Partition, tuple[int, int]]:
    """Per partition of the hop's topics: the earliest offset the broker still holds and the end
    offset (one past the last record)."""
    return _ask(hop, connection, _watermarks)


def offsets_at(
    hop: HopSpec, time_ms: int, connection: KafkaConnection | None = None
) -> tuple[dict[Partition, int], dict[Partition, tuple[int, int]]]:
    """Per partition of the hop's topics: the first offset whose record time is ``time_ms`` or
    later (the end offset where there is none), and the watermarks the question needed."""
    from confluent_kafka import TopicPartition

    def question(consumer, hop: HopSpec, connection: KafkaConnection):
        marks = _watermarks(consumer, hop, connection)
        found = (
            consumer.offsets_for_times(
                [TopicPartition(topic, partition, time_ms) for topic, partition in marks],
                timeout=TIMEOUT_S,
            )
            if marks
            else []
        )
        return {
            (each.topic, each.partition): each.offset
            if each.offset >= 0
            else marks[each.topic, each.partition][1]
            for each in found
        }, marks

    return _ask(hop, connection, question)


def _ask(hop: HopSpec, connection: KafkaConnection | None, question):
    """``question(consumer, hop, connection)`` of the brokers, asked again while they say to."""
    from confluent_kafka import KafkaException

    connection = connection or KafkaConnection.from_env()
    consumer = _consumer(connection)
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while True:
            try:
                return question(consumer, hop, connection)
            except KafkaException as error:
                # A broker that has just started, or a partition whose leader moves, says
                # so for a moment.
                if not _passing(error.args[0]) or time.monotonic() > deadline:
                    raise TopicError(
                        f"the Kafka brokers at {connection.bootstrap_servers} did not answer "
                        f"({error.args[0]}): check that they run and the LAKEHOUSE_KAFKA_* settings"
                    ) from None
                time.sleep(0.5)
    finally:
        consumer.close()


def _passing(error) -> bool:
    """Whether a Kafka error is one a moment later may not repeat: librdkafka's retriable ones, and
    a partition whose leader is not yet elected or has just moved (which it does not flag so)."""
    from confluent_kafka import KafkaError

    return error.retriable() or error.code() in (
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
    )


def _watermarks(
    consumer, hop: HopSpec, connection: KafkaConnection
) -> dict[Partition, tuple[int, int]]:
    from confluent_kafka import TopicPartition

    if hop.kafka.topic is not None:
        metadata = consumer.list_topics(hop.kafka.topic, timeout=TIMEOUT_S).topics.get(
            hop.kafka.topic
        )
        if metadata is None or metadata.error is not None:
            raise TopicError(
                f"topic {hop.kafka.topic!r} is not on the brokers at "
                f"{connection.bootstrap_servers}: create it, or fix the hop's `topic`"
            )
        found = {hop.kafka.topic: metadata}
    else:  # as Spark's Kafka source: a match anywhere in the name, internal topics left out
        pattern = re.compile(hop.kafka.topic_pattern)
        found = {
            name: metadata
            for name, metadata in consumer.list_topics(timeout=TIMEOUT_S).topics.items()
            if pattern.search(name) and not name.startswith("__") and metadata.error is None
        }
    return {
        (topic, partition): consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=TIMEOUT_S
        )
        for topic in sorted(found)
        for partition in sorted(found[topic].partitions)
    }


def produce(
    topic: str, lines: list[str] | list[bytes], connection: KafkaConnection | None = None
) -> None:
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
        raise TopicError(
            f"{left} records were not delivered to topic {topic!r} at "
            f"{connection.bootstrap_servers} ({why}): "
            "check that the brokers run and the topic exists"
        )


def _by_partition(offsets: dict) -> dict[Partition, int]:
    """Spark's offsets JSON (``{topic: {partition: offset}}``) keyed by :data:`Partition`."""
    return {
        (topic, int(partition)): int(offset)
        for topic, ends in (offsets or {}).items()
        for partition, offset in ends.items()
    }


def where(hop: HopSpec, partition: Partition) -> str:
    """A partition in a sentence that names the hop's topic already
    (:attr:`HopSpec.topic_label`).
    """
    return (
        f"partition {partition[1]}"
        if hop.kafka.topic is not None
        else f"topic {partition[0]} partition {partition[1]}"
    )


def logged_offsets(state: HopState, batch_id: int | None = None) -> dict[Partition, int] | None:
    """Per partition, the offset the hop's batch ``batch_id`` (default: its last) reads up to, as
    its checkpoint logged it; None before its first batch."""
    checkpoint = state.checkpoint
    batch_ids = checkpoint_log.offset_batch_ids(checkpoint)
    if batch_id is None and not batch_ids:
        return None
    sources = checkpoint_log.read_offsets(
        checkpoint, batch_ids[-1] if batch_id is None else batch_id
    ).sources
    if (
        sources
        and sources[0] is not None
        and source_switch.kind_of_offsets(sources[0]) != source_switch.TOPIC
    ):
        # another source's offsets: the hop's source changed (:mod:`.source_switch` says so)
        return None
    return _by_partition(sources[0] if sources else {})


def unread(state: HopState) -> dict[Partition, int]:
    """Per partition with records the hop has not read yet, how many (offsets behind the end)."""
    return {partition: end - start for partition, (start, end) in unread_spans(state).items()}


def unread_spans(state: HopState) -> dict[Partition, tuple[int, int]]:
    """Per partition with records the hop has not read yet, the offsets ``[start, end)`` of
    them."""
    hop = state.hop
    marks = watermarks(hop)
    read_to = logged_offsets(state)
    if read_to is None:  # the first run starts at the earliest record, or at the end
        start = {
            partition: (low if hop.kafka.starting_offsets == "earliest" else high)
            for partition, (low, high) in marks.items()
        }
    # a partition (or a matching topic) added since the last batch is read from its earliest record
    else:
        start = {partition: read_to.get(partition, low) for partition, (low, high) in marks.items()}
    return {
        partition: (start[partition], high)
        for partition, (_low, high) in marks.items()
        if high > start[partition]
    }


def news(state: HopState) -> str | None:
    """Why the topic-fed ``hop`` has work (records past its last logged offsets), or None."""
    hop = state.hop
    behind = unread(state)
    if not behind:
        return None
    whose = "its" if hop.kafka.topic is not None else "their"
    return (
        f"{sum(behind.values())} new records in {hop.kafka.label} ({len(behind)} "
        f"of {whose} partitions)"
    )


def initial_offsets(state: HopState) -> dict[Partition, int] | None:
    """Per partition, where the hop's first batch began: Spark's Kafka source writes it once, on
    the query's first run, to ``sources/0/0`` (a NUL byte, then ``v1`` and the offsets as JSON)."""
    path = f"{state.checkpoint}/sources/0/0"
    fs = filesystem(path)
    if not fs.exists(path):
        return None
    with fs.open(path, "rb") as handle:
        lines = handle.read().lstrip(b"\x00").decode("utf-8").splitlines()
    offsets = json.loads(lines[-1]) if lines else None
    return (
        _by_partition(offsets)
        if source_switch.kind_of_offsets(offsets) == source_switch.TOPIC
        else None
    )


def lost_ranges(state: HopState, target: int) -> dict[Partition, tuple[int, int]]:
    """Per partition, the offsets ``[first, end)`` that the hop's batches after ``target`` read
    and the broker no longer holds (retention, deleted records, a deleted partition)."""
    hop = state.hop
    start = logged_offsets(state, target) if target >= 0 else initial_offsets(state)
    end = logged_offsets(state)
    if start is None or end is None:
        return {}
    marks = watermarks(hop)
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
        return f"records of {hop.kafka.label} after batch {target}"
    return (
        f"{hop.kafka.label} from "
        f"{'the earliest record held' if hop.kafka.starting_offsets == 'earliest' else 'the end'}"
    )


def replay_problems(state: HopState, target: int, replan: bool) -> list[str]:
    """Why a rollback of ``hop`` to ``target`` cannot replay what it undoes (empty: it can, or it
    does not read a topic): the broker no longer holds some of the records. Back to before the
    first batch with ``replan``, the hop starts over at the earliest record the broker holds,
    which is allowed."""
    hop = state.hop
    if not hop.reads_topic:
        return []
    lost = lost_ranges(state, target)
    if not lost or (target < 0 and replan):
        return []
    ranges = ", ".join(
        f"{where(hop, partition)} offsets {first}..{end - 1}"
        for partition, (first, end) in sorted(lost.items())
    )
    count = sum(end - first for first, end in lost.values())
    return [
        f"{hop.name}: {hop.kafka.label} no longer holds {count} records that batches after "
        f"{target} read ({ranges}): roll back to a later batch, backfill the range from another "
        "copy of the records, or start the hop over from the earliest record the broker holds "
        "(`--to-batch -1 --replan`)"
    ]


def check_nothing_lost(state: HopState) -> None:
    """Refuse a run of the topic-fed ``hop`` that would meet records gone from the broker before it
    read them, or a topic whose offsets went back (deleted and created again), naming them and the
    ways on (:class:`TopicError`). One question to the broker; nothing before the first batch."""
    lake, hop = state.lake, state.hop
    read_to = logged_offsets(state)
    if read_to is None:
        return
    marks = watermarks(hop)
    start_over = f"`lakehouse rollback {lake.spec.name} --hop {hop.name} --to-batch -1 --replan`"
    back = {
        partition: marks[partition][1] if partition in marks else None
        for partition in sorted(read_to)
        if partition not in marks or marks[partition][1] < read_to[partition]
    }
    if back:
        places = ", ".join(
            f"{where(hop, partition)} {'is gone' if end is None else f'ends at {end}'}, "
            f"read up to {read_to[partition]}"
            for partition, end in back.items()
        )
        raise TopicError(
            f"{hop.name}: {hop.kafka.label} holds fewer records than the hop has read ({places}): "
            f"it was deleted and created again; start the hop over on the new topic ({start_over})"
        )
    gone = [partition for partition in sorted(read_to) if marks[partition][0] > read_to[partition]]
    if gone:
        ranges = ", ".join(
            f"{where(hop, partition)} offsets {read_to[partition]}..{marks[partition][0] - 1}"
            for partition in gone
        )
        raise TopicError(
            f"{hop.name}: {hop.kafka.label} no longer holds records the hop has not read yet "
            f"({ranges}): backfill them from another copy of the records, or start the hop over "
            f"from the earliest record the broker holds ({start_over})"
        )
