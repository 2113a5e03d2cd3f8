"""Bar charts as inline SVG, drawn on the server: the page needs no script, font or style from
elsewhere (it works on a machine with no internet)."""

from __future__ import annotations

from html import escape

WIDTH, HEIGHT = 640, 220
LEFT, RIGHT, TOP, BOTTOM = 64, 12, 28, 44


def _tick(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value >= 100 or value == int(value):
        return f"{value:.0f}"
    return f"{value:.2f}"


def bar_chart(
    title: str,
    points: list[tuple[str, float | None]],
    unit: str = "",
    chart_id: str = "",
    empty: str = "nothing yet",
) -> str:
    """``points``: (label, value) in order; a None value leaves its slot empty. Each bar carries
    its label and value as a tooltip (``<title>``) and ``data-value`` attributes. ``empty``: what
    the chart says when it has no bar (why there is none)."""
    values = [value for _label, value in points if value is not None]
    top = max(values, default=0.0) or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / max(len(points), 1)
    parts = [
        f'<svg class="chart" id="{escape(chart_id)}" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        f'<text x="{LEFT}" y="16" class="chart-title">{escape(title)}</text>',
    ]
    for fraction in (0.0, 0.5, 1.0):
        y = TOP + plot_h * (1 - fraction)
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
        )
        parts.append(
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">'
            f"{escape(_tick(top * fraction))}{escape(unit)}</text>"
        )
    every = max(1, len(points) // 12)
    for index, (label, value) in enumerate(points):
        x = LEFT + index * slot
        if value is not None:
            height = plot_h * value / top
            parts.append(
                f'<rect x="{x + slot * 0.15:.1f}" y="{TOP + plot_h - height:.1f}" '
                f'width="{slot * 0.7:.1f}" height="{height:.1f}" class="bar" '
                f'data-label="{escape(label)}" data-value="{value}">'
                f"<title>{escape(label)}: {escape(_tick(value))}{escape(unit)}</title></rect>"
            )
        if index % every == 0:
            parts.append(
                f'<text x="{x + slot / 2:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle" '
                f'class="tick">{escape(label[:18])}</text>'
            )
    if not values:
        parts.append(
            f'<text x="{LEFT + plot_w / 2}" y="{TOP + plot_h / 2}" text-anchor="middle" '
            'class="tick empty">'
            f"{escape(empty)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
