"""What a task needs to run a ``lakehouse`` command as a Spark application, without a JVM of its
own: the cached Delta jars, the drivers' JVM options and Delta's session confs (the Airflow hook's
spark-submit arguments), and the client side of a DAG run's shared driver (the operators')."""

from __future__ import annotations

from pathlib import Path

# the shared driver's wire: plain sockets and files
from spark_jobs.control.coordination.driver import (
    DriverAddress,
    DriverGone,
    code_stamp,
    driver_dir,
    driver_key,
    machine,
    send,
    starting,
    wait_for_address,
)

__all__ = [
    "DriverAddress",
    "DriverGone",
    "code_stamp",
    "delta_confs",
    "driver_dir",
    "driver_java_options",
    "driver_key",
    "jars",
    "machine",
    "send",
    "starting",
    "wait_for_address",
]


def jars() -> list[Path]:
    """The Delta jars ``lakehouse setup`` resolved into the cache (a :class:`SetupError` before)."""
    from spark_jobs.engine.jars import cached_jars

    return cached_jars()


def driver_java_options() -> str:
    """The JVM options every driver starts with (the class-data sharing archive, the lean JIT)."""
    from spark_jobs.engine.jvm import driver_java_options as options

    return options()


def delta_confs() -> dict[str, str]:
    """The Spark confs that make a session Delta's."""
    from spark_jobs.engine.session import DELTA_CONFS

    return dict(DELTA_CONFS)
