"""``spark_jobs/engine/session.py``: the drivers' S3A settings and a cluster's properties file, read
without starting a session."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.unit


def test_s3a_settings_come_from_the_standard_aws_variables():
    from spark_jobs.engine.session import s3a_confs

    # AWS itself: the SDK's chain
    assert s3a_confs({}) == {"fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem"}
    confs = s3a_confs(
        {
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
            "AWS_REGION": "eu-west-1",
            "AWS_ACCESS_KEY_ID": "id",
            "AWS_SECRET_ACCESS_KEY": "key",
        }
    )
    assert (
        confs["fs.s3a.endpoint"] == "http://127.0.0.1:9000"
        and confs["fs.s3a.path.style.access"] == "true"
    )
    assert confs["fs.s3a.endpoint.region"] == "eu-west-1"
    assert (confs["fs.s3a.access.key"], confs["fs.s3a.secret.key"]) == ("id", "key")
    assert "fs.s3a.session.token" not in confs
    assert s3a_confs({"AWS_DEFAULT_REGION": "us-east-2"})["fs.s3a.endpoint.region"] == "us-east-2"


def test_a_clusters_properties_file_reads_as_spark_submit_reads_it(tmp_path):
    """``$LAKEHOUSE_SPARK_PROPERTIES`` (make run-cluster's shared secret) for a ``lakehouse``
    driver: ``key value`` and ``key=value`` lines, comments and blank lines left out."""
    from spark_jobs.engine.session import properties_file

    path = tmp_path / "spark.conf"
    path.write_text(
        "# the cluster's\nspark.authenticate true\n\nspark.authenticate.secret=s3cr3t-value\n"
        "spark.executor.extraJavaOptions   -Da=1 -Db=2\n"
    )
    assert properties_file(str(path)) == {
        "spark.authenticate": "true",
        "spark.authenticate.secret": "s3cr3t-value",
        "spark.executor.extraJavaOptions": "-Da=1 -Db=2",
    }
