"""The platform's Spark standalone cluster: a master and two workers on 127.0.0.1, from the
installed pyspark (``spark-class``), behind Spark's shared-secret authentication.

Every port (RPC, web UIs, block managers) is a free port of 127.0.0.1 (``SPARK_LOCAL_IP``). The
master, the workers and every application must know one secret (``spark.authenticate``): it is
generated once into ``<folder>/spark.conf`` (mode 0600), which the master and workers read with
``--properties-file`` and every ``spark-submit`` of the platform too (the Airflow tasks find it
in ``$LAKEHOUSE_SPARK_PROPERTIES``), so it is on no command line. An application without it is
refused. The master's REST submission server (which would take applications without the secret)
is off, and the web UIs are read-only status pages (killing from them is off).

    python include/scripts/spark_cluster.py run --dir DIR [--workers 2] [--duration SECONDS]

runs one in the foreground (Ctrl-C stops it) and prints the master's URL;

    python include/scripts/spark_cluster.py properties --out FILE

writes the properties file of the secret in ``$SPARK_AUTH_SECRET`` (``docker-compose.yaml``'s
``spark-init`` service does, into a volume every Spark and Airflow service reads).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from metadata_db import die_with_parent, free_port, stop_process_groups


class SparkClusterError(RuntimeError):
    """The cluster cannot be started; the message names the fix."""


def write_properties(path: Path, secret: str) -> None:
    """The properties file of a cluster behind ``secret`` (mode 0600, never readable by others)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(
            f"spark.authenticate true\nspark.authenticate.secret {secret}\n"
            "spark.master.rest.enabled false\nspark.ui.killEnabled false\n"
        )


def spark_home() -> str:
    """The installed pyspark's folder (found, not imported: this script stays without Spark)."""
    found = importlib.util.find_spec("pyspark")
    if found is None:
        raise SparkClusterError("pyspark is not installed: run make setup")
    return found.submodule_search_locations[0]


class SparkCluster:
    """A standalone master and ``workers`` workers whose logs, work folders and secret
    live in ``folder``.

    :param host: the address they listen on (default loopback: this machine only).
    :param prefix: a command each of their processes runs under (``ip netns exec NAME``: another
        host's network, as the cross-host tests place them).
    """

    def __init__(
        self,
        folder: Path,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        host: str = "127.0.0.1",
        prefix: tuple[str, ...] = (),
    ):
        self.folder = Path(folder)
        self.workers, self.cores, self.memory = workers, cores, memory
        self.host, self.prefix = host, tuple(prefix)
        self.processes: list[subprocess.Popen] = []
        self.port: int | None = None

    def properties(self) -> Path:
        """``spark.conf``: the shared secret and the settings every process of the cluster
        reads, made once.
        """
        path = self.folder / "spark.conf"
        if not path.exists():
            write_properties(path, secrets.token_urlsafe(32))
        return path

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.port}"

    def env(self) -> dict[str, str]:
        """What the platform's processes and a user's shell need: the properties file (the hook
        gives it to every spark-submit, ``build_session`` to a ``lakehouse`` command's driver),
        the master for ``lakehouse`` commands and the connection ``spark_default`` for
        Airflow's tasks."""
        return {
            "LAKEHOUSE_SPARK_PROPERTIES": str(self.properties()),
            "LAKEHOUSE_SPARK_MASTER": self.master_url,
            "AIRFLOW_CONN_SPARK_DEFAULT": (
                f'{{"conn_type": "spark", "host": "spark://{self.host}", "port": {self.port}}}'
            ),
        }

    def _spawn(self, args: list[str], log: Path, stop_with_parent: bool) -> subprocess.Popen:
        env = {
            **os.environ,
            "SPARK_HOME": spark_home(),
            "SPARK_LOCAL_IP": self.host,
            "SPARK_MASTER_HOST": self.host,
            "SPARK_LOG_DIR": str(self.folder),
        }
        args = [*args, "--properties-file", str(self.properties())]
        with open(log, "ab") as handle:
            return subprocess.Popen(
                [*self.prefix, str(Path(sys.executable).parent / "spark-class"), *args],
                env=env,
                stdout=handle,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=(lambda: die_with_parent(signal.SIGTERM)) if stop_with_parent else None,
            )

    def start(
        self, timeout_s: float = 120.0, stop_with_parent: bool = True
    ) -> list[subprocess.Popen]:
        """Start the master, then the workers, each in its own process group; wait until every
        worker has registered."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        master_log = self.folder / "master.log"
        master_log.write_bytes(b"")
        self.processes = [
            self._spawn(
                [
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    self.host,
                    "--port",
                    str(self.port),
                    "--webui-port",
                    str(free_port()),
                ],
                master_log,
                stop_with_parent,
            )
        ]
        for number in range(self.workers):
            self.processes.append(
                self._spawn(
                    [
                        "org.apache.spark.deploy.worker.Worker",
                        self.master_url,
                        "--host",
                        self.host,
                        "--cores",
                        str(self.cores),
                        "--memory",
                        self.memory,
                        "--webui-port",
                        str(free_port()),
                        "--work-dir",
                        str(self.folder / f"work-{number}"),
                    ],
                    self.folder / f"worker-{number}.log",
                    stop_with_parent,
                )
            )
        deadline = time.time() + timeout_s
        while master_log.read_text(errors="replace").count("Registering worker") < self.workers:
            if (
                any(process.poll() is not None for process in self.processes)
                or time.time() > deadline
            ):
                self.stop()
                raise SparkClusterError(
                    f"the Spark cluster did not start: see the logs in {self.folder}"
                )
            time.sleep(0.5)
        return self.processes

    def applications(self) -> list[Path]:
        """The application folders the workers made (one per application that ran
        executors there).
        """
        return sorted(self.folder.glob("work-*/app-*"))

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM to each process group (workers first), SIGKILL after ``grace_s``."""
        stop_process_groups(list(reversed(self.processes)), grace_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="A Spark standalone master and workers on 127.0.0.1"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a cluster in the foreground until Ctrl-C or --duration")
    run.add_argument("--dir", type=Path, required=True)
    run.add_argument("--workers", type=int, default=2)
    run.add_argument("--duration", type=float, default=0, help="seconds (0: until stopped)")
    written = sub.add_parser(
        "properties", help="write the properties file of $SPARK_AUTH_SECRET (containers)"
    )
    written.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "properties":
        if not os.environ.get("SPARK_AUTH_SECRET"):
            print(
                "error: SPARK_AUTH_SECRET is not set: give every service the cluster's secret",
                file=sys.stderr,
            )
            return 2
        write_properties(args.out, os.environ["SPARK_AUTH_SECRET"])
        return 0
    cluster = SparkCluster(args.dir, args.workers)
    try:
        cluster.start(stop_with_parent=False)
    except SparkClusterError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(
        f"master: {cluster.master_url} (submit with --properties-file {cluster.properties()})",
        flush=True,
    )
    stopping: list = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    began = time.time()
    try:
        while not stopping and (not args.duration or time.time() - began < args.duration):
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
