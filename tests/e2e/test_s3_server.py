"""The S3 server of ``make run`` and the tests: SeaweedFS on 127.0.0.1 behind
generated credentials, started and stopped by PID. Real requests only: an S3 client configured by
the standard AWS variables alone, anonymous and wrongly signed requests, the filer's own HTTP API,
and the conditional writes the cross-machine lease lock will be built on."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import urllib.error
import urllib.request

import psutil
import pytest
from s3_server import BUCKET, S3Server  # include/scripts (tests/conftest.py puts it on the path)

pytestmark = [pytest.mark.integration]


def _status(url: str, method: str = "GET", data: bytes | None = None) -> int:
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, data=data, method=method), timeout=10
        ) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def _client(env: dict[str, str]):
    """botocore's S3 client in a fresh interpreter would read these; here: the same
    values, explicitly.
    """
    import botocore.session

    session = botocore.session.get_session()
    return session.create_client(
        "s3",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        region_name=env["AWS_REGION"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )


PROBE = """
import json, s3fs, sys
fs = s3fs.S3FileSystem()  # nothing but the AWS_* variables
fs.pipe(sys.argv[1] + "/probe/a.json", b'{"a": 1}')
print(json.dumps({"read": fs.cat(sys.argv[1] + "/probe/a.json").decode(), "ls": fs.ls(sys.argv[1] + "/probe")}))
"""  # noqa: E501


def test_s3_on_loopback_behind_generated_credentials_stopped_by_pid(tmp_path):
    server = S3Server(tmp_path / "s3")
    process = server.start()
    try:
        env = server.env()
        for name in ("s3.json", "config/security.toml"):
            assert stat.S_IMODE((tmp_path / "s3" / name).stat().st_mode) == 0o600, name
        listening = [
            c.laddr
            for c in psutil.Process(process.pid).net_connections("inet")
            if c.status == psutil.CONN_LISTEN
        ]
        assert listening and all(address.ip == "127.0.0.1" for address in listening), listening
        assert {address.port for address in listening} <= set(server.ports.values())

        # An S3 client set up by the standard variables alone (a fresh interpreter,
        # as a user's job).
        done = subprocess.run(
            [sys.executable, "-c", PROBE, BUCKET],
            capture_output=True,
            text=True,
            timeout=120,
            env={**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, **env},
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert '{\\"a\\": 1}' in done.stdout and f"{BUCKET}/probe/a.json" in done.stdout

        # Refused: anonymous, a wrong secret, and the filer's own HTTP API (which bypasses S3)
        # without its JWT.
        assert _status(f"{env['AWS_ENDPOINT_URL']}/{BUCKET}/probe/a.json") == 403
        wrong = _client({**env, "AWS_SECRET_ACCESS_KEY": "not-the-secret"})
        with pytest.raises(
            Exception, match="SignatureDoesNotMatch|AccessDenied|InvalidAccessKeyId"
        ):
            wrong.get_object(Bucket=BUCKET, Key="probe/a.json")
        filer = f"http://127.0.0.1:{server.ports['filer.port']}"
        assert _status(f"{filer}/buckets/{BUCKET}/probe/a.json") == 401
        assert _status(f"{filer}/buckets/{BUCKET}/probe/b.json", "PUT", b"x") == 401

        # Conditional writes: create-if-absent once, replace only with the current ETag.
        client = _client(env)
        first = client.put_object(Bucket=BUCKET, Key="locks/lease", Body=b"1", IfNoneMatch="*")[
            "ETag"
        ]
        with pytest.raises(Exception, match="PreconditionFailed"):
            client.put_object(Bucket=BUCKET, Key="locks/lease", Body=b"2", IfNoneMatch="*")
        with pytest.raises(Exception, match="PreconditionFailed"):
            client.put_object(
                Bucket=BUCKET, Key="locks/lease", Body=b"3", IfMatch='"0123456789abcdef"'
            )
        client.put_object(Bucket=BUCKET, Key="locks/lease", Body=b"4", IfMatch=first)
        assert client.get_object(Bucket=BUCKET, Key="locks/lease")["Body"].read() == b"4"
    finally:
        server.stop()
    assert process.poll() is not None and not psutil.pid_exists(process.pid)

    # Started again on other ports: the same credentials and the data kept.
    again = S3Server(tmp_path / "s3")
    again.start()
    try:
        assert again.env()["AWS_ACCESS_KEY_ID"] == env["AWS_ACCESS_KEY_ID"]
        assert (
            _client(again.env()).get_object(Bucket=BUCKET, Key="locks/lease")["Body"].read() == b"4"
        )
    finally:
        again.stop()


def test_the_compose_files_s3_service_serves_the_credentials_every_service_is_given(tmp_path):
    """``docker-compose.yaml``'s ``s3`` command, run here as written except that it listens on
    127.0.0.1 (a container's 0.0.0.0 is its own network) at a free port: S3 answers requests signed
    with the ``AWS_*`` credentials the services share, on the fixed port, and refuses others."""
    import signal

    import yaml
    from metadata_db import free_port

    from testkit.paths import ROOT

    compose = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
    command = compose["services"]["s3"]["command"]
    lakehouse_env = compose["x-lakehouse"]["environment"]
    port = free_port()
    assert (
        lakehouse_env["AWS_ENDPOINT_URL"] == f"http://s3:{command[command.index('--s3-port') + 1]}"
    )
    assert compose["services"]["s3"]["ports"] == [
        f"127.0.0.1:{command[command.index('--s3-port') + 1]}:8333"
    ]
    argv = [
        {
            "python": sys.executable,
            "0.0.0.0": "127.0.0.1",
            "/s3": str(tmp_path / "s3"),
            "8333": str(port),
        }.get(word, word)
        for word in command
    ]
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "COMPOSEKEY",
        "AWS_SECRET_ACCESS_KEY": "compose-" + "x" * 24,
    }
    server = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert (
            f"AWS_ENDPOINT_URL=http://127.0.0.1:{port}"
            in server.stdout.readline() + server.stdout.readline() + server.stdout.readline()
        )
        shared = {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_REGION": lakehouse_env["AWS_REGION"],
            "AWS_ACCESS_KEY_ID": env["AWS_ACCESS_KEY_ID"],
            "AWS_SECRET_ACCESS_KEY": env["AWS_SECRET_ACCESS_KEY"],
        }
        client = _client(shared)
        client.put_object(Bucket=BUCKET, Key="lake/probe", Body=b"1")
        assert client.get_object(Bucket=BUCKET, Key="lake/probe")["Body"].read() == b"1"
        with pytest.raises(Exception, match="(?i)denied|signature|invalid"):
            _client({**shared, "AWS_SECRET_ACCESS_KEY": "wrong-" + "y" * 24}).get_object(
                Bucket=BUCKET, Key="lake/probe"
            )
        listening = subprocess.run(["ss", "-ltnp"], capture_output=True, text=True).stdout
        weed = [
            line
            for line in listening.splitlines()
            if f"pid={server.pid}," in line or "weed" in line
        ]
        assert all("127.0.0.1:" in line for line in weed if f":{port} " in line)
        weed = psutil.Process(server.pid).children()
        assert weed, "the S3 server runs as a child of the command"
    finally:
        # as `docker stop` does: the command stops its server too
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    assert not [
        process
        for process in weed
        if process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    ]


def test_a_port_taken_between_the_probe_and_the_bind_starts_the_server_again_elsewhere(
    tmp_path, monkeypatch
):
    """A port free when probed can be taken before SeaweedFS binds it (a suite starts servers side
    by side): the first start's filer port is held open here, and the server starts on others.
    (The port choice is replaced once, to name the held port; SeaweedFS runs for real.)"""
    import socket

    import metadata_db
    import s3_server

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    port = held.getsockname()[1]
    draws = []

    def ports(count: int) -> list[int]:
        chosen = metadata_db.free_ports(count)
        if not draws:  # the first start: the filer's port is the held one
            chosen[s3_server.PORTS.index("filer.port")] = port
        draws.append(chosen)
        return chosen

    monkeypatch.setattr(s3_server, "free_ports", ports)
    server = S3Server(tmp_path / "s3")
    try:
        server.start()
        assert len(draws) == 2 and server.ports["filer.port"] != port
        assert f"{port} for Filer" in (tmp_path / "s3" / "weed.log").read_text()
        assert _status(f"{server.endpoint}/{BUCKET}") == 403
    finally:
        server.stop()
        held.close()
