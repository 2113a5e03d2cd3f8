"""The Lakehouse pages' HTML from their Jinja templates (``templates/``).

Apart from :mod:`lakehouse_airflow.ui.app` so that rendering a page imports neither Airflow nor
FastAPI: the app renders through it, and so can anything that only needs the HTML."""

from __future__ import annotations

import datetime as dt
import re
import time
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape

TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(["html"]),
)


def _moment(value) -> dt.datetime | None:
    """A time as the records and logs give it: ISO-8601 text (UTC when it names no zone), epoch
    seconds, or a datetime."""
    if value in (None, ""):
        return None
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, (int, float)):
        moment = dt.datetime.fromtimestamp(float(value), dt.UTC)
    else:
        try:
            moment = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def when(value) -> str:
    """``2026-01-31 08:38:48 UTC``: the time people read, with its zone ('-' when there is none)."""
    moment = _moment(value)
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "-"


def age(seconds) -> str:
    """A duration in one unit a person reads at a glance: ``45 s``, ``12 min``, ``3.5
    h``, ``2.0 d``.
    """
    if seconds is None:
        return "-"
    seconds = max(float(seconds), 0.0)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def ago(value) -> str:
    """``12 min ago``, from a time (:func:`when`'s kinds)."""
    moment = _moment(value)
    return f"{age(time.time() - moment.timestamp())} ago" if moment else "-"


def number(value) -> str:
    """A count with thousands separators (``12,480``)."""
    if value is None or value == "":
        return "-"
    if isinstance(value, float) and abs(value) >= 1000:
        return f"{value:,.0f}"  # 12,480, never 1.248e+04
    return (
        f"{value:,}"
        if isinstance(value, int)
        else f"{float(value):,.4g}"
        if isinstance(value, float)
        else str(value)
    )


_RUN = re.compile(r"^(?P<kind>[a-z_]+?)__(?P<time>\d{4}-\d\d-\d\dT[\d:.]+)")
_CLI_RUN = re.compile(r"^(?P<time>\d{8}T\d{6})Z-")


def run_label(run_id: str | None) -> str:
    """A run told apart from the others at a glance: its time (to the second) and its kind
    (``scheduled``, ``manual``, ``backfill``, ``cli``), not the start of its id."""
    text = str(run_id or "")
    if match := _RUN.match(text):
        moment = _moment(match["time"].split(".")[0])
        return f"{moment:%m-%d %H:%M:%S} {match['kind'].replace('_', ' ')}" if moment else text
    if match := _CLI_RUN.match(text):
        try:
            moment = dt.datetime.strptime(match["time"], "%Y%m%dT%H%M%S")
        except ValueError:  # a --run-id shaped like one, with no such date: the id as it is
            return text
        return f"{moment:%m-%d %H:%M:%S} cli"
    return text or "?"


def in_lake(path: str | None, home: str | None) -> str:
    """A path of the lake relative to it (``tables/silver/ad_views``); other paths as they are."""
    if not path:
        return "-"
    base = str(home or "").rstrip("/")
    return path[len(base) + 1 :] if base and path.startswith(base + "/") else path


def lake_name(home: str | None) -> str:
    """The lake as a heading names it: its last folder (or bucket prefix)."""
    return str(home or "").rstrip("/").rsplit("/", 1)[-1] or str(home or "")


TEMPLATES.filters.update(
    when=when,
    age=age,
    ago=ago,
    number=number,
    run_label=run_label,
    in_lake=in_lake,
    lake_name=lake_name,
)


def render(template: str, root: str = "", **values) -> str:
    """``template`` rendered for an app mounted at ``root`` (Airflow's own pages
    are one level up).
    """
    return TEMPLATES.get_template(template).render(
        root=root, airflow=root.rsplit("/", 1)[0], **values
    )
