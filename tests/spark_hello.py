"""A Spark application for the cluster tests: prints a line only when it got
executors and ran a job.
"""

from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("hello").getOrCreate()
print("hello from the cluster:", spark.range(3).count(), flush=True)
spark.stop()
