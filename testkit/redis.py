"""A Redis server for the tests' CeleryExecutor (its broker and result backend): Debian's
``redis-server``, behind a password, on the addresses a test names, stopped by PID when the
test ends (and with its parent, bounded in time by ``timeout``)."""

from __future__ import annotations

import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from testkit.paths import free_port


@dataclass(frozen=True)
class Redis:
    port: int
    password: str
    process: subprocess.Popen

    def url(self, host: str = "127.0.0.1", db: int = 0) -> str:
        return f"redis://:{self.password}@{host}:{self.port}/{db}"

    def command(self, *args: str) -> str:
        """One command through the RESP protocol, its reply as text (enough for CLIENT LIST)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as connection:
            words = ("AUTH", self.password, *args)
            for word in (words[:2], words[2:]):
                connection.sendall(
                    f"*{len(word)}\r\n".encode()
                    + b"".join(f"${len(part.encode())}\r\n{part}\r\n".encode() for part in word)
                )
                reply = connection.recv(1 << 20).decode(errors="replace")
            return reply


@contextmanager
def redis_server(
    folder: Path, bind: tuple[str, ...] = ("127.0.0.1",), timeout_s: int = 1800
) -> Iterator[Redis]:
    """A server listening on ``bind`` (loopback first), nothing persisted, up for
    ``timeout_s`` at most.
    """
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip(
            "redis-server is not on PATH: install it (apt-get install redis-server; CI does)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    port, password = free_port(), secrets.token_hex(16)
    log = folder / "redis.log"
    with open(log, "ab") as output:
        process = subprocess.Popen(
            [
                "timeout",
                str(timeout_s),
                binary,
                "--port",
                str(port),
                "--bind",
                *bind,
                "--requirepass",
                password,
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(folder),
                "--protected-mode",
                "yes",
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Redis(port, password, process)
    try:
        deadline = time.time() + 30
        while "+PONG" not in _ping(server):
            assert process.poll() is None and time.time() < deadline, log.read_text(
                errors="replace"
            )[-2000:]
            time.sleep(0.2)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _ping(server: Redis) -> str:
    try:
        return server.command("PING")
    except OSError:
        return ""
