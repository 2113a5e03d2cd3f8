"""A shared Spark driver: one Spark application that the Spark tasks of one Airflow DAG run follow.

A hop task that submits its own ``spark-submit`` pays a JVM start, the Python imports (Great
Expectations' among them), a session and cold JIT-compiled code, every hop. With a shared
driver the first task of the run starts a driver that serves ``lakehouse`` commands, and the
next tasks send theirs to it; each task keeps its own log, state, retries and gate.

This module is both ends of the wire, without a JVM: the client (in the Airflow task) and the
serving loop (in the driver, which supplies the handler that runs a command). A driver:

- listens on 127.0.0.1 on a port the OS picks, and accepts only a request carrying the token
  of its address file (mode 0600 in a folder of mode 0700: only its user can read it);
- runs one command at a time, sending the command's stdout and stderr lines back as they come,
  then its exit code;
- ends after the command a task sent with ``release`` (the DAG run's last Spark task), after
  ``idle_s`` without a command, or at once when its client goes away during a command (a
  killed task): as if the driver had been killed, which the runs are made to survive;
- removes its address file when it ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import io
import json
import os
import secrets
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from spark_jobs.model import settings

CLIENT_LEFT_EXIT = 75  # the driver's exit status when its client left during a command
_REQUEST_TIMEOUT_S = 10.0


class DriverGone(Exception):
    """The driver closed the connection before taking the command (it ended, or was ending)."""


class DriverDied(Exception):
    """The driver ended while it ran the command."""


def driver_dir() -> Path:
    """Where drivers' address files and logs are: ``$LAKEHOUSE_DRIVER_DIR``, else ``drivers`` in
    ``$AIRFLOW_HOME``, else in the temporary folder; created with mode 0700."""
    folder = settings.DRIVER_DIR.value()
    if not folder:
        base = os.environ.get("AIRFLOW_HOME") or os.path.join(
            tempfile.gettempdir(), f"lakehouse-{os.getuid()}"
        )
        folder = os.path.join(base, "drivers")
    path = Path(folder)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def driver_key(*parts) -> str:
    """A short name for a driver from everything it must share with its tasks (the DAG run, the
    spark-submit command, the environment): a task whose parts differ gets a driver of its own."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def machine() -> str:
    """Which machine this is, as a driver listening on loopback sees it: the host name and, on
    Linux, the network namespace (two containers, or a namespace, on one host are two machines)."""
    try:
        namespace = os.readlink("/proc/self/ns/net")
    except OSError:
        namespace = ""
    return f"{socket.gethostname()} {namespace}"


def code_stamp() -> str:
    """A hash of the pipeline specs and their code (``$LAKEHOUSE_PIPELINES``): a driver imports a
    pipeline's modules once, so a driver that outlives a DAG run is not used after they change."""
    from spark_jobs.model.settings import pipelines_dirs

    digest = hashlib.sha256()
    for folder in pipelines_dirs():
        for path in sorted(folder.rglob("*")) if folder.is_dir() else ():
            if path.suffix in (".py", ".yaml", ".yml") and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


@dataclass
class DriverAddress:
    """A driver's address file: where it listens, its token, and its process and group."""

    port: int
    token: str
    pid: int
    group: int
    log: str

    def write(self, path: Path) -> None:
        """Whole or not at all (a client never reads half a file), readable by its user only."""
        staging = path.with_name(f".{path.name}.{os.getpid()}")
        descriptor = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(json.dumps(asdict(self)))
        staging.replace(path)

    @classmethod
    def read(cls, path: Path) -> DriverAddress | None:
        """The address in ``path``, or ``None`` when there is none or its process has ended."""
        try:
            found = cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None
        return found if _alive(found.pid) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def starting(path: Path) -> Iterator[None]:
    """Held while a client looks for the driver of ``path`` and starts one: two tasks of a run
    never start two drivers."""
    with open(path.with_suffix(".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def wait_for_address(
    path: Path, process_alive: Callable[[], bool], timeout_s: float
) -> DriverAddress | None:
    """The address a starting driver writes, or ``None`` when its process ended or
    ``timeout_s`` passed.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        address = DriverAddress.read(path)
        if address is not None:
            return address
        if not process_alive():
            return None
        time.sleep(0.1)
    return None


# -- the client ------------------------------------------------------------------------------------


def send(
    address: DriverAddress,
    call: dict,
    release: bool,
    emit: Callable[[str], None],
    on_connect: Callable[[socket.socket], None] = lambda sock: None,
) -> int:
    """Run ``call`` (a :class:`~spark_jobs.model.calls.Call` as :meth:`~.Call.to_wire` writes
    it) on the driver; each output line goes to ``emit``; its exit code.

    :raises DriverGone: the driver did not take the command (start another).
    :raises DriverDied: the driver ended during the command.
    """
    try:
        sock = socket.create_connection(("127.0.0.1", address.port), timeout=_REQUEST_TIMEOUT_S)
    except OSError as error:
        raise DriverGone(f"driver pid {address.pid} does not answer ({error})") from None
    with sock:
        on_connect(sock)
        sock.sendall(
            (json.dumps({"token": address.token, "call": call, "release": release}) + "\n").encode()
        )
        sock.settimeout(None)  # a command runs as long as it runs
        accepted = False
        for line in sock.makefile("r", encoding="utf-8"):
            message = json.loads(line)
            if "accepted" in message:
                accepted = True
            elif "line" in message:
                emit(message["line"])
            elif "exit" in message:
                return int(message["exit"])
    if not accepted:
        raise DriverGone(f"driver pid {address.pid} closed before taking the command")
    raise DriverDied(
        f"the shared driver (pid {address.pid}) ended during the command; its log: {address.log}"
    )


# -- the driver ------------------------------------------------------------------------------------


class _Lines(io.TextIOBase):
    """A text stream whose complete lines go to the client as ``{"line": ...}`` messages."""

    def __init__(self, send_message: Callable[[dict], None]):
        self._send = send_message
        self._partial = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            self._send({"line": line})
        return len(text)

    def flush(self) -> None:
        pass

    def close_line(self) -> None:
        if self._partial:
            self._send({"line": self._partial})
            self._partial = ""


def serve(path: Path, handler: Callable[[dict], int], idle_s: float, log: str) -> None:
    """Serve commands until a release, ``idle_s`` without one, or a client that leaves mid-command.

    ``handler(call)`` runs one call with ``sys.stdout`` and ``sys.stderr`` redirected to the
    client and returns its exit code. The address file is written once listening (so write it
    after the session exists: a client never waits on a driver that is still starting).
    """
    server = socket.create_server(("127.0.0.1", 0))
    token = secrets.token_hex(16)
    address = DriverAddress(server.getsockname()[1], token, os.getpid(), os.getpgid(0), log)
    address.write(path)
    try:
        with server:
            while True:
                server.settimeout(idle_s)
                try:
                    connection, _ = server.accept()
                except TimeoutError:
                    return
                with connection:
                    if _serve_one(connection, token, handler):
                        return
    finally:
        with contextlib.suppress(OSError, ValueError):
            if json.loads(path.read_text()).get("pid") == address.pid:  # not a later driver's
                path.unlink()


def _serve_one(connection: socket.socket, token: str, handler: Callable[[dict], int]) -> bool:
    """One request; ``True`` when the driver should end after it (released)."""
    connection.settimeout(_REQUEST_TIMEOUT_S)
    try:
        request = json.loads(connection.makefile("r", encoding="utf-8").readline() or "{}")
    except (OSError, ValueError):
        return False
    if not hmac.compare_digest(str(request.get("token", "")), token) or not isinstance(
        request.get("call"), dict
    ):
        return False  # not ours: say nothing
    connection.settimeout(None)
    sending = threading.Lock()

    def send_message(message: dict) -> None:
        with sending:
            connection.sendall((json.dumps(message) + "\n").encode())

    send_message({"accepted": True})
    finished = threading.Event()
    threading.Thread(target=_end_if_client_leaves, args=(connection, finished), daemon=True).start()
    lines = _Lines(send_message)
    with contextlib.redirect_stdout(lines), contextlib.redirect_stderr(lines):
        try:
            code = handler(request["call"])
        finally:
            lines.close_line()
    finished.set()
    send_message({"exit": code})
    return bool(request.get("release"))


def _end_if_client_leaves(connection: socket.socket, finished: threading.Event) -> None:
    """A client sends nothing after its request: end of stream means it went away (a killed task).
    The command must not go on without it, so the driver ends as a killed one would."""
    try:
        data = connection.recv(1)
    except OSError:
        data = b""
    if not data and not finished.is_set():
        os._exit(CLIENT_LEFT_EXIT)
