"""Who asked for a command, and through which interface: kept in the records a command writes
(run records, rollback journals, maintenance records, refusals) and so in the event log.

An origin is a plain dict: ``interface`` (``cli``, or ``airflow`` in an Airflow task), ``user``
(the account the command ran as), ``command`` once a command is known, and in an Airflow task
the ``dag_id``, ``dag_run_id``, ``task_id`` and ``try_number`` Airflow puts in the task's
environment. A DAG run's shared driver serves several tasks, so the task that sends a call sends
its origin with it (:func:`given`).
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

# What Airflow's task runner puts in a task's environment, by the key an origin keeps it under.
AIRFLOW_VARIABLES = {
    "dag_id": "AIRFLOW_CTX_DAG_ID",
    "dag_run_id": "AIRFLOW_CTX_DAG_RUN_ID",
    "task_id": "AIRFLOW_CTX_TASK_ID",
    "try_number": "AIRFLOW_CTX_TRY_NUMBER",
}

_given: ContextVar[dict | None] = ContextVar("lakehouse_origin", default=None)


def from_environment(environment: Mapping[str, str] | None = None) -> dict:
    """The origin this process's environment tells: an Airflow task's context, else the CLI."""
    env = os.environ if environment is None else environment
    airflow = {key: env[name] for key, name in AIRFLOW_VARIABLES.items() if env.get(name)}
    interface = "airflow" if airflow else "cli"
    return {"interface": interface, "user": _user(env), **airflow}


def current(command: str | None = None) -> dict:
    """The origin of what runs now (the one :func:`given` set, else the environment's), with
    ``command`` when given."""
    origin = dict(_given.get() or from_environment())
    if command is not None:
        origin["command"] = command
    return origin


@contextmanager
def given(origin: Mapping | None) -> Iterator[None]:
    """Within the block, :func:`current` is ``origin`` (the environment's when None)."""
    token = _given.set(dict(origin) if origin else None)
    try:
        yield
    finally:
        _given.reset(token)


def _user(env: Mapping[str, str]) -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's), no LOGNAME/USER
        return env.get("USER") or str(os.getuid())
