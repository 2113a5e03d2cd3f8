"""Builds what ``spark-submit`` needs to run the ``lakehouse`` CLI as a Spark application.

Like the official providers, the hook owns the knowledge (paths, jars, the shipped package)
and the operators stay thin. Everything here runs at task execution, never at DAG parse.
"""

from __future__ import annotations

import hashlib
import os
import sys
import zipfile
from pathlib import Path

import spark_jobs
from spark_jobs.model import settings
from spark_jobs.model.settings import cache_dir


class LakehouseSparkHook:
    """Arguments for running ``spark_jobs`` through ``SparkSubmitOperator``.

    :param python: the interpreter for the Spark driver and executors (default: this one,
        which has the package and its dependencies installed).
    """

    def __init__(self, python: str | None = None):
        self.python = python or sys.executable

    @property
    def application(self) -> str:
        """The entry script spark-submit runs: the same CLI as ``lakehouse``."""
        return str(Path(spark_jobs.__file__).with_name("submit.py"))

    def package_archive(self) -> str:
        """A zip of the ``spark_jobs`` package for ``--py-files``, named by its content hash.

        Shipping it lets a Spark standalone (or YARN, Kubernetes) cluster's executors import
        the same code; rebuilding is skipped when the sources did not change.
        """
        package = Path(spark_jobs.__file__).parent
        sources = sorted(
            path
            for path in package.rglob("*")
            if path.is_file() and "__pycache__" not in path.parts
        )
        digest = hashlib.sha256()
        for path in sources:
            digest.update(str(path.relative_to(package)).encode())
            digest.update(path.read_bytes())
        target = cache_dir() / "dist" / f"spark_jobs-{digest.hexdigest()[:12]}.zip"
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            with zipfile.ZipFile(staging, "w", zipfile.ZIP_DEFLATED) as archive:
                for path in sources:
                    archive.write(path, str(Path("spark_jobs") / path.relative_to(package)))
            staging.replace(target)
        return str(target)

    def jars(self) -> str:
        """The cached Delta jars as spark-submit's comma-separated ``--jars``."""
        from spark_jobs.service import submission

        return ",".join(str(jar) for jar in submission.jars())

    def conf(self, master: str = "local[*]", driver_here: bool = True) -> dict[str, str]:
        """Spark confs every lakehouse job is submitted with to ``master`` (the driver's JVM maps
        the class-data sharing archive when ``make setup`` built one). A driver that runs here
        (client mode) gets the address of :func:`~spark_jobs.model.settings.driver_addresses`: a
        :class:`UsageError` for a cluster elsewhere without one. One the cluster places (its
        deploy mode ``cluster``, Kubernetes) gets none: the cluster gives it its own."""
        from spark_jobs.service import submission

        java_options = submission.driver_java_options()
        addresses = settings.driver_addresses(master) if driver_here else {}
        return {
            **submission.delta_confs(),
            **({"spark.driver.extraJavaOptions": java_options} if java_options else {}),
            "spark.pyspark.python": self.python,
            "spark.pyspark.driver.python": self.python,
            **{key: value for key, value in addresses.items() if key.startswith("spark.")},
            "spark.ui.enabled": settings.SPARK_UI.value(),
        }

    def properties_file(self) -> str | None:
        """A cluster's properties file (``make run-cluster``'s holds Spark's shared secret), given
        to spark-submit as ``--properties-file`` so the secret is on no command line."""
        return settings.SPARK_PROPERTIES.value() or None

    def env_vars(self, master: str = "local[*]", driver_here: bool = True) -> dict[str, str]:
        """Environment the driver needs: where the lake is, and the address Spark binds to (a
        driver the cluster places binds where it runs)."""
        from spark_jobs.model.lake import lakehouse_home
        from spark_jobs.model.settings import pipelines_dirs, quality_dir

        suites = quality_dir()
        return {
            "LAKEHOUSE_HOME": lakehouse_home(),
            # Absolute: the driver may run in another working directory.
            "LAKEHOUSE_PIPELINES": os.pathsep.join(str(folder) for folder in pipelines_dirs()),
            **({"LAKEHOUSE_QUALITY": str(suites)} if suites else {}),
            **(
                {"SPARK_LOCAL_IP": settings.driver_addresses(master)["SPARK_LOCAL_IP"]}
                if driver_here
                else {}
            ),
            "PYTHONUNBUFFERED": "1",
        }
