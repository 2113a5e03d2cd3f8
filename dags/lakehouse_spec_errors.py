"""Pipeline specs that cannot become DAGs, as this file's import error in Airflow.

``lakehouse_pipelines.py`` builds the DAGs of every spec that loads and leaves the others out,
so one broken spec never hides the other pipelines. This file defines no DAG: it raises, naming
each left-out spec file and the reason, so the problem shows in the UI's import errors (and in
``airflow dags list-import-errors``) until the spec is fixed. (The word DAG above lets Airflow's
safe-mode scan read this file.)
"""

from lakehouse_airflow.dag_factory import raise_spec_problems

raise_spec_problems()
