"""The architecture page's drawing (``images/architecture.svg``), from the checkout's own files.

One band per layer, top to bottom in the order imports point (a band imports only the bands
below it: ``tests/unit/test_layout.py`` holds that), one box per module, its name relative to the
layer's folder (a sub-folder's modules share its colour). Plain SVG text, the same for the same
modules, so ``make reference`` writes it and ``tests/unit/test_docs.py`` fails while it is stale,
as for the reference pages: adding, moving or renaming a module means drawing it again.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

# (band title, what it holds, the folders and files it draws, relative to the checkout)
LAYERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "entry points",
        "the CLI, spark-submit's script, the shared driver; the Airflow side (DAGs, operators, "
        "checks, pages), which imports only the service and the model",
        (
            "spark_jobs/cli.py",
            "spark_jobs/submit.py",
            "spark_jobs/shared_driver.py",
            "dags",
            "plugins/lakehouse_airflow",
        ),
    ),
    (
        "perform",
        "a call to its service function, lines, JSON, exit code",
        ("spark_jobs/perform.py",),
    ),
    ("service", "the front door: a thin facade", ("spark_jobs/service",)),
    ("engine", "Spark: sessions, hop runs, sources and sinks, gates", ("spark_jobs/engine",)),
    (
        "pipeline code, results",
        "transforms, a pipeline's own modules, what they import, the service's result types",
        (
            "spark_jobs/transforms",
            "spark_jobs/pipelines",
            "spark_jobs/authoring.py",
            "spark_jobs/results.py",
        ),
    ),
    (
        "control",
        "no JVM: status, rollback, maintenance plans, coordination, checks",
        ("spark_jobs/control",),
    ),
    ("logs", "no JVM: checkpoint, Delta and _ops files read and written", ("spark_jobs/logs",)),
    ("model", "no JVM: specs, kinds, settings, records, errors", ("spark_jobs/model",)),
)

WIDTH, LABEL, PAD, BOX_H, GAP, CHAR = 1400, 250, 14, 24, 6, 7.4
# A sub-folder's colour, in the order sub-folders are met (the layer's own modules: the first).
FILLS = ("#dbe7f3", "#e4efdc", "#f3e6d3", "#eadcf0", "#f5dde0", "#dcefee", "#efefd6")


def modules(root: Path, places: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(group, name)`` of each module under ``places``: the group is its sub-folder below the
    place ('' for the place's own), the name its path from there; ``__init__`` files left out."""
    found = []
    for place in places:
        path = root / place
        if path.is_file():
            found.append(("", path.name))
            continue
        for file in sorted(path.rglob("*.py")):
            relative = file.relative_to(path)
            if file.name == "__init__.py" or any(
                part == "__pycache__" or part.startswith(".") for part in relative.parts
            ):
                continue
            group = relative.parent.as_posix() if len(relative.parts) > 1 else ""
            prefix = f"{path.name}/" if len(places) > 1 else ""
            found.append((group, prefix + relative.as_posix()))
    return sorted(found, key=lambda item: (item[0] != "", item[0], item[1]))


def _band(title: str, note: str, boxes: list[tuple[str, str]], top: float) -> tuple[list, float]:
    """The SVG elements of one band starting at ``top``, and its height."""
    fills: dict[str, str] = {}
    x, y, parts = LABEL + PAD, top + PAD, []
    for group, name in boxes:
        width = CHAR * len(name) + 14
        if x + width > WIDTH - PAD:
            x, y = LABEL + PAD, y + BOX_H + GAP
        fill = fills.setdefault(group, FILLS[len(fills) % len(FILLS)])
        parts.append(
            f'<rect x="{x:.0f}" y="{y:.0f}" width="{width:.0f}" height="{BOX_H}" rx="3" '
            f'fill="{fill}" stroke="#7f93a8"/>'
            f'<text x="{x + 7:.0f}" y="{y + 16:.0f}">{escape(name)}</text>'
        )
        x += width + GAP
    words, lines, line = note.split(), [], ""
    for word in words:  # the note wrapped to the label column
        if len(line) + len(word) + 1 > 32:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    lines.append(line)
    height = max(y + BOX_H + PAD - top, 52 + 15 * len(lines))
    frame = (
        f'<rect x="4" y="{top:.0f}" width="{WIDTH - 8}" height="{height:.0f}" rx="6" '
        'fill="#f7f9fb" stroke="#42576e"/>'
        f'<text x="16" y="{top + 24:.0f}" class="title">{escape(title)}</text>'
    )
    notes = "".join(
        f'<text x="16" y="{top + 44 + 15 * index:.0f}" class="note">{escape(text)}</text>'
        for index, text in enumerate(lines)
    )
    return [frame + notes, *parts], height


def drawing(root: Path) -> str:
    """The whole SVG, for the checkout at ``root``."""
    elements, top = [], 40.0
    for title, note, places in LAYERS:
        parts, height = _band(title, note, modules(root, places), top)
        elements += parts
        top += height + 22
        if title != LAYERS[-1][0]:
            middle = WIDTH / 2
            elements.append(
                f'<path d="M{middle:.0f} {top - 20:.0f} v14" stroke="#42576e" stroke-width="2" '
                'marker-end="url(#down)"/>'
            )
    header = (
        '<text x="8" y="24" class="title">The package by layer: each band imports only the bands '
        "below it (a module imports no module of a band above, and no two modules import each "
        "other)</text>"
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{top:.0f}" '
        f'viewBox="0 0 {WIDTH} {top:.0f}" font-family="DejaVu Sans Mono, monospace" '
        'font-size="12">\n'
        '<defs><marker id="down" markerWidth="8" markerHeight="8" refX="4" refY="4" '
        'orient="auto"><path d="M0 0 L8 4 L0 8 z" fill="#42576e"/></marker>'
        "<style>.title{font-size:14px;font-weight:bold}.note{fill:#4a5a6a}</style></defs>\n"
        f'<rect width="{WIDTH}" height="{top:.0f}" fill="white"/>\n'
        + header
        + "\n"
        + "\n".join(elements)
        + "\n</svg>\n"
    )
