"""The Airflow lines the package supports (its metadata's ``apache-airflow-core`` range), checked
where Airflow first imports it: the DAG factory and the plugin. An Airflow outside them gets one
line naming the fix instead of an error deep inside an operator."""

from __future__ import annotations

SUPPORTED = ((3, 2), (3, 3))


class UnsupportedAirflow(RuntimeError):
    """The installed Airflow is not one of :data:`SUPPORTED`."""


def check_airflow(version: str | None = None) -> None:
    """:class:`UnsupportedAirflow` unless ``version`` (default: the installed Airflow's) is of a
    supported line."""
    if version is None:
        from importlib.metadata import version as installed

        version = installed("apache-airflow-core")
    line = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
    if line not in SUPPORTED:
        lines = " and ".join(".".join(map(str, each)) for each in SUPPORTED)
        raise UnsupportedAirflow(
            f"Airflow {version} is not supported by lakehouse-platform (Airflow {lines} are): "
            f"install a supported Airflow, or a release of lakehouse-platform made for yours"
        )
