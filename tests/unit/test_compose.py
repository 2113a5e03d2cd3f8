"""docker-compose.yaml, checked without a Docker engine (none runs here): it parses, every
published port is on 127.0.0.1, no secret is written in it, and what it builds exists."""

from __future__ import annotations

import sys

import pytest
import yaml

from testkit.paths import ROOT

pytestmark = [pytest.mark.unit]


def test_compose_file_is_sound():
    compose = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
    services = compose["services"]
    assert {
        "postgres",
        "api-server",
        "scheduler",
        "dag-processor",
        "triggerer",
        "spark-master",
        "spark-worker",
        "s3",
    } <= set(services)
    # off unless asked for, as the launcher's
    assert services["triggerer"]["profiles"] == ["triggerer"]
    shared = compose["x-lakehouse"]["environment"]
    sys.path.insert(0, str(ROOT / "include" / "scripts"))
    from lakehouse_platform import IDLE_SETTINGS

    # the launcher's, in containers too
    assert {key: shared.get(key) for key in IDLE_SETTINGS} == IDLE_SETTINGS
    assert (
        shared["LAKEHOUSE_HOME"].startswith("s3a://")
        and shared["AWS_ENDPOINT_URL"] == "http://s3:8333"
    )
    assert "AWS_SECRET_ACCESS_KEY:?" in (ROOT / "docker-compose.yaml").read_text()
    for name, service in services.items():
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"
        build = service.get("build")
        if build:
            assert (ROOT / build["context"] / build["dockerfile"]).exists()
    text = (ROOT / "docker-compose.yaml").read_text()
    assert "PASSWORD:?" in text and "PASSWORD: airflow" not in text
    # The Spark cluster: two workers, every Spark process and spark-submit behind the secret
    # spark-init writes.
    assert "SPARK_AUTH_SECRET:?" in text and services["spark-worker"]["deploy"]["replicas"] == 2
    for name in ("spark-master", "spark-worker"):
        assert services[name]["command"][-2:] == [
            "--properties-file",
            shared["LAKEHOUSE_SPARK_PROPERTIES"],
        ], name
    assert services["spark-init"]["command"][-1] == shared["LAKEHOUSE_SPARK_PROPERTIES"]
    # The Kafka broker: only with its profile, its login the one every service is given,
    # published nowhere.
    kafka = services["kafka"]
    assert kafka["profiles"] == ["kafka"] and "ports" not in kafka and "KAFKA_PASSWORD:?" in text
    assert (
        shared["LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS"]
        == f"kafka:{kafka['command'][kafka['command'].index('--port') + 1]}"
    )
    assert kafka["environment"]["LAKEHOUSE_KAFKA_USERNAME"] == shared["LAKEHOUSE_KAFKA_USERNAME"]
    dockerfile = (ROOT / "include/docker/Dockerfile").read_text()
    for copied in ("requirements.txt", "spark_jobs", "dags", "plugins", "include"):
        assert copied in dockerfile and (ROOT / copied).exists()


SECRET_PATTERNS = [
    r"AKIA[0-9A-Z]{16}",  # an AWS access key id
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
    r"(?i)(password|secret|token)[\"']?\s*[:=]\s*[\"'][^\"'${}\s]{4,}[\"']",  # a literal credential
    r"(?i)://[^/\s:@${}]+:[^/\s@${}]{3,}@",  # user:password@ in a URL
]


def test_no_secret_is_committed():
    import re
    import subprocess

    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    found = []
    for name in tracked:
        path = ROOT / name
        if not path.is_file() or path.stat().st_size > 1_000_000 or name.startswith("tests/"):
            continue
        text = path.read_text(errors="ignore")
        found += [
            f"{name}: {match.group(0)}"
            for pattern in SECRET_PATTERNS
            for match in re.finditer(pattern, text)
        ]
    assert found == []


def test_the_spark_init_command_writes_a_private_properties_file_of_the_given_secret(tmp_path):
    """What docker-compose's spark-init runs: the secret from the environment into a 0600 file;
    without one, exit 2.
    """
    import os
    import subprocess
    import sys

    script = str(ROOT / "include/scripts/spark_cluster.py")
    out = tmp_path / "conf" / "spark.conf"
    refused = subprocess.run(
        [sys.executable, script, "properties", "--out", str(out)],
        capture_output=True,
        text=True,
        env={key: value for key, value in os.environ.items() if key != "SPARK_AUTH_SECRET"},
    )
    assert (
        refused.returncode == 2
        and "SPARK_AUTH_SECRET is not set" in refused.stderr
        and not out.exists()
    )
    secret = f"secret-{os.getpid()}"
    subprocess.run(
        [sys.executable, script, "properties", "--out", str(out)],
        check=True,
        env={**os.environ, "SPARK_AUTH_SECRET": secret},
    )
    lines = dict(line.split(" ", 1) for line in out.read_text().splitlines())
    assert lines["spark.authenticate"] == "true" and lines["spark.authenticate.secret"] == secret
    assert lines["spark.master.rest.enabled"] == "false" and out.stat().st_mode & 0o077 == 0
