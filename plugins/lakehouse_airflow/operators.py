"""Thin operators: each runs one ``lakehouse`` CLI command as a Spark application."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import BaseOperatorLink

from lakehouse_airflow.hooks import LakehouseSparkHook


class LakehouseSparkOperator(SparkSubmitOperator):
    """Submit ``lakehouse <command> <pipeline> <arguments>`` through the ``spark_default``
    connection (``local[*]``, ``spark://...``, ``k8s://...``).

    Jars, the shipped package and the interpreter are resolved in :meth:`execute`, so DAG
    parsing reads no file and starts no JVM.

    :param command: ``run`` or ``backfill``.
    :param pipeline: the pipeline spec's name.
    :param arguments: further CLI arguments (templated), as a list: never a shell string.
    :param announces: the hop whose table asset gets an event when the command wrote rows to it
        (:func:`lakehouse_airflow.assets.announce`; the run is the ``--run-id=`` argument's).
    """

    template_fields: Sequence[str] = tuple(SparkSubmitOperator.template_fields)

    def __init__(self, *, command: str, pipeline: str, arguments: Sequence[str] = (), announces: str | None = None,
                 **kwargs: Any):
        kwargs.setdefault("name", f"lakehouse-{pipeline}-{command}")
        super().__init__(application_args=[command, pipeline, *arguments], **kwargs)
        self.command = command
        self.pipeline = pipeline
        self.announces = announces

    def execute(self, context: Any) -> None:
        hook = LakehouseSparkHook()
        self.application = hook.application
        self.py_files = hook.package_archive()
        self.jars = hook.jars()
        self.conf = {**hook.conf(), **(self.conf or {})}
        self.properties_file = self.properties_file or hook.properties_file()
        self.env_vars = {**hook.env_vars(), **(self.env_vars or {})}
        self.application_args = [str(argument) for argument in self.application_args]
        super().execute(context)
        if self.announces:
            from lakehouse_airflow.assets import announce

            run_id = next(arg.split("=", 1)[1] for arg in self.application_args if arg.startswith("--run-id="))
            announce(context.get("outlet_events"), self.pipeline, self.announces, run_id)


class DataDocsLink(BaseOperatorLink):
    """The gate's Great Expectations Data Docs page (the address its task pushed to XCom)."""

    name = "Data Docs"

    def get_link(self, operator, *, ti_key) -> str:
        from airflow.sdk.bases.xcom import BaseXCom as XCom

        return XCom.get_value(ti_key=ti_key, key="data_docs") or ""


class QualityGateOperator(PythonOperator):
    """A hop's quality gate (:func:`lakehouse_airflow.checks.quality_gate`), linking its Data Docs page."""

    operator_extra_links = (DataDocsLink(),)

    def __init__(self, *, pipeline: str, hop: str, run_id: str, **kwargs: Any):
        from lakehouse_airflow.checks import quality_gate

        super().__init__(python_callable=quality_gate, op_kwargs={"pipeline": pipeline, "hop": hop, "run_id": run_id},
                         **kwargs)
