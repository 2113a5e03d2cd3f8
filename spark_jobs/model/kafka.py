"""How the platform reaches Kafka: one connection, from the ``LAKEHOUSE_KAFKA_*`` settings, in the
two dialects that speak to brokers: Spark's Kafka source (``kafka.``-prefixed Java client
properties) and the plain client of the checks that start no JVM (librdkafka's properties)."""

from __future__ import annotations

from dataclasses import dataclass

from spark_jobs.model import settings
from spark_jobs.model.errors import UsageError

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")


@dataclass(frozen=True)
class KafkaConnection:
    """The brokers and the login (none when ``username`` is empty)."""

    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    username: str = ""
    password: str = ""

    @classmethod
    def from_env(cls) -> KafkaConnection:
        """The connection the settings describe; a :class:`UsageError` naming the one missing."""
        servers = settings.KAFKA_BOOTSTRAP_SERVERS.value()
        if not servers:
            raise UsageError(f"no Kafka brokers are set: set {settings.KAFKA_BOOTSTRAP_SERVERS.name} (host:port,...)")
        username = settings.KAFKA_USERNAME.value()
        protocol = settings.KAFKA_SECURITY_PROTOCOL.value() or ("SASL_PLAINTEXT" if username else "PLAINTEXT")
        mechanism = settings.KAFKA_SASL_MECHANISM.value()
        if protocol not in _PROTOCOLS:
            raise UsageError(f"{settings.KAFKA_SECURITY_PROTOCOL.name}={protocol!r}: use one of {', '.join(_PROTOCOLS)}")
        if mechanism not in _LOGIN_MODULES:
            raise UsageError(f"{settings.KAFKA_SASL_MECHANISM.name}={mechanism!r}: use one of {', '.join(_LOGIN_MODULES)}")
        return cls(servers, protocol, mechanism, username, settings.KAFKA_PASSWORD.value())

    @property
    def _sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    def client_config(self) -> dict[str, str]:
        """librdkafka's properties (``confluent_kafka``'s clients)."""
        config = {"bootstrap.servers": self.bootstrap_servers, "security.protocol": self.security_protocol}
        if self._sasl:
            config.update({"sasl.mechanism": self.sasl_mechanism, "sasl.username": self.username,
                           "sasl.password": self.password})
        return config

    def spark_options(self) -> dict[str, str]:
        """The Java client's properties as options of Spark's Kafka source (``kafka.`` prefixed)."""
        options = {"kafka.bootstrap.servers": self.bootstrap_servers, "kafka.security.protocol": self.security_protocol}
        if self._sasl:
            quoted = [value.replace("\\", "\\\\").replace('"', '\\"') for value in (self.username, self.password)]
            options.update({
                "kafka.sasl.mechanism": self.sasl_mechanism,
                "kafka.sasl.jaas.config": (f'{_LOGIN_MODULES[self.sasl_mechanism]} required '
                                           f'username="{quoted[0]}" password="{quoted[1]}";'),
            })
        return options

    def env(self) -> dict[str, str]:
        """The settings that describe this connection (for a process to start with)."""
        values = {settings.KAFKA_BOOTSTRAP_SERVERS: self.bootstrap_servers,
                  settings.KAFKA_SECURITY_PROTOCOL: self.security_protocol}
        if self._sasl:
            values.update({settings.KAFKA_SASL_MECHANISM: self.sasl_mechanism, settings.KAFKA_USERNAME: self.username,
                           settings.KAFKA_PASSWORD: self.password})
        return {setting.name: value for setting, value in values.items()}
