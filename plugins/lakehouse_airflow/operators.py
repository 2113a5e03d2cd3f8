"""Thin operators: each performs one call (:mod:`spark_jobs.model.calls`) as a Spark application
(spark-submit of the call's ``lakehouse`` command line), or on the shared driver of its DAG run
(the call itself; the client: :mod:`spark_jobs.service.submission`)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.common.compat.sdk import AirflowException
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import BaseOperatorLink

from lakehouse_airflow.hooks import LakehouseSparkHook
from spark_jobs.model import settings
from spark_jobs.model.calls import Call, build
from spark_jobs.model.origin import current as current_origin


def _keep_warm_s() -> int:
    """``$LAKEHOUSE_DRIVER_KEEP_WARM``: seconds a stream or backfill DAG's driver waits idle for
    the DAG's next run (0: each DAG run has a driver of its own)."""
    return int(settings.DRIVER_KEEP_WARM.value() or 0)


def _driver_here(submit) -> bool:
    """Whether the driver of a job submitted by ``submit`` (a ``SparkSubmitHook``) runs in the
    task's process tree (client mode), not where the cluster places it."""
    return not submit._is_kubernetes and submit._connection.get("deploy_mode") in (
        None,
        "",
        "client",
    )


# Executors whose tasks all run on the scheduler's machine, where the task that starts a DAG
# run's shared driver (listening on loopback) is reachable from the run's other tasks.
LOCAL_EXECUTORS = (
    "LocalExecutor",
    "airflow.executors.local_executor.LocalExecutor",
    "lakehouse_airflow.executor.PromptLocalExecutor",
)


def driver_mode() -> str:
    """``shared`` or ``task``, from ``$LAKEHOUSE_DRIVER``: ``auto`` (the default) is ``shared``
    when every executor Airflow is configured with (``[core] executor``, a list) is a local one,
    and ``task`` otherwise: under Celery, Kubernetes or Edge a DAG run's tasks may land on other
    machines, which could not reach a driver on loopback."""
    mode = settings.DRIVER.value().strip().lower()
    if mode not in ("auto", "shared", "task"):
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException(
            f"LAKEHOUSE_DRIVER={mode!r} is not a driver mode: set auto, shared or task"
        )
    if mode != "auto":
        return mode
    from airflow.configuration import conf

    executors = [
        name.split(":")[-1].strip() for name in conf.get("core", "executor", fallback="").split(",")
    ]
    return "shared" if all(name in LOCAL_EXECUTORS for name in executors if name) else "task"


class LakehouseSparkOperator(SparkSubmitOperator):
    """Perform a call (``lakehouse <command> <pipeline>`` with ``options``) through the
    ``spark_default`` connection (``local[*]``, ``spark://...``, ``k8s://...``).

    Jars, the shipped package and the interpreter are resolved in :meth:`execute`, so DAG
    parsing reads no file and starts no JVM.

    :param command: ``run``, ``backfill``, ``rollback``, ``refresh`` or ``maintain``.
    :param pipeline: the pipeline spec's name.
    :param options: the call's options (templated; :func:`spark_jobs.model.calls.build` reads
        rendered text as each option's type).
    :param announces: the hop whose table asset gets an event when the command wrote rows to it
        (:func:`lakehouse_airflow.assets.announce`; the run is the call's ``run_id``).
    :param shares_driver: run the command on the DAG run's shared driver (started by the first
        task that needs it), unless ``$LAKEHOUSE_DRIVER`` is ``task`` or the connection deploys
        drivers on the cluster (then each task submits its own application).
    :param releases_driver: the DAG run's last Spark task on its usual path: the shared driver
        ends after this command (otherwise after ``$LAKEHOUSE_DRIVER_IDLE`` seconds, 60, idle).
        With ``$LAKEHOUSE_DRIVER_KEEP_WARM`` (seconds) a stream or backfill DAG's driver is not
        released: the DAG's next runs follow it, and it ends after that long idle.
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "options")

    def __init__(
        self,
        *,
        command: str,
        pipeline: str,
        options: dict[str, Any] | None = None,
        announces: str | None = None,
        shares_driver: bool = False,
        releases_driver: bool = False,
        **kwargs: Any,
    ):
        kwargs.setdefault("name", f"lakehouse-{pipeline}-{command}")
        super().__init__(application_args=[command, pipeline], **kwargs)
        self.command = command
        self.pipeline = pipeline
        self.options = dict(options or {})
        self.call: Call | None = None  # built from the rendered options in prepare()
        self.announces = announces
        self.shares_driver = shares_driver
        self.releases_driver = releases_driver
        self._driver_socket = None
        self._error_line: str | None = None

    def execute(self, context: Any) -> None:
        self.prepare()
        try:
            if self._uses_shared_driver():
                self._run_on_shared_driver(context)
            else:
                super().execute(context)
        except AirflowException as failed:
            if self._error_line is None:
                raise
            # The command's own line (which names the fix) as the task's error, and its alert's.
            raise AirflowException(
                f"lakehouse {self.command} {self.pipeline}: {self._error_line}"
            ) from failed
        if self.announces:
            from lakehouse_airflow.assets import announce

            announce(context.get("outlet_events"), self.pipeline, self.announces, self.call.run_id)

    # -- OpenLineage (asked by Airflow's OpenLineage provider when it is installed and on) -------

    def get_openlineage_facets_on_start(self):
        """The hop's inputs and outputs (:mod:`lakehouse_airflow.lineage`)."""
        from lakehouse_airflow.lineage import operator_lineage

        return operator_lineage(self.pipeline, self._hop(), self.command, None)

    def get_openlineage_facets_on_complete(self, task_instance):
        """The hop's inputs and outputs with their schemas, the rows the run wrote and its
        gate's assertions."""
        from lakehouse_airflow.lineage import operator_lineage

        return operator_lineage(self.pipeline, self._hop(), self.command, self._run_id())

    def get_openlineage_facets_on_failure(self, task_instance):
        return self.get_openlineage_facets_on_complete(task_instance)

    def _hop(self) -> str | None:
        hop = self.options.get("hop")
        return str(hop) if hop else None

    def _run_id(self) -> str | None:
        """The run id the call ran with (None before the call was built)."""
        return getattr(self.call, "run_id", None) if self.call is not None else None

    def prepare(self) -> None:
        """The call, from the rendered options, and what spark-submit needs beside it: the entry
        script, the shipped package, the jars, the confs, the properties file and the
        environment."""
        from spark_jobs.model.errors import LakehouseError

        hook = LakehouseSparkHook()
        submit = self._get_hook()
        master = submit._connection["master"]
        here = _driver_here(submit)
        try:
            self.call = build(self.command, pipeline=self.pipeline, **self.options)
            conf, env = hook.conf(master, here), hook.env_vars(master, here)
        # an option that is not of its type, or a driver its executors cannot reach: refused
        # before anything starts
        except LakehouseError as error:
            from airflow.sdk.exceptions import AirflowFailException

            raise AirflowFailException(str(error)) from None
        self.application = hook.application
        self.py_files = hook.package_archive()
        self.jars = hook.jars()
        self.conf = {**conf, **(self.conf or {})}
        self.properties_file = self.properties_file or hook.properties_file()
        self.env_vars = {**env, **(self.env_vars or {})}
        self.application_args = self.call.argv()

    def _watch(self, line: str) -> None:
        """Keep the ``error: ...`` line the command printed last (its CLI's one
        line of a problem).
        """
        text = line.decode(errors="replace") if isinstance(line, bytes) else str(line)
        if text.strip().startswith("error: "):
            self._error_line = text.strip().removeprefix("error: ")

    def _relay(self, line: str) -> None:
        """A line of the command's output on the shared driver: watched, then into
        the task's log.
        """
        self._watch(line)
        self.log.info("%s", line)

    def _get_hook(self):
        """The provider's hook, with each line of spark-submit's output seen by
        :meth:`_watch` too.
        """
        hook = super()._get_hook()
        process = hook._process_spark_submit_log

        def watched(lines):
            def each():
                for line in lines:
                    self._watch(line)
                    yield line

            return process(each())

        hook._process_spark_submit_log = watched
        return hook

    def _uses_shared_driver(self) -> bool:
        if not self.shares_driver or driver_mode() == "task":
            return False
        return _driver_here(self._get_hook())

    def driver_command(self, context: Any) -> tuple[Path, list[str], dict[str, str]]:
        """The shared driver of this task's DAG run: its address file, and the spark-submit argv
        and environment that start it (this task's own, with ``serve`` for the CLI command)."""
        from spark_jobs.service.submission import code_stamp, driver_dir, driver_key, machine

        hook = self._get_hook()
        hook._name = f"lakehouse-{self.pipeline}-{context['dag_run'].dag_id}"
        hook._application_args = ["serve"]
        env = dict(hook._env_vars or {})  # given to spark-submit's process in client mode
        warm = _keep_warm_s()
        # A warm driver serves the DAG's next runs too: it must have loaded the same pipeline code.
        run = None if warm else context["dag_run"].run_id
        # This machine's too: a task elsewhere (whose folder may be this one, shared)
        # starts its own.
        key = driver_key(
            context["dag_run"].dag_id,
            run,
            hook._build_spark_submit_command(self.application),
            env,
            code_stamp(),
            machine(),
        )
        address = driver_dir() / f"{key}.json"
        idle = str(warm) if warm else settings.DRIVER_IDLE.value()
        hook._application_args = [
            "serve",
            "--address",
            str(address),
            "--idle",
            idle,
            "--log",
            str(address.with_suffix(".log")),
        ]
        return address, hook._build_spark_submit_command(self.application), env

    def releases(self) -> bool:
        """Whether the driver ends after this task's command: ``releases_driver``, unless the
        driver of a stream or backfill DAG is kept warm for its next run."""
        return self.releases_driver and not (_keep_warm_s() and self.command in ("run", "backfill"))

    def _start_driver(self, address: Path, argv: list[str], env: dict[str, str]):
        from spark_jobs.service.submission import wait_for_address

        log = address.with_suffix(".log")
        with open(log, "ab") as output:
            # Its own session: the driver outlives this task (the next tasks of the run use it).
            process = subprocess.Popen(
                argv,
                env={**os.environ, **env},
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.log.info(
            "started the shared driver of this DAG run (spark-submit pid %s, log %s)",
            process.pid,
            log,
        )
        found = wait_for_address(address, lambda: process.poll() is None, timeout_s=600)
        if found is None:
            process.kill()
            tail = log.read_text(errors="replace")[-3000:]
            raise AirflowException(
                f"the shared driver did not start (exit {process.poll()}; log {log}):\n{tail}"
            )
        return found

    def _run_on_shared_driver(self, context: Any) -> None:
        from spark_jobs.service.submission import DriverAddress, DriverGone, send, starting

        address_file, argv, env = self.driver_command(context)

        def keep(sock) -> None:
            self._driver_socket = sock

        for _attempt in range(3):
            with starting(address_file):
                address = DriverAddress.read(address_file) or self._start_driver(
                    address_file, argv, env
                )
            self.log.info(
                "lakehouse %s on the shared driver (pid %s)",
                " ".join(self.application_args),
                address.pid,
            )
            try:
                code = send(
                    address,
                    {**self.call.to_wire(), "origin": current_origin()},
                    self.releases(),
                    self._relay,
                    on_connect=keep,
                )
            except DriverGone as gone:  # it was ending (idle): start another
                self.log.info("%s", gone)
                address_file.unlink(missing_ok=True)
                continue
            if code != 0:
                raise AirflowException(
                    f"lakehouse {' '.join(self.application_args)} exited {code} on the shared "
                    f"driver (pid {address.pid}, log {address.log})"
                )
            return
        raise AirflowException(
            f"no shared driver took the command (log {address_file.with_suffix('.log')})"
        )

    def on_kill(self) -> None:
        if self._driver_socket is not None:  # the driver ends when its client leaves mid-command
            with contextlib.suppress(OSError):
                self._driver_socket.shutdown(socket.SHUT_RDWR)
            return
        super().on_kill()


class DataDocsLink(BaseOperatorLink):
    """The gate's Great Expectations Data Docs page (the address its task pushed to XCom)."""

    name = "Data Docs"

    def get_link(self, operator, *, ti_key) -> str:
        from airflow.sdk.bases.xcom import BaseXCom as XCom

        return XCom.get_value(ti_key=ti_key, key="data_docs") or ""


class QualityGateOperator(PythonOperator):
    """A hop's quality gate (:func:`lakehouse_airflow.checks.quality_gate`), linking its
    Data Docs page.
    """

    operator_extra_links = (DataDocsLink(),)

    def __init__(self, *, pipeline: str, hop: str, run_id: str, **kwargs: Any):
        from lakehouse_airflow.checks import quality_gate

        super().__init__(
            python_callable=quality_gate,
            op_kwargs={"pipeline": pipeline, "hop": hop, "run_id": run_id},
            **kwargs,
        )
