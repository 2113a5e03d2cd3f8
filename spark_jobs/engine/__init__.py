"""The engine layer: the Spark session, the hop run (source, transform, sink, record) and the
quality gate. The only layer (with the transforms and pipeline modules) that imports pyspark,
delta or great_expectations; nothing Airflow imports at parse time reaches it."""
