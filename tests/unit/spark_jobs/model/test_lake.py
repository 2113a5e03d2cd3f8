"""``spark_jobs/model/lake.py``: the lake's home as the environment gives it (an S3
lake spelt s3a).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.unit


def test_an_s3_lake_is_spelt_s3a_everywhere(monkeypatch):
    from spark_jobs.model.lake import lakehouse_home

    monkeypatch.setenv("LAKEHOUSE_HOME", "s3://bucket/some/prefix/")
    assert lakehouse_home() == "s3a://bucket/some/prefix"
    monkeypatch.setenv("LAKEHOUSE_HOME", "s3a://bucket/p")
    assert lakehouse_home() == "s3a://bucket/p"
