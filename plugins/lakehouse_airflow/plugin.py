"""The Airflow plugin, registered through the distribution's ``airflow.plugins`` entry point.

Registers the lakehouse with Airflow's API server: the gate tasks' Data Docs extra link, and the
backfill DAG's timetable, the Lakehouse pages (docs/guides/lakehouse-page.md) as a FastAPI app shown
through external views: an entry in the navigation and a tab on every DAG's page; and listeners
that make an idle DAG processor and triggerer wake less often (``lakehouse_airflow.dag_processor``,
``lakehouse_airflow.triggerer``)."""

from airflow.plugins_manager import AirflowPlugin

from lakehouse_airflow import dag_processor, triggerer
from lakehouse_airflow.operators import DataDocsLink
from lakehouse_airflow.timetables import BackfillOnlyTimetable
from lakehouse_airflow.ui import URL_PREFIX, LazyApp
from lakehouse_airflow.versions import check_airflow

check_airflow()  # an unsupported Airflow: the plugin's import error says which lines are


class LakehousePlugin(AirflowPlugin):
    name = "lakehouse"
    operator_extra_links = [DataDocsLink()]
    timetables = [BackfillOnlyTimetable]  # the backfill DAG's: no scheduled runs
    listeners = [dag_processor, triggerer]  # on_starting: their idle loops
    fastapi_apps = [
        {
            "app": LazyApp("lakehouse_airflow.ui.app:app"),
            "url_prefix": URL_PREFIX,
            "name": "Lakehouse",
        }
    ]
    external_views = [
        {
            "name": "Lakehouse",
            "href": f"{URL_PREFIX.lstrip('/')}/",
            "destination": "nav",
            "url_route": "lakehouse",
        },
        {
            "name": "Lakehouse",
            "href": f"{URL_PREFIX.lstrip('/')}/dags/{{DAG_ID}}",
            "destination": "dag",
            "url_route": "lakehouse_dag",
        },
    ]
