"""What a task needs to run a ``lakehouse`` command as a Spark application, without a JVM of its
own: the cached Delta jars, the drivers' JVM options and Delta's session confs (the Airflow hook's
spark-submit arguments), the client side of a DAG run's shared driver (the operators') and its
server side (:func:`serve_commands`, which ``submit.py serve`` runs)."""

from __future__ import annotations

from collections.abc import Callable
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
    serve,
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
    "serve_commands",
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


def serve_commands(address: Path, handler: Callable[[dict], int], idle_s: float, log: str):
    """Be a DAG run's shared driver: build the session once, write ``address`` once listening,
    then perform each call sent by the run's tasks with ``handler(call)`` (a call as
    :meth:`spark_jobs.model.calls.Call.to_wire` writes it) on a fresh view of the tables, until a
    release or ``idle_s`` seconds without a command.
    """
    from spark_jobs.engine.session import build_session, forget_table_logs

    def fresh(call: dict) -> int:
        forget_table_logs()
        return handler(call)

    build_session("lakehouse-shared-driver")
    serve(address, fresh, idle_s, log)
