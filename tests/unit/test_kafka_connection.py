"""The Kafka connection's two dialects, from the settings alone (argument building: no broker)."""

from __future__ import annotations

import pytest

from spark_jobs.model.errors import UsageError
from spark_jobs.model.kafka import KafkaConnection

pytestmark = [pytest.mark.unit]


def test_a_login_reaches_spark_and_the_plain_client_alike(monkeypatch):
    monkeypatch.setenv("LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS", "broker-1:9092,broker-2:9092")
    monkeypatch.setenv("LAKEHOUSE_KAFKA_USERNAME", "team")
    monkeypatch.setenv("LAKEHOUSE_KAFKA_PASSWORD", 'p"w\\d')
    monkeypatch.setenv("LAKEHOUSE_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
    connection = KafkaConnection.from_env()
    assert connection.client_config() == {
        "bootstrap.servers": "broker-1:9092,broker-2:9092", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "team", "sasl.password": 'p"w\\d'}
    assert connection.spark_options() == {
        "kafka.bootstrap.servers": "broker-1:9092,broker-2:9092", "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  'username="team" password="p\\"w\\\\d";'}
    for key, value in connection.env().items():  # what a process started with these settings reads back
        monkeypatch.setenv(key, value)
    assert KafkaConnection.from_env() == connection


def test_without_a_login_nothing_of_sasl_is_sent_and_missing_brokers_are_named(monkeypatch):
    monkeypatch.setenv("LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    for name in ("LAKEHOUSE_KAFKA_USERNAME", "LAKEHOUSE_KAFKA_SECURITY_PROTOCOL"):
        monkeypatch.delenv(name, raising=False)
    assert KafkaConnection.from_env().spark_options() == {"kafka.bootstrap.servers": "127.0.0.1:9092",
                                                          "kafka.security.protocol": "PLAINTEXT"}
    monkeypatch.setenv("LAKEHOUSE_KAFKA_SECURITY_PROTOCOL", "TLS")
    with pytest.raises(UsageError, match="LAKEHOUSE_KAFKA_SECURITY_PROTOCOL='TLS': use one of PLAINTEXT"):
        KafkaConnection.from_env()
    monkeypatch.delenv("LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS")
    with pytest.raises(UsageError, match="no Kafka brokers are set: set LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS"):
        KafkaConnection.from_env()


def test_a_new_cluster_id_never_reads_as_an_option():
    """The broker's format tool takes the id after ``-t``; one starting with ``-`` failed a CI run."""
    import base64

    from kafka_server import cluster_id  # include/scripts

    ids = [cluster_id() for _ in range(3000)]  # about 47 of them would start with "-" unfiltered
    assert not [found for found in ids if found.startswith("-")]
    assert all(len(base64.urlsafe_b64decode(found + "==")) == 16 for found in ids) and len(set(ids)) == len(ids)
