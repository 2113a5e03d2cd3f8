"""Airflow side of the lakehouse: a hook that builds spark-submit jobs, thin operators, the
"new data?" check and the DAG factory. Nothing here imports pyspark or starts a JVM."""
