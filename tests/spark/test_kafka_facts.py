"""What Spark's Kafka source does, the ground a topic-fed hop stands on
(docs/concepts/checkpoints.md): plain Structured Streaming against a real broker, none of the
platform's code.

- ``availableNow`` reads up to the end offsets it finds when it starts, in batches of at most
  ``maxOffsetsPerTrigger`` records, and logs each batch's end as ``{"topic": {"partition":
  offset}}`` in ``offsets/N``: the checkpoint alone says which records each batch read.
- A producer that keeps writing while a run reads does not keep the run going: it stops at the end
  offsets it fixed when it started, and the next run reads the rest, each record once.
- A batch whose ``offsets/N`` is put back without its commit runs again over exactly its logged
  range, whatever was produced since (a rollback replays exactly).
- When the records a checkpoint would read next are gone from the broker (retention, or deleted),
  the next run fails (``failOnDataLoss``, on by default) rather than skipping them: a rollback must
  check the broker's earliest offsets before it rewinds a checkpoint there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

pytestmark = [pytest.mark.spark, pytest.mark.integration]

QUIET = {"log_level": 0}


def _produce(kafka, topic: str, numbers: range) -> None:
    producer = Producer({**kafka.connection().client_config(), **QUIET})
    for number in numbers:
        producer.produce(topic, key=str(number % 7), value=str(number))
    assert producer.flush(30) == 0


def _run(
    spark, kafka, topic: str, out: Path, checkpoint: Path, once: bool = False, per_batch: int = 40
) -> None:
    from pyspark.sql import functions as F

    def write(batch, batch_id):
        batch.withColumn("batch", F.lit(batch_id)).write.format("delta").mode("append").save(
            str(out)
        )

    records = (
        spark.readStream.format("kafka")
        .options(**kafka.connection().spark_options())
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", per_batch)
        .load()
        .selectExpr("CAST(value AS STRING) AS value", "partition", "offset")
    )
    writer = records.writeStream.foreachBatch(write).option("checkpointLocation", str(checkpoint))
    writer = writer.trigger(once=True) if once else writer.trigger(availableNow=True)
    writer.start().awaitTermination()


def _rows(spark, out: Path) -> list[tuple[int, int, int, int]]:
    """(value, partition, offset, batch) of every output row."""
    return sorted(
        (int(row.value), row.partition, row.offset, row.batch)
        for row in spark.read.format("delta").load(str(out)).collect()
    )


def _logged(checkpoint: Path, batch: int) -> dict:
    return json.loads((checkpoint / "offsets" / str(batch)).read_text().splitlines()[-1])


def test_available_now_reads_in_bounded_batches_and_logs_each_batchs_end_offsets(
    spark, kafka, tmp_path
):
    kafka.create_topic("facts_batches", 2)
    _produce(kafka, "facts_batches", range(100))
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    _run(spark, kafka, "facts_batches", out, checkpoint)

    rows = _rows(spark, out)
    assert sorted(value for value, *_ in rows) == list(range(100))  # every record once
    batches = sorted({batch for *_, batch in rows})
    assert batches == [0, 1, 2]  # at most 40 a batch
    for batch in batches:
        ends = _logged(checkpoint, batch)["facts_batches"]
        read_so_far = [(partition, offset) for _, partition, offset, b in rows if b <= batch]
        for partition, end in ends.items():  # the logged end is one past the last offset read
            offsets = [offset for p, offset in read_so_far if p == int(partition)]
            assert end == (max(offsets) + 1 if offsets else 0)

    _produce(kafka, "facts_batches", range(100, 130))
    _run(spark, kafka, "facts_batches", out, checkpoint)
    # the next run reads what is new
    assert sorted(value for value, *_ in _rows(spark, out)) == list(range(130))


def test_a_run_stops_at_the_ends_it_fixed_while_a_producer_keeps_writing(spark, kafka, tmp_path):
    import threading
    import time

    kafka.create_topic("facts_busy", 2)
    _produce(kafka, "facts_busy", range(200))
    admin_consumer = _watermark_reader(kafka)
    produced, stop = [200], threading.Event()

    def keep_writing() -> None:  # about 100 records a second, the whole time the run reads
        while not stop.is_set():
            _produce(kafka, "facts_busy", range(produced[0], produced[0] + 20))
            produced[0] += 20
            time.sleep(0.2)

    writer = threading.Thread(target=keep_writing, daemon=True)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    try:
        writer.start()
        before = sum(admin_consumer("facts_busy").values())
        # returns: it does not chase the producer
        _run(spark, kafka, "facts_busy", out, checkpoint, per_batch=100)
        after = sum(admin_consumer("facts_busy").values())
    finally:
        stop.set()
        writer.join(timeout=30)
    last = max(int(path.name) for path in (checkpoint / "offsets").iterdir() if path.name.isdigit())
    read_to = sum(_logged(checkpoint, last)["facts_busy"].values())
    values = [value for value, *_ in _rows(spark, out)]
    # a prefix, each once
    assert before <= read_to == len(values) < after and len(set(values)) == len(values)
    # the rest, once the producer stopped
    _run(spark, kafka, "facts_busy", out, checkpoint, per_batch=1000)
    assert sorted(value for value, *_ in _rows(spark, out)) == list(range(produced[0]))


def _watermark_reader(kafka):
    """``ends(topic)``: each partition's end offset, asked with a plain consumer."""
    from confluent_kafka import Consumer

    consumer = Consumer({**kafka.connection().client_config(), **QUIET, "group.id": "facts"})

    def ends(topic: str) -> dict[int, int]:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in partitions
        }

    return ends


def test_a_logged_batch_put_back_reads_exactly_its_range_again(spark, kafka, tmp_path):
    kafka.create_topic("facts_replay", 2)
    _produce(kafka, "facts_replay", range(100))
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    _run(spark, kafka, "facts_replay", out, checkpoint)
    original = _rows(spark, out)

    # Undo batches 1 and 2 (output, commits, offsets), keep batch 1's offsets aside.
    kept = (checkpoint / "offsets" / "1").read_text()
    for log in ("offsets", "commits"):
        for batch in ("1", "2"):
            (checkpoint / log / batch).unlink()
            (checkpoint / log / f".{batch}.crc").unlink(missing_ok=True)
    spark.sql(f"RESTORE TABLE delta.`{out}` TO VERSION AS OF 0")  # batch 0's append made version 0
    _produce(kafka, "facts_replay", range(100, 150))  # produced meanwhile

    (checkpoint / "offsets" / "1").write_text(kept)
    _run(spark, kafka, "facts_replay", out, checkpoint, once=True)
    replayed = _rows(spark, out)
    # batch 1's records, nothing produced since
    assert replayed == [row for row in original if row[3] <= 1]

    _run(spark, kafka, "facts_replay", out, checkpoint)  # then what is new
    assert sorted(value for value, *_ in _rows(spark, out)) == list(range(150))


def test_records_gone_from_the_broker_fail_the_next_run_rather_than_being_skipped(
    spark, kafka, tmp_path
):
    kafka.create_topic("facts_loss", 1)
    _produce(kafka, "facts_loss", range(50))
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    _run(spark, kafka, "facts_loss", out, checkpoint, per_batch=1000)
    _produce(kafka, "facts_loss", range(50, 80))
    admin = AdminClient({**kafka.connection().client_config(), **QUIET})
    admin.delete_records([TopicPartition("facts_loss", 0, 60)])[
        TopicPartition("facts_loss", 0, 60)
    ].result(30)

    with pytest.raises(
        Exception, match="(?i)data may have been lost|offset.*out of range|failOnDataLoss"
    ):
        _run(spark, kafka, "facts_loss", out, checkpoint)
    assert sorted(
        int(row.value) for row in spark.read.format("delta").load(str(out)).collect()
    ) == list(range(50))
