"""The platform's Kafka broker: Apache Kafka in KRaft mode (broker and controller in one process, no
ZooKeeper), from the pinned Maven artifacts of ``include/kafka/pom.xml``, on 127.0.0.1 behind a
generated password.

Its runtime jars are resolved once with Maven into ``<cache>/kafka-broker`` (the cache of
``lakehouse setup``). The data folder holds the log (``data/``), ``kafka.json`` (mode 0600: the
user name, the password and the ports, kept across restarts so clients keep their settings),
the generated ``server.properties`` and ``kafka.log``. Clients log in with SASL/PLAIN on the
client port; a connection without the password is refused. What is left open on loopback: the
controller's port (KRaft's quorum; the broker is its only member).

Clients need nothing but the settings :meth:`KafkaServer.env` gives (``LAKEHOUSE_KAFKA_*``).

    python include/scripts/kafka_server.py run --dir DIR [--duration SECONDS] [--topic NAME:PARTITIONS]
    python include/scripts/kafka_server.py jars     # resolve the jars only (an image's build step)

runs one in the foreground (Ctrl-C stops it) and prints those variables. In a container
(``docker-compose.yaml``'s ``kafka`` service) it listens on the container's network instead
(``--bind 0.0.0.0``, ``--advertise`` the name other services reach it by), on a fixed port
(``--port``), with the password every service is given (``--credentials-from-env``:
``LAKEHOUSE_KAFKA_USERNAME`` and ``LAKEHOUSE_KAFKA_PASSWORD``), until stopped (``--duration 0``).
"""  # noqa: E501

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from metadata_db import free_port, serve, start_server, stop_process_groups, write_private

POM = Path(__file__).resolve().parents[1] / "kafka" / "pom.xml"
HEAP = "-Xmx384m"


def cluster_id() -> str:
    """A new KRaft cluster id in Kafka's form (a UUID as 22 URL-safe base64 characters), never
    starting with ``-``: the format tool would read such an id as an option and fail (about one
    id in 64; Kafka's own random ids avoid it the same way)."""
    while True:
        found = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not found.startswith("-"):
            return found


class KafkaServerError(RuntimeError):
    """The broker cannot be started; the message names the fix."""


def broker_jars() -> list[Path]:
    """The broker's jars, resolved once with Maven into the platform's cache."""
    from spark_jobs.engine.jars import resolve
    from spark_jobs.model.errors import SetupError
    from spark_jobs.model.settings import cache_dir

    try:
        return resolve(
            POM, cache_dir() / "kafka-broker", what="the Kafka broker's jars", drop_shipped=False
        )
    except SetupError as error:
        raise KafkaServerError(str(error)) from None


class KafkaServer:
    """A one-node Kafka whose data, login and log live in ``folder``."""

    def __init__(
        self,
        folder: Path,
        bind: str = "127.0.0.1",
        port: int | None = None,
        given: tuple[str, str] | None = None,
        advertise: str = "127.0.0.1",
        tls: dict[str, Path] | None = None,
    ):
        """:param tls: PEM files for TLS on the client port (SASL_SSL): ``ca``, the broker's
        ``cert`` and ``key``, and with ``client_cert`` and ``client_key`` mutual TLS (a client
        without a certificate the CA signed is refused); the clients' properties file names them."""
        self.folder = Path(folder)
        self.bind, self.given, self.advertise, self.tls = bind, given, advertise, tls
        self.process: subprocess.Popen | None = None
        self.config = self._config(port)

    def _config(self, port: int | None) -> dict:
        """``kafka.json``: made the first time (a generated password, free ports), then kept."""
        path = self.folder / "kafka.json"
        config = json.loads(path.read_text()) if path.exists() else {}
        if not config or self.given or port:
            user, password = self.given or (
                config.get("username") or "lakehouse",
                secrets.token_urlsafe(24),
            )
            port = port or config.get("port") or free_port()
            controller = config.get("controller_port")
            while controller in (None, port):  # the two listeners never on one port
                controller = free_port()
            config = {
                "username": user,
                "password": password,
                "port": port,
                "controller_port": controller,
                "cluster_id": config.get("cluster_id") or cluster_id(),
            }
            write_private(path, json.dumps(config, indent=2))
        return config

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.advertise}:{self.config['port']}"

    @property
    def _protocol(self) -> str:
        return "SASL_SSL" if self.tls else "SASL_PLAINTEXT"

    def connection(self):
        from spark_jobs.model.kafka import KafkaConnection

        return KafkaConnection(
            self.bootstrap_servers,
            self._protocol,
            "PLAIN",
            self.config["username"],
            self.config["password"],
            str(self._client_properties()) if self.tls else "",
        )

    def _client_properties(self) -> Path:
        """The clients' ``LAKEHOUSE_KAFKA_PROPERTIES`` file of a TLS broker: the CA, and the
        client's certificate and key under mutual TLS."""
        path = self.folder / "client.properties"
        if not path.exists():
            lines = {"ssl.ca.location": self.tls["ca"]}
            if self.tls.get("client_cert"):
                lines.update(
                    {
                        "ssl.certificate.location": self.tls["client_cert"],
                        "ssl.key.location": self.tls["client_key"],
                    }
                )
            write_private(path, "".join(f"{key}={value}\n" for key, value in lines.items()))
        return path

    def _tls_properties(self) -> dict[str, str]:
        """The broker's side of TLS: its key and certificate as one PEM key store, the CA as
        its trust store.
        """
        if not self.tls:
            return {}
        store = self.folder / "broker-keystore.pem"
        write_private(
            store, Path(self.tls["key"]).read_text() + "\n" + Path(self.tls["cert"]).read_text()
        )
        found = {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(store),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.tls["ca"]),
        }
        # a SASL_SSL listener asks for a client certificate only when told so itself
        if self.tls.get("client_cert"):
            found["listener.name.sasl_ssl.ssl.client.auth"] = "required"
        return found

    def env(self) -> dict[str, str]:
        """The ``LAKEHOUSE_KAFKA_*`` settings that point the platform at this broker."""
        return self.connection().env()

    def _properties(self) -> Path:
        user, password = self.config["username"], self.config["password"]
        port, controller = self.config["port"], self.config["controller_port"]
        lines = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{controller}",
            "listeners": (
                f"{self._protocol}://{self.bind}:{port},CONTROLLER://127.0.0.1:{controller}"
            ),
            "advertised.listeners": f"{self._protocol}://{self.bootstrap_servers}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": self._protocol,
            "listener.security.protocol.map": (
                f"CONTROLLER:PLAINTEXT,{self._protocol}:{self._protocol}"
            ),
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            **self._tls_properties(),
            f"listener.name.{self._protocol.lower()}.plain.sasl.jaas.config": (
                "org.apache.kafka.common.security.plain.PlainLoginModule "
                f'required username="{user}" '
                f'password="{password}" user_{user}="{password}";'
            ),
            "log.dirs": str(self.folder / "data"),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # Retention is checked every 5 s (default 5 min): a topic's short retention takes effect
            # in seconds, as the rollback tests need.
            "log.retention.check.interval.ms": "5000",
        }
        path = self.folder / "server.properties"
        write_private(path, "".join(f"{key}={value}\n" for key, value in lines.items()))
        return path

    def _java(self, main: str, *args: str) -> list[str]:
        classpath = ":".join(str(jar) for jar in broker_jars())
        # IPv4 only: the JVM would otherwise listen on ::ffff:127.0.0.1, the same loopback
        # in another dress.
        return ["java", HEAP, "-Djava.net.preferIPv4Stack=true", "-cp", classpath, main, *args]

    def _format(self, properties: Path) -> None:
        """Format the log folder once (KRaft needs its metadata written before the first start)."""
        if (self.folder / "data" / "meta.properties").exists():
            return
        done = subprocess.run(
            self._java(
                "kafka.tools.StorageTool",
                "format",
                "-t",
                self.config["cluster_id"],
                "-c",
                str(properties),
            ),
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise KafkaServerError(
                "formatting the broker's folder failed: "
                f"{(done.stdout + done.stderr).strip()[-300:]}"
            )

    def start(self, timeout_s: float = 90.0, stop_with_parent: bool = True) -> subprocess.Popen:
        """Start on 127.0.0.1 in its own process group; wait until it answers a logged-in client."""
        properties = self._properties()
        self._format(properties)
        self.process = start_server(
            self._java("kafka.Kafka", str(properties)),
            self.folder / "kafka.log",
            self.answers,
            stop_with_parent=stop_with_parent,
            timeout_s=timeout_s,
            failed=KafkaServerError(f"Kafka did not start: see {self.folder / 'kafka.log'}"),
        )
        return self.process

    def answers(self) -> bool:
        """True once the broker lists its topics to a client that logs in, each partition with its
        leader (after a restart the broker answers before it leads its partitions again)."""
        from confluent_kafka.admin import AdminClient

        try:
            topics = (
                AdminClient({**self.connection().client_config(), "log_level": 0})
                .list_topics(timeout=2)
                .topics
            )
        except Exception:  # noqa: BLE001 - not up yet, whatever the client says
            return False
        return all(
            topic.error is None
            and all(
                partition.leader >= 0 and partition.error is None
                for partition in topic.partitions.values()
            )
            for topic in topics.values()
        )
        return True

    def create_topic(self, name: str, partitions: int = 1, **config: str) -> None:
        """Create topic ``name`` (``config``: topic settings such as ``retention.ms``);
        nothing if it exists.
        """
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({**self.connection().client_config(), "log_level": 0})
        future = admin.create_topics([NewTopic(name, partitions, 1, config=config)])[name]
        try:
            future.result(timeout=30)
        except KafkaException as error:
            if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM to its process group, SIGKILL after ``grace_s``."""
        if self.process is not None:
            stop_process_groups([self.process], grace_s)


def _topic(text: str) -> tuple[str, int]:
    name, _, partitions = text.partition(":")
    return name, int(partitions or 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Kafka (KRaft) on 127.0.0.1 behind a generated password"
    )
    parser.add_argument(
        "command", choices=["run", "jars"], help="run: the broker; jars: resolve its jars only"
    )
    parser.add_argument("--dir", type=Path, help="data, login and log (run)")
    parser.add_argument(
        "--duration",
        type=float,
        default=3600,
        help="stop after this many seconds (0: until stopped)",
    )
    parser.add_argument(
        "--bind", default="127.0.0.1", help="address to listen on (a container's: 0.0.0.0)"
    )
    parser.add_argument(
        "--advertise", default="127.0.0.1", help="the host name clients reach it by"
    )
    parser.add_argument(
        "--port", type=int, help="the client port (default: a free one, kept across restarts)"
    )
    parser.add_argument(
        "--topic",
        action="append",
        type=_topic,
        default=[],
        metavar="NAME[:PARTITIONS]",
        help="create this topic if it is missing (repeatable)",
    )
    parser.add_argument(
        "--credentials-from-env",
        action="store_true",
        help=(
            "use $LAKEHOUSE_KAFKA_USERNAME and $LAKEHOUSE_KAFKA_PASSWORD instead of generated ones"
        ),
    )
    args = parser.parse_args(argv)
    try:
        jars = broker_jars()
    except KafkaServerError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.command == "jars":
        print(f"{len(jars)} jars of the Kafka broker")
        return 0
    if args.dir is None:
        parser.error("run needs --dir")
    given = None
    if args.credentials_from_env:
        given = (
            os.environ.get("LAKEHOUSE_KAFKA_USERNAME", ""),
            os.environ.get("LAKEHOUSE_KAFKA_PASSWORD", ""),
        )
        if not all(given):
            print(
                "error: --credentials-from-env needs LAKEHOUSE_KAFKA_USERNAME and "
                "LAKEHOUSE_KAFKA_PASSWORD set",
                file=sys.stderr,
            )
            return 2
    server = KafkaServer(args.dir, args.bind, args.port, given, args.advertise)
    # `docker stop`, a supervisor: stop the broker too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.start(stop_with_parent=False)
        for name, partitions in args.topic:
            server.create_topic(name, partitions)
    except KafkaServerError as error:
        print(f"error: {error}", file=sys.stderr)
        server.stop()
        return 2
    return serve(server, args.duration)


if __name__ == "__main__":
    sys.exit(main())
