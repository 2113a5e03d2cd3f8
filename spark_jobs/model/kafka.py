"""How the platform reaches Kafka: one connection, from the ``LAKEHOUSE_KAFKA_*`` settings, in the
two dialects that speak to brokers: Spark's Kafka source (``kafka.``-prefixed Java client
properties) and the plain client of the checks that start no JVM (librdkafka's properties).

A team's brokers may want more than a login: ``LAKEHOUSE_KAFKA_PROPERTIES`` names a properties
file whose TLS files (PEM: the CA, and for mutual TLS the client's certificate and key) become
each client's own properties (Java's PEM trust and key stores, librdkafka's locations), and
whose other keys pass through: plain ones to both clients, ``java.``-prefixed ones to Spark's
source only (an OAUTHBEARER or IAM login module), ``librdkafka.``-prefixed ones to the other.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from spark_jobs.model import settings
from spark_jobs.model.errors import UsageError

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")
# The TLS files, by their librdkafka names (which the properties file uses).
TLS_KEYS = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password")


def read_properties(path: str) -> dict[str, str]:
    """A Java-style properties file (``key=value`` or ``key value`` lines, ``#`` comments); a
    :class:`UsageError` naming the setting when it cannot be read."""
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise UsageError(
            f"{settings.KAFKA_PROPERTIES.name}={path}: cannot read it "
            f"({error.strerror}): fix the path"
        ) from None
    found = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            key, _, value = line.replace("=", " ", 1).partition(" ")
            found[key.strip()] = value.strip()
    return found


@dataclass(frozen=True)
class KafkaConnection:
    """The brokers and the login (none when ``username`` is empty)."""

    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    username: str = ""
    password: str = ""
    # ``LAKEHOUSE_KAFKA_PROPERTIES``: TLS files and pass-through client properties.
    properties_file: str = ""

    @property
    def properties(self) -> dict[str, str]:
        return read_properties(self.properties_file) if self.properties_file else {}

    @classmethod
    def from_env(cls) -> KafkaConnection:
        """The connection the settings describe; a :class:`UsageError` naming the one missing."""
        servers = settings.KAFKA_BOOTSTRAP_SERVERS.value()
        if not servers:
            raise UsageError(
                "no Kafka brokers are set: set "
                f"{settings.KAFKA_BOOTSTRAP_SERVERS.name} (host:port,...)"
            )
        username = settings.KAFKA_USERNAME.value()
        protocol = settings.KAFKA_SECURITY_PROTOCOL.value() or (
            "SASL_PLAINTEXT" if username else "PLAINTEXT"
        )
        mechanism = settings.KAFKA_SASL_MECHANISM.value()
        if protocol not in _PROTOCOLS:
            raise UsageError(
                f"{settings.KAFKA_SECURITY_PROTOCOL.name}={protocol!r}: use one of "
                f"{', '.join(_PROTOCOLS)}"
            )
        if mechanism not in _LOGIN_MODULES:
            raise UsageError(
                f"{settings.KAFKA_SASL_MECHANISM.name}={mechanism!r}: use one of "
                f"{', '.join(_LOGIN_MODULES)}"
            )
        connection = cls(
            servers,
            protocol,
            mechanism,
            username,
            settings.KAFKA_PASSWORD.value(),
            settings.KAFKA_PROPERTIES.value(),
        )
        if connection.properties_file:
            # one that cannot be read is refused here, naming the setting
            read_properties(connection.properties_file)
        return connection

    @staticmethod
    def _passed(properties: dict[str, str], dialect: str) -> dict[str, str]:
        """The properties file's keys for one client (``java`` or ``librdkafka``),
        TLS files aside.
        """
        other = "librdkafka." if dialect == "java" else "java."
        return {
            key.removeprefix(f"{dialect}."): value
            for key, value in properties.items()
            if key not in TLS_KEYS and not key.startswith(other)
        }

    def _java_tls(self, properties: dict[str, str]) -> dict[str, str]:
        """The TLS files as Java's PEM trust store and key store (the key store one file holding
        the key and the certificate, made once in the platform's cache, readable by
        its owner only)."""
        found = {}
        ca, certificate, key = (properties.get(name) for name in TLS_KEYS[:3])
        if ca:
            found.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": ca})
        if certificate and key:
            pem = Path(key).read_bytes() + b"\n" + Path(certificate).read_bytes()
            store = (
                settings.cache_dir() / "kafka-tls" / f"{hashlib.sha256(pem).hexdigest()[:16]}.pem"
            )
            if not store.exists():
                store.parent.mkdir(parents=True, exist_ok=True)
                descriptor = os.open(store, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(descriptor, "wb") as handle:
                    handle.write(pem)
            found.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(store)})
            if properties.get("ssl.key.password"):
                found["ssl.key.password"] = properties["ssl.key.password"]
        return found

    @property
    def _sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    def client_config(self) -> dict[str, str]:
        """librdkafka's properties (``confluent_kafka``'s clients)."""
        config = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
        }
        if self._sasl:
            config.update(
                {
                    "sasl.mechanism": self.sasl_mechanism,
                    "sasl.username": self.username,
                    "sasl.password": self.password,
                }
            )
        properties = self.properties
        config.update({key: value for key, value in properties.items() if key in TLS_KEYS})
        config.update(self._passed(properties, "librdkafka"))
        return config

    def spark_options(self) -> dict[str, str]:
        """The Java client's properties as options of Spark's Kafka source (``kafka.`` prefixed)."""
        options = {
            "kafka.bootstrap.servers": self.bootstrap_servers,
            "kafka.security.protocol": self.security_protocol,
        }
        if self._sasl:
            quoted = [
                value.replace("\\", "\\\\").replace('"', '\\"')
                for value in (self.username, self.password)
            ]
            options.update(
                {
                    "kafka.sasl.mechanism": self.sasl_mechanism,
                    "kafka.sasl.jaas.config": (
                        f"{_LOGIN_MODULES[self.sasl_mechanism]} required "
                        f'username="{quoted[0]}" password="{quoted[1]}";'
                    ),
                }
            )
        properties = self.properties
        options.update(
            {
                f"kafka.{key}": value
                for key, value in {
                    **self._java_tls(properties),
                    **self._passed(properties, "java"),
                }.items()
            }
        )
        return options

    def env(self) -> dict[str, str]:
        """The settings that describe this connection (for a process to start with)."""
        values = {
            settings.KAFKA_BOOTSTRAP_SERVERS: self.bootstrap_servers,
            settings.KAFKA_SECURITY_PROTOCOL: self.security_protocol,
        }
        if self._sasl:
            values.update(
                {
                    settings.KAFKA_SASL_MECHANISM: self.sasl_mechanism,
                    settings.KAFKA_USERNAME: self.username,
                    settings.KAFKA_PASSWORD: self.password,
                }
            )
        if self.properties_file:
            values[settings.KAFKA_PROPERTIES] = self.properties_file
        return {setting.name: value for setting, value in values.items()}


# The header Confluent's serializers put before each Avro value: a magic byte 0, then the schema's
# id in the registry (4 bytes, big-endian).
CONFLUENT_HEADER_BYTES = 5
_AVRO_KEYS = ("schema", "header")
_HEADERS = ("none", "confluent")


@dataclass(frozen=True)
class AvroValues:
    """A topic-fed hop's record values as Avro binary (``avro:`` in the spec): ``schema`` the
    writer's schema as JSON text (read from the ``.avsc`` file the spec names, beside it), and
    whether each value starts with Confluent's header (``header: confluent``; the schema still
    comes from the file: no registry is asked)."""

    schema: str
    confluent: bool = False

    @classmethod
    def from_raw(cls, raw: dict, source, subject: str) -> AvroValues | None:
        """The hop's ``avro`` key, or None; refused with the fix: on a hop that reads no topic, an
        unknown key, no schema file, or one that is not an Avro record schema."""
        import json
        from pathlib import Path

        given = raw.get("avro")
        if given is None:
            return None
        if raw.get("topic") is None and raw.get("topic_pattern") is None:
            raise UsageError(
                f"{subject} has avro but reads no topic: remove it (landing files are read as text)"
            )
        unknown = sorted(set(given) - set(_AVRO_KEYS))
        if unknown or "schema" not in given:
            raise UsageError(
                f"{subject} has avro {given!r}: give `{{schema: <file>.avsc}}` (and `header: "
                "confluent` for values with Confluent's header)"
            )
        header = given.get("header", "none")
        if header not in _HEADERS:
            raise UsageError(f"{subject} has avro header {header!r}: use {' or '.join(_HEADERS)}")
        path = Path(source).parent / str(given["schema"])
        try:
            text = path.read_text(encoding="utf-8")
            schema = json.loads(text)
        except (OSError, ValueError) as error:
            raise UsageError(
                f"{subject}: avro schema {path} is not readable JSON ({error}): fix the path "
                "(relative to the spec's folder) or the file"
            ) from None
        if (
            not isinstance(schema, dict)
            or schema.get("type") != "record"
            or not isinstance(schema.get("fields"), list)
        ):
            raise UsageError(
                f"{subject}: avro schema {path} is not a record schema: its values must be records "
                '(`{"type": "record", "name": ..., "fields": [...]}`)'
            )
        return cls(text, header == "confluent")


@dataclass(frozen=True)
class TopicSpec:
    """What a topic-fed ingest hop reads (its spec's ``topic`` or ``topic_pattern`` and the keys
    that go with them): one topic, or every topic a regular expression finds in the name of
    (Spark's ``subscribePattern``), from where on its first run (``starting_offsets``), how many
    records a batch takes at most (None: all there are), and its values as Avro binary."""

    topic: str | None = None
    topic_pattern: str | None = None
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    avro: AvroValues | None = None

    @classmethod
    def from_raw(cls, raw: dict, source, subject: str) -> TopicSpec | None:
        """The hop's topic keys, or None for a hop that names no topic; refused with the fix: a
        key of a topic (``starting_offsets``, ``max_offsets_per_trigger``, ``avro``) on a hop
        that reads none."""
        avro = AvroValues.from_raw(raw, source, subject)
        if raw.get("topic") is None and raw.get("topic_pattern") is None:
            given = [key for key in ("starting_offsets", "max_offsets_per_trigger") if key in raw]
            if given:
                raise UsageError(
                    f"{subject} has {given[0]} but reads no topic: remove it (or add `topic`)"
                )
            return None
        return cls(
            topic=raw.get("topic"),
            topic_pattern=raw.get("topic_pattern"),
            starting_offsets=raw.get("starting_offsets", "earliest"),
            max_offsets_per_trigger=raw.get("max_offsets_per_trigger"),
            avro=avro,
        )

    @property
    def subscription(self) -> tuple[str, str]:
        """How Spark's Kafka source subscribes: ``("subscribe", topic)`` or
        ``("subscribePattern", pattern)``."""
        return (
            ("subscribe", self.topic)
            if self.topic is not None
            else ("subscribePattern", self.topic_pattern)
        )

    @property
    def topics_read(self) -> str:
        """The topic, or ``topics matching <pattern>`` (status, the Lakehouse page)."""
        return self.topic if self.topic is not None else f"topics matching {self.topic_pattern}"

    @property
    def label(self) -> str:
        """The topics in a sentence: ``topic t`` or ``the topics matching 'p'``."""
        return (
            f"topic {self.topic}"
            if self.topic is not None
            else f"the topics matching '{self.topic_pattern}'"
        )
