"""Lakehouse pipelines: a stream DAG and a backfill DAG per spec in include/pipelines.

The DAGs are built from the pipeline specs by ``lakehouse_airflow.dag_factory``; parsing
this file imports no pyspark and starts no JVM.
"""

from lakehouse_airflow.dag_factory import build_all

globals().update(build_all())
