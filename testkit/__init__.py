"""Helpers the tests and the benchmarks share (expected values in plain Python, lakes, Airflow
in-process and over its REST API, the model tests' sequences). Not part of the distribution;
it never imports ``tests``."""
