"""The lakehouse's Spark side: pipeline specs, pure transforms, the runner and the CLI.

Importing this package (or :mod:`spark_jobs.model.spec`, :mod:`spark_jobs.model.lake`,
:mod:`spark_jobs.logs.checkpoint_log`, :mod:`spark_jobs.logs.delta_log`) starts no JVM and imports no
``pyspark``; Airflow's DAG files and light tasks rely on that.
"""

__version__ = "0.1.0"
