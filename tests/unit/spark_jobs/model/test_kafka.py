"""``spark_jobs/model/kafka.py``: the Kafka connection's two dialects, from the settings alone
(argument building: no broker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_jobs.model.errors import UsageError
from spark_jobs.model.kafka import KafkaConnection

pytestmark = pytest.mark.unit


def test_a_login_reaches_spark_and_the_plain_client_alike(monkeypatch):
    monkeypatch.setenv("LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS", "broker-1:9092,broker-2:9092")
    monkeypatch.setenv("LAKEHOUSE_KAFKA_USERNAME", "team")
    monkeypatch.setenv("LAKEHOUSE_KAFKA_PASSWORD", 'p"w\\d')
    monkeypatch.setenv("LAKEHOUSE_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
    connection = KafkaConnection.from_env()
    assert connection.client_config() == {
        "bootstrap.servers": "broker-1:9092,broker-2:9092",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "team",
        "sasl.password": 'p"w\\d',
    }
    assert connection.spark_options() == {
        "kafka.bootstrap.servers": "broker-1:9092,broker-2:9092",
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="team" password="p\\"w\\\\d";'
        ),
    }
    # what a process started with these settings reads back
    for key, value in connection.env().items():
        monkeypatch.setenv(key, value)
    assert KafkaConnection.from_env() == connection


def test_without_a_login_nothing_of_sasl_is_sent_and_missing_brokers_are_named(monkeypatch):
    monkeypatch.setenv("LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    for name in ("LAKEHOUSE_KAFKA_USERNAME", "LAKEHOUSE_KAFKA_SECURITY_PROTOCOL"):
        monkeypatch.delenv(name, raising=False)
    assert KafkaConnection.from_env().spark_options() == {
        "kafka.bootstrap.servers": "127.0.0.1:9092",
        "kafka.security.protocol": "PLAINTEXT",
    }
    monkeypatch.setenv("LAKEHOUSE_KAFKA_SECURITY_PROTOCOL", "TLS")
    with pytest.raises(
        UsageError, match="LAKEHOUSE_KAFKA_SECURITY_PROTOCOL='TLS': use one of PLAINTEXT"
    ):
        KafkaConnection.from_env()
    monkeypatch.delenv("LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS")
    with pytest.raises(
        UsageError, match="no Kafka brokers are set: set LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS"
    ):
        KafkaConnection.from_env()


def test_a_properties_file_gives_both_clients_tls_and_its_own_keys(monkeypatch, tmp_path):
    """Argument building only: TLS files become librdkafka's locations and Java's PEM stores (the
    key store one owner-only file of the key and the certificate); plain keys go to both,
    ``java.`` and ``librdkafka.`` ones to their client only."""
    (tmp_path / "client.key").write_text(
        "-----BEGIN PRIVATE KEY-----\nk\n-----END PRIVATE KEY-----\n"
    )
    (tmp_path / "client.pem").write_text(
        "-----BEGIN CERTIFICATE-----\nc\n-----END CERTIFICATE-----\n"
    )
    properties = tmp_path / "kafka.properties"
    properties.write_text(
        f"# the team's brokers\nssl.ca.location={tmp_path}/ca.pem\n"
        f"ssl.certificate.location = {tmp_path}/client.pem\nssl.key.location "
        f"{tmp_path}/client.key\nsasl.mechanism=OAUTHBEARER\n"
        "java.sasl.login.callback.handler.class=com.example.Login\n"
        "librdkafka.sasl.oauthbearer.method=oidc\n"
    )
    monkeypatch.setenv("LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS", "broker:9093")
    monkeypatch.setenv("LAKEHOUSE_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("LAKEHOUSE_KAFKA_PROPERTIES", str(properties))
    monkeypatch.setenv("LAKEHOUSE_CACHE", str(tmp_path / "cache"))
    connection = KafkaConnection.from_env()
    client = connection.client_config()
    assert {
        key: client[key]
        for key in (
            "ssl.ca.location",
            "ssl.certificate.location",
            "ssl.key.location",
            "sasl.mechanism",
            "sasl.oauthbearer.method",
        )
    } == {
        "ssl.ca.location": f"{tmp_path}/ca.pem",
        "ssl.certificate.location": f"{tmp_path}/client.pem",
        "ssl.key.location": f"{tmp_path}/client.key",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
    }
    assert not any(key.startswith(("java.", "sasl.login")) for key in client)
    spark = connection.spark_options()
    assert spark["kafka.ssl.truststore.type"] == spark["kafka.ssl.keystore.type"] == "PEM"
    assert spark["kafka.ssl.truststore.location"] == f"{tmp_path}/ca.pem"
    assert spark["kafka.sasl.login.callback.handler.class"] == "com.example.Login"
    assert (
        spark["kafka.sasl.mechanism"] == "OAUTHBEARER"
        and "kafka.sasl.oauthbearer.method" not in spark
    )
    assert not any("ssl.ca.location" in key or "librdkafka" in key for key in spark)
    store = Path(spark["kafka.ssl.keystore.location"])
    assert (
        store.read_text().count("-----BEGIN") == 2 and oct(store.stat().st_mode & 0o777) == "0o600"
    )
    assert connection.env()["LAKEHOUSE_KAFKA_PROPERTIES"] == str(properties)

    monkeypatch.setenv("LAKEHOUSE_KAFKA_PROPERTIES", str(tmp_path / "missing.properties"))
    with pytest.raises(
        UsageError, match="LAKEHOUSE_KAFKA_PROPERTIES=.*missing.properties: cannot read it"
    ):
        KafkaConnection.from_env()
