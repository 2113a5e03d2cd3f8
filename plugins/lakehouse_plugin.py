"""Registers the lakehouse's operator extra links with Airflow (the API server shows them)."""

from airflow.plugins_manager import AirflowPlugin
from lakehouse_airflow.operators import DataDocsLink


class LakehousePlugin(AirflowPlugin):
    name = "lakehouse"
    operator_extra_links = [DataDocsLink()]
