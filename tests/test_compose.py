"""docker-compose.yaml, checked without a Docker engine (none runs here): it parses, every
published port is on 127.0.0.1, no secret is written in it, and what it builds exists."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import ROOT

pytestmark = [pytest.mark.unit]


def test_compose_file_is_sound():
    compose = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
    services = compose["services"]
    assert {"postgres", "api-server", "scheduler", "dag-processor", "triggerer", "spark-master", "spark-worker",
            "s3"} <= set(services)
    shared = compose["x-lakehouse"]["environment"]
    assert shared["LAKEHOUSE_HOME"].startswith("s3a://") and shared["AWS_ENDPOINT_URL"] == "http://s3:8333"
    assert "AWS_SECRET_ACCESS_KEY:?" in (ROOT / "docker-compose.yaml").read_text()
    for name, service in services.items():
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"
        build = service.get("build")
        if build:
            assert (ROOT / build["context"] / build["dockerfile"]).exists()
    text = (ROOT / "docker-compose.yaml").read_text()
    assert "PASSWORD:?" in text and "PASSWORD: airflow" not in text
    dockerfile = (ROOT / "include/docker/Dockerfile").read_text()
    for copied in ("requirements.txt", "spark_jobs", "dags", "plugins", "include"):
        assert copied in dockerfile and (ROOT / copied).exists()


SECRET_PATTERNS = [
    r"AKIA[0-9A-Z]{16}",                                             # an AWS access key id
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
    r"(?i)(password|secret|token)[\"']?\s*[:=]\s*[\"'][^\"'${}\s]{4,}[\"']",  # a literal credential
    r"(?i)://[^/\s:@${}]+:[^/\s@${}]{3,}@",                          # user:password@ in a URL
]


def test_no_secret_is_committed():
    import re
    import subprocess

    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    found = []
    for name in tracked:
        path = ROOT / name
        if not path.is_file() or path.stat().st_size > 1_000_000 or name.startswith("tests/"):
            continue
        text = path.read_text(errors="ignore")
        found += [f"{name}: {match.group(0)}" for pattern in SECRET_PATTERNS for match in re.finditer(pattern, text)]
    assert found == []
