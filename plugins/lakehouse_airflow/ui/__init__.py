"""The Lakehouse pages in Airflow's UI: a FastAPI app mounted at :data:`URL_PREFIX`.

The app itself (:mod:`lakehouse_airflow.ui.app`) imports Airflow's API security and FastAPI;
every Airflow process loads plugins, so the plugin registers :class:`LazyApp`, which imports
it on the API server's first request only.
"""

from __future__ import annotations

import importlib

URL_PREFIX = "/lakehouse"


class LazyApp:
    """An ASGI app that imports ``module:attribute`` when the first request arrives."""

    def __init__(self, target: str):
        self.target = target
        self._app = None

    def load(self):
        if self._app is None:
            module, _, attribute = self.target.partition(":")
            self._app = getattr(importlib.import_module(module), attribute)
        return self._app

    async def __call__(self, scope, receive, send) -> None:
        await self.load()(scope, receive, send)


def data_docs_address(base_url: str, pipeline: str, page_path: str) -> str:
    """The address of a gate's Data Docs page through the Lakehouse app (the gate
    tasks' extra link).
    """
    return f"{base_url.rstrip('/')}{URL_PREFIX}/pipelines/{pipeline}/quality/{page_path.rsplit('/', 1)[-1]}"  # noqa: E501
