"""``plugins/lakehouse_airflow/ui/charts.py``: the hop page's bar charts, drawn as inline SVG and
read back here as XML (the module imports nothing of Airflow; it is the plugin's, so it is tested
with it). The hop page inserts each chart unescaped, so the chart escapes what it draws: run ids
and labels come from users. Which charts the page shows, and their bar counts on a real lake,
are in ``test_ui.py``."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from lakehouse_airflow.ui.charts import bar_chart

pytestmark = [pytest.mark.unit, pytest.mark.airflow]

SVG = "{http://www.w3.org/2000/svg}"


def _svg(markup: str) -> ET.Element:
    """The chart as XML: parsing fails on anything not escaped."""
    root = ET.fromstring(markup)
    assert root.tag == f"{SVG}svg"
    return root


def _bars(root: ET.Element) -> list[ET.Element]:
    return root.findall(f"{SVG}rect")


def _axis_labels(root: ET.Element) -> list[ET.Element]:
    """The labels under the bars (the tick texts on the left have no ``text-anchor`` middle)."""
    return [
        text
        for text in root.findall(f"{SVG}text")
        if text.get("text-anchor") == "middle" and "empty" not in (text.get("class") or "")
    ]


def test_bars_keep_their_slots_and_stand_on_the_baseline_in_proportion_to_their_values():
    points = [("batch 0", 250.0), ("batch 1", None), ("batch 2", 1000.0), ("batch 3", 12.5)]
    root = _svg(bar_chart("Rows per second", points, " rows/s", chart_id="rate"))
    assert root.get("id") == "rate" and root.find(f"{SVG}title").text == "Rows per second"
    drawn = [(label, value) for label, value in points if value is not None]
    bars = _bars(root)
    # The None slot has no bar; each bar says what it shows, in order.
    assert [(bar.get("data-label"), float(bar.get("data-value"))) for bar in bars] == drawn
    assert [bar.find(f"{SVG}title").text.split(":")[0] for bar in bars] == [
        label for label, _value in drawn
    ]
    grid = sorted(float(line.get("y1")) for line in root.findall(f"{SVG}line"))
    top, baseline = grid[0], grid[-1]
    heights = [float(bar.get("height")) for bar in bars]
    for bar, height in zip(bars, heights, strict=True):
        assert float(bar.get("y")) + height == pytest.approx(baseline, abs=0.11)
    largest = max(value for _label, value in drawn)
    assert max(heights) == pytest.approx(baseline - top, abs=0.11)
    for height, (label, value) in zip(heights, drawn, strict=True):
        assert height / max(heights) == pytest.approx(value / largest, abs=0.002), label
    # Every slot, the empty one too, has its label; a bar is centred on its slot's label.
    labels = {text.text: float(text.get("x")) for text in _axis_labels(root)}
    assert list(labels) == [label for label, _value in points]
    for bar in bars:
        centre = float(bar.get("x")) + float(bar.get("width")) / 2
        assert centre == pytest.approx(labels[bar.get("data-label")], abs=0.11)
    xs = list(labels.values())
    steps = [right - left for left, right in zip(xs, xs[1:])]
    assert steps == pytest.approx([steps[0]] * len(steps)) and steps[0] > 0
    # the scale's top tick is the largest value, with the unit
    assert "1000 rows/s" in [text.text for text in root.findall(f"{SVG}text")]


def test_a_chart_without_a_value_says_why_and_draws_no_bar():
    why = "no run was checked by a suite yet"
    for points in ([], [("run a", None), ("run b", None)]):
        root = _svg(bar_chart("Quality rules passed", points, "%", empty=why))
        assert _bars(root) == [], points
        said = [text.text for text in root.findall(f"{SVG}text") if "empty" in text.get("class")]
        assert said == [why], points
    root = _svg(bar_chart("Quality rules passed", [("run a", 0.0)], "%", empty=why))
    assert len(_bars(root)) == 1 and why not in ET.tostring(root, encoding="unicode")


def test_text_from_users_is_escaped_and_a_long_label_is_cut_under_the_axis_only():
    """A run id a person chose (``--run-id``) reaches the label: the chart stays one well-formed
    SVG element whatever it holds, and shows it as written."""
    label = 'r1"><script>alert(1)</script>&amp; a run id longer than the axis allows'
    title, unit = "Rows <per> second & more", ' "rows"'
    empty = "<b>nothing</b> & none"
    root = _svg(bar_chart(title, [(label, 5.0)], unit, chart_id='x"y', empty=empty))
    assert root.get("id") == 'x"y' and root.find(f"{SVG}title").text == title
    assert [element.tag for element in root.iter()].count(f"{SVG}svg") == 1
    assert not any(element.tag.endswith("script") for element in root.iter())
    (bar,) = _bars(root)
    assert bar.get("data-label") == label
    assert bar.find(f"{SVG}title").text == f"{label}: 5{unit}"
    (shown,) = _axis_labels(root)
    assert label.startswith(shown.text) and 0 < len(shown.text) < len(label)
    root = _svg(bar_chart(title, [(label, None)], unit, empty=empty))
    assert empty in [text.text for text in root.findall(f"{SVG}text")]
