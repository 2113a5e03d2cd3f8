"""Every environment variable the platform reads, declared once: its name, its default and what it
means. The package reads them through these declarations (``SPARK_MASTER.value()``, or the
functions below); the manual's settings reference is generated from :data:`SETTINGS`. The
launcher of ``make run`` (``include/scripts``) reads the ones marked as its own from the
environment it is given.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from spark_jobs.model.errors import UsageError


@dataclass(frozen=True)
class Setting:
    """One environment variable: its name, its default (empty: none) and one line of meaning."""

    name: str
    default: str
    meaning: str

    def value(self) -> str:
        return os.environ.get(self.name) or self.default


PIPELINES = Setting(
    "LAKEHOUSE_PIPELINES",
    "",
    "The folders of your pipelines, separated by `:`. Each holds pipeline folders "
    "(`orders/orders.yaml` beside its code, suites and tests, as `lakehouse new` writes them) or "
    "spec files side by side.",
)
QUALITY = Setting(
    "LAKEHOUSE_QUALITY",
    "",
    "A folder of quality suites, `<pipeline>/<hop>.json`, used instead of each "
    "pipeline folder's `quality/`.",
)
CACHE = Setting(
    "LAKEHOUSE_CACHE",
    "",
    "Where the platform keeps what it builds once: the JVM jars, the Spark drivers' class-data "
    "archive, the package zip shipped to Spark executors (default `$XDG_CACHE_HOME/lakehouse`, "
    "else `~/.cache/lakehouse`).",
)
JARS_DIR = Setting("LAKEHOUSE_JARS_DIR", "", "The folder of the JVM jars (default `<cache>/jars`).")
JVM_DIR = Setting(
    "LAKEHOUSE_JVM_DIR", "", "The folder of the class-data sharing archive (default `<cache>/jvm`)."
)
HOME = Setting(
    "LAKEHOUSE_HOME",
    "./.lakehouse",
    "The lake: a local folder or an `s3a://bucket/prefix` URI (credentials from the standard "
    "`AWS_*` variables). Landing files, tables, checkpoints and `_ops` records all live under it.",
)
SPARK_MASTER = Setting(
    "LAKEHOUSE_SPARK_MASTER",
    "local[2]",
    "The Spark master of a `lakehouse` command's session (`spark://host:7077` for a cluster).",
)
SPARK_PROPERTIES = Setting(
    "LAKEHOUSE_SPARK_PROPERTIES",
    "",
    "A Spark properties file applied to every session and spark-submit (a "
    "cluster's shared secret).",
)
SPARK_DRIVER_HOST = Setting(
    "LAKEHOUSE_SPARK_DRIVER_HOST",
    "",
    "The address executors on other machines reach the Spark driver at (every `lakehouse` "
    "command's session, the shared driver and every spark-submit of the DAGs). Needed with a "
    "cluster master that is not on loopback; `127.0.0.1` otherwise.",
)
SPARK_DRIVER_BIND = Setting(
    "LAKEHOUSE_SPARK_DRIVER_BIND",
    "",
    "The address the Spark driver listens on (default: `LAKEHOUSE_SPARK_DRIVER_HOST`; `0.0.0.0` "
    "for every interface, behind a NAT or in a container).",
)
NOTIFIERS = Setting(
    "LAKEHOUSE_NOTIFIERS",
    "",
    'The Airflow notifiers every pipeline\'s alerts go to, as JSON: a list of `{"class": "<import '
    "path of a "
    "BaseNotifier>\", ...its arguments}` (a spec's `notify` replaces it; "
    "docs/guides/airflow.md, Alerts).",
)
DRIVER_MEMORY = Setting(
    "LAKEHOUSE_DRIVER_MEMORY", "2g", "The Spark driver's memory of a `lakehouse` command."
)
SPARK_UI = Setting(
    "LAKEHOUSE_SPARK_UI", "false", "`true` turns on Spark's web UI of each job (on 127.0.0.1)."
)
SPARK_LOG_LEVEL = Setting(
    "LAKEHOUSE_SPARK_LOG_LEVEL", "ERROR", "Spark's log level in a `lakehouse` command."
)
SNAPSHOT_PARTITIONS = Setting(
    "LAKEHOUSE_SNAPSHOT_PARTITIONS",
    "2",
    "Delta's `snapshotPartitions`: the partitions of a table's state when a query reads it.",
)
JVM_SHARING = Setting(
    "LAKEHOUSE_JVM_SHARING",
    "on",
    "`off`: drivers map no class-data sharing archive (and `lakehouse setup` builds none).",
)
JVM_LEAN = Setting(
    "LAKEHOUSE_JVM_LEAN",
    "on",
    "`off`: drivers start with the JVM's default JIT and collector, not the lean options.",
)
LEASE_SECONDS = Setting(
    "LAKEHOUSE_LEASE_SECONDS",
    "60",
    "On an S3 lake, how long the pipeline's lock lease lasts when its holder stops renewing it.",
)
DRIVER = Setting(
    "LAKEHOUSE_DRIVER",
    "auto",
    "`shared`: the Spark tasks of a DAG run send their commands to one driver the first of them "
    "starts (one per machine); `task`: each is a spark-submit of its own; `auto`: `shared` under a "
    "local executor (every task of the run on the scheduler's machine), `task` under any other "
    "(Celery, Kubernetes, Edge).",
)
CHANGES_FROM_TABLE_ROWS = Setting(
    "LAKEHOUSE_CHANGES_FROM_TABLE_ROWS",
    "1_000_000",
    "A changes hop applies a batch of newer changes from its tables, not its feed, once the feed "
    "holds this many rows (below it, reading the feed costs less than the extra steps).",
)
DRIVER_IDLE = Setting(
    "LAKEHOUSE_DRIVER_IDLE", "60", "Seconds a DAG run's shared driver waits for its next command."
)
DRIVER_KEEP_WARM = Setting(
    "LAKEHOUSE_DRIVER_KEEP_WARM",
    "0",
    "Seconds a shared driver stays up after its DAG run, for the next run of the same DAG.",
)
DRIVER_DIR = Setting(
    "LAKEHOUSE_DRIVER_DIR",
    "",
    "Where shared drivers' address files live (default `$AIRFLOW_HOME/drivers`).",
)
ROLLBACK_CRASH_AFTER = Setting(
    "LAKEHOUSE_ROLLBACK_CRASH_AFTER",
    "",
    "For tests: a rollback stops after this many steps, as if it crashed.",
)
KAFKA_BOOTSTRAP_SERVERS = Setting(
    "LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS",
    "",
    "The Kafka brokers (`host:port,...`) of hops that read a topic.",
)
KAFKA_SECURITY_PROTOCOL = Setting(
    "LAKEHOUSE_KAFKA_SECURITY_PROTOCOL",
    "",
    "How clients talk to Kafka: `PLAINTEXT`, `SASL_PLAINTEXT`, `SSL` or `SASL_SSL` (default: "
    "`SASL_PLAINTEXT` when a user name is set, else `PLAINTEXT`).",
)
KAFKA_SASL_MECHANISM = Setting(
    "LAKEHOUSE_KAFKA_SASL_MECHANISM",
    "PLAIN",
    "The SASL mechanism of the Kafka login: `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.",
)
KAFKA_USERNAME = Setting(
    "LAKEHOUSE_KAFKA_USERNAME", "", "The Kafka login's user name (none: no login)."
)
KAFKA_PASSWORD = Setting("LAKEHOUSE_KAFKA_PASSWORD", "", "The Kafka login's password.")
KAFKA_PROPERTIES = Setting(
    "LAKEHOUSE_KAFKA_PROPERTIES",
    "",
    "A properties file of further Kafka client settings, read by Spark's Kafka source and the "
    "checks that start no JVM alike: TLS as PEM files (`ssl.ca.location`, "
    "`ssl.certificate.location`, `ssl.key.location`, `ssl.key.password`), and any client property: "
    "a plain key goes to both clients, a `java.` one to Spark's only, a `librdkafka.` one to the "
    "JVM-free client only (docs/guides/kafka.md).",
)
# The launcher's own (`make run`, include/scripts/lakehouse_platform.py).
METADATA_DB = Setting(
    "LAKEHOUSE_METADATA_DB",
    "postgres",
    "`make run`'s Airflow metadata DB: the embedded `postgres`, or `sqlite` (no server).",
)
TRIGGERER = Setting(
    "LAKEHOUSE_TRIGGERER",
    "",
    "`1`: `make run` also starts Airflow's triggerer (it does anyway when a pipeline runs on "
    "arrival).",
)
ARRIVAL_POLL = Setting(
    "LAKEHOUSE_ARRIVAL_POLL_S",
    "10",
    "How often, in seconds, the triggerer looks for what arrived for a pipeline with "
    "`trigger: arrival` (a listing of its landing folder, or its topics' end offsets).",
)
USER_DAGS = Setting(
    "LAKEHOUSE_USER_DAGS",
    "",
    "A folder of your own DAGs that `make run` adds as a second DAG bundle.",
)
AIRFLOW_PORT = Setting(
    "LAKEHOUSE_AIRFLOW_PORT", "8080", "The port of `make run`'s Airflow API server (on 127.0.0.1)."
)
LAKE = Setting(
    "LAKEHOUSE_LAKE", "local", "`s3`: `make run` puts the lake on its embedded S3 server."
)
SPARK = Setting(
    "LAKEHOUSE_SPARK",
    "local",
    "`cluster`: `make run` runs every Spark task on a standalone cluster.",
)
SOURCE = Setting(
    "LAKEHOUSE_SOURCE",
    "landing",
    "`kafka`: `make run` starts a Kafka broker and every ingest hop reads a topic of its own "
    "(`<pipeline>.<hop>`), which the sample trickle produces to.",
)
TRIGGER = Setting(
    "LAKEHOUSE_TRIGGER",
    "schedule",
    "`arrival`: `make run` runs the sample pipelines' stream DAGs on arrival (`trigger: "
    "arrival`, `min_interval: 1 minute`) instead of on their schedules.",
)

CLOCK_SHIFT = Setting(
    "LAKEHOUSE_CLOCK_SHIFT",
    "",
    "Moves the platform's clock forward by this long (`8 days`) where retention decides what is "
    "old (`lakehouse maintain`, the rollback window in `status`) and in the times records carry: "
    "for tests and benchmarks that age a lake without waiting. Commit times in the logs stay the "
    "real ones.",
)

SETTINGS = (
    PIPELINES,
    QUALITY,
    HOME,
    CACHE,
    JARS_DIR,
    JVM_DIR,
    SPARK_MASTER,
    SPARK_PROPERTIES,
    SPARK_DRIVER_HOST,
    SPARK_DRIVER_BIND,
    NOTIFIERS,
    DRIVER_MEMORY,
    SPARK_UI,
    SPARK_LOG_LEVEL,
    SNAPSHOT_PARTITIONS,
    JVM_SHARING,
    JVM_LEAN,
    LEASE_SECONDS,
    DRIVER,
    CHANGES_FROM_TABLE_ROWS,
    DRIVER_IDLE,
    DRIVER_KEEP_WARM,
    DRIVER_DIR,
    ROLLBACK_CRASH_AFTER,
    KAFKA_BOOTSTRAP_SERVERS,
    KAFKA_SECURITY_PROTOCOL,
    KAFKA_SASL_MECHANISM,
    KAFKA_USERNAME,
    KAFKA_PASSWORD,
    KAFKA_PROPERTIES,
    METADATA_DB,
    TRIGGERER,
    ARRIVAL_POLL,
    USER_DAGS,
    AIRFLOW_PORT,
    LAKE,
    SPARK,
    SOURCE,
    TRIGGER,
    CLOCK_SHIFT,
)


def pipelines_dirs() -> tuple[Path, ...]:
    """The folders of ``$LAKEHOUSE_PIPELINES``, absolute; a :class:`UsageError` naming the
    setting when it is not set (the platform has no pipelines of its own)."""
    folders = tuple(
        Path(part).expanduser().resolve() for part in PIPELINES.value().split(os.pathsep) if part
    )
    if not folders:
        raise UsageError(
            f"no pipelines folder: set {PIPELINES.name} to the folder of your pipelines "
            "(`lakehouse new NAME` writes one there)"
        )
    return folders


def quality_dir() -> Path | None:
    """``$LAKEHOUSE_QUALITY``, or None: each pipeline's suites are in its own folder."""
    value = QUALITY.value()
    return Path(value).expanduser().resolve() if value else None


def cache_dir() -> Path:
    """``$LAKEHOUSE_CACHE``, else ``$XDG_CACHE_HOME/lakehouse``, else ``~/.cache/lakehouse``."""
    value = CACHE.value()
    if value:
        return Path(value).expanduser().resolve()
    return (
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "lakehouse"
    )


def jars_dir() -> Path:
    return Path(JARS_DIR.value()) if JARS_DIR.value() else cache_dir() / "jars"


def jvm_dir() -> Path:
    return Path(JVM_DIR.value()) if JVM_DIR.value() else cache_dir() / "jvm"


LOOPBACK = "127.0.0.1"


def _on_loopback(master: str) -> bool:
    """Whether every executor of ``master`` runs on this machine: a local master, or a cluster
    master listening on loopback (no other machine can join it)."""
    if master.startswith("local"):
        return True
    host = master.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


def driver_addresses(master: str) -> dict[str, str]:
    """Spark's ``spark.driver.host`` and ``spark.driver.bindAddress`` (and the ``SPARK_LOCAL_IP`` of
    the driver's process) for a driver whose executors come from ``master``: the settings'
    addresses, loopback by default for executors on this machine. A :class:`UsageError` naming the
    setting for a cluster master elsewhere without one: executors could never connect back."""
    host = SPARK_DRIVER_HOST.value()
    if not host:
        if not _on_loopback(master):
            raise UsageError(
                f"the Spark master {master} has executors on other machines, which cannot reach a "
                f"driver on {LOOPBACK}: set {SPARK_DRIVER_HOST.name} to this machine's address "
                "they can reach"
            )
        host = LOOPBACK
    bind = SPARK_DRIVER_BIND.value() or host
    return {"spark.driver.host": host, "spark.driver.bindAddress": bind, "SPARK_LOCAL_IP": bind}
