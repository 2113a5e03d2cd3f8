"""The lakehouse platform package: pipeline specs, the layers that run them, and the CLI.

Layers, each importing only those below it (docs/architecture.md): :mod:`spark_jobs.model`,
:mod:`spark_jobs.logs`, :mod:`spark_jobs.control` (no JVM), :mod:`spark_jobs.engine` (Spark),
:mod:`spark_jobs.service` and :mod:`spark_jobs.cli`; :mod:`spark_jobs.transforms` and
:mod:`spark_jobs.pipelines` beside the engine. Importing this package, or any layer below the
engine, starts no JVM and imports no ``pyspark``: Airflow's DAG files and light tasks rely on that.
"""

__version__ = "0.1.0"
