"""The Lakehouse pages' HTML from their Jinja templates (``templates/``).

Apart from :mod:`lakehouse_airflow.ui.app` so that rendering a page imports neither Airflow nor
FastAPI: the app renders through it, and so can anything that only needs the HTML."""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape

TEMPLATES = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"),
                        autoescape=select_autoescape(["html"]))


def render(template: str, root: str = "", **values) -> str:
    """``template`` rendered for an app mounted at ``root`` (Airflow's own pages are one level up)."""
    return TEMPLATES.get_template(template).render(root=root, airflow=root.rsplit("/", 1)[0], **values)
