"""The Kafka broker of ``make run SOURCE=kafka`` and the tests: Apache Kafka (KRaft) on 127.0.0.1
behind a generated password, started and stopped by PID. Real clients only: a producer and a
consumer that log in with the settings the launcher prints, one that gives a wrong password, and
a restart that keeps the records, the port and the login."""

from __future__ import annotations

import stat
import time

import psutil
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka_server import KafkaServer  # include/scripts (tests/conftest.py puts it on the path)

# a Kafka broker is a JVM: not in `make test-fast`
pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUIET = {"log_level": 0}


def _end_offsets(config: dict, topic: str, partitions: int) -> list[int]:
    """Each partition's end offset; a broker that has just started may say for a moment that it is
    not yet the leader of a partition (a retriable error), so the probe asks again
    for up to 30 s."""
    consumer = Consumer({**config, **QUIET, "group.id": "probe", "enable.auto.commit": False})
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                return [
                    consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                    for p in range(partitions)
                ]
            except KafkaException as error:
                moving = error.args[0].code() in (
                    KafkaError.NOT_LEADER_FOR_PARTITION,
                    KafkaError.LEADER_NOT_AVAILABLE,
                )
                if not (error.args[0].retriable() or moving) or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def test_kafka_on_loopback_behind_a_password_stopped_by_pid_and_restartable(tmp_path):
    server = KafkaServer(tmp_path / "kafka")
    process = server.start()
    try:
        assert stat.S_IMODE((tmp_path / "kafka" / "kafka.json").stat().st_mode) == 0o600
        listening = [
            c.laddr
            for c in psutil.Process(process.pid).net_connections("inet")
            if c.status == psutil.CONN_LISTEN
        ]
        assert listening and all(address.ip == "127.0.0.1" for address in listening), listening

        config = server.connection().client_config()
        server.create_topic("events", 3)
        producer = Producer({**config, **QUIET})
        for number in range(300):
            producer.produce("events", key=str(number % 11), value=str(number))
        assert producer.flush(30) == 0
        assert sum(_end_offsets(config, "events", 3)) == 300

        wrong = AdminClient({**config, **QUIET, "sasl.password": "not-the-password"})
        with pytest.raises(KafkaException):
            wrong.list_topics(timeout=5)
        anonymous = AdminClient({**QUIET, "bootstrap.servers": server.bootstrap_servers})
        with pytest.raises(KafkaException):
            anonymous.list_topics(timeout=5)
    finally:
        server.stop()
    assert (
        not psutil.pid_exists(process.pid)
        or psutil.Process(process.pid).status() == psutil.STATUS_ZOMBIE
    )

    again = KafkaServer(tmp_path / "kafka")
    again.start()
    try:
        assert again.env() == server.env()  # the same port and login: clients keep their settings
        assert sum(_end_offsets(again.connection().client_config(), "events", 3)) == 300
    finally:
        again.stop()


def test_the_broker_and_its_controller_never_draw_one_port(tmp_path, monkeypatch):
    """A unit test of the configuration alone (nothing starts): the port probe is replaced by a
    sequence whose first two draws repeat, as two separate probes may."""
    import kafka_server

    draws = iter([24001, 24001, 24002, 24002, 24003])
    monkeypatch.setattr(kafka_server, "free_port", lambda: next(draws))
    config = KafkaServer(tmp_path / "kafka").config
    assert (config["port"], config["controller_port"]) == (24001, 24002)
    # A port asked for that is the kept controller's moves the controller.
    again = KafkaServer(tmp_path / "kafka", port=24002).config
    assert (again["port"], again["controller_port"]) == (24002, 24003)
