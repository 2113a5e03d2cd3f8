"""``spark_jobs/model/settings.py``: the driver's addresses follow the settings, and a remote master
needs one."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "master, host, bind, expected",
    [
        ("local[2]", "", "", ("127.0.0.1", "127.0.0.1")),
        ("spark://127.0.0.1:7077", "", "", ("127.0.0.1", "127.0.0.1")),
        ("spark://localhost:7077", "", "", ("127.0.0.1", "127.0.0.1")),
        ("spark://10.0.0.5:7077", "10.0.0.1", "", ("10.0.0.1", "10.0.0.1")),
        ("k8s://https://10.0.0.5:6443", "driver.svc", "0.0.0.0", ("driver.svc", "0.0.0.0")),
        ("spark://10.0.0.5:7077", "", "", None),
        ("yarn", "", "", None),
    ],
    ids=[
        "local",
        "loopback-master",
        "localhost-master",
        "remote-with-host",
        "k8s-with-bind",
        "remote-without",
        "yarn-without",
    ],
)
def test_the_drivers_address_follows_the_settings_and_a_remote_master_needs_one(
    monkeypatch, master, host, bind, expected
):
    from spark_jobs.model.errors import UsageError
    from spark_jobs.model.settings import driver_addresses

    monkeypatch.setenv("LAKEHOUSE_SPARK_DRIVER_HOST", host)
    monkeypatch.setenv("LAKEHOUSE_SPARK_DRIVER_BIND", bind)
    if expected is None:
        with pytest.raises(
            UsageError,
            match=f"the Spark master {master} has executors on other machines.*set "
            "LAKEHOUSE_SPARK_DRIVER_HOST",
        ):
            driver_addresses(master)
        return
    found = driver_addresses(master)
    assert (found["spark.driver.host"], found["spark.driver.bindAddress"]) == expected
    assert found["SPARK_LOCAL_IP"] == expected[1]
