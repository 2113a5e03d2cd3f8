"""``__pipeline__`` end to end: sample files, every hop run once, each table equal to what the
files say, computed here in plain Python. Run it with pytest where the platform is installed:
``pytest <this file>`` (it points ``LAKEHOUSE_PIPELINES`` at the folder holding this pipeline's)."""

from __future__ import annotations

import csv
import json
from collections import Counter
from decimal import Decimal
from pathlib import Path

KINDS = ("a", "b", "c")
WINDOW_MS = 60_000


def _valid(event: dict) -> bool:
    return (
        isinstance(event.get("id"), str)
        and event["id"] != ""
        and event.get("kind") in KINDS
        and isinstance(event.get("amount"), (int, float))
        and isinstance(event.get("event_time"), int)
    )


def _number(text: str):
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _events(landing: Path) -> tuple[list[dict], int]:
    """The valid events of the landing files (JSON lines, or CSV files with a header) and the
    number of invalid lines."""
    events, invalid = [], 0
    for path in sorted(landing.glob("*.json")):
        for line in path.read_text().splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                invalid += 1
                continue
            if isinstance(event, dict) and _valid(event):
                events.append(event)
            else:
                invalid += 1
    for path in sorted(landing.glob("*.csv")):
        header, *rows = list(csv.reader(path.read_text().splitlines()))
        for row in rows:
            event = {name: _number(value) for name, value in zip(header, row, strict=False)}
            if len(row) == len(header) and _valid(event):
                events.append(event)
            else:
                invalid += 1
    return events, invalid


def test_sample_files_run_through_every_hop(tmp_path, monkeypatch):
    from spark_jobs import service
    from spark_jobs.engine.session import build_session

    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(Path(__file__).resolve().parents[1]))
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "lake"))
    service.generate(
        "__pipeline__", 600, files=2, seed=1, start_ms=1_772_323_200_000, bad_fraction=0.05
    )
    service.run("__pipeline__", progress=lambda line: None).raise_for_gate()

    events, invalid = _events(tmp_path / "lake" / "landing" / "__pipeline__")
    assert events and invalid
    spark = build_session("test-__pipeline__")
    table = lambda relative: spark.read.format("delta").load(str(tmp_path / "lake" / relative))  # noqa: E731
    assert sorted(row.id for row in table("tables/bronze/__pipeline__").collect()) == sorted(
        e["id"] for e in events
    )
    assert table("tables/quarantine/__pipeline__").count() == invalid
    positive = [event for event in events if Decimal(str(event["amount"])) > 0]
    assert sorted(row.id for row in table("tables/silver/__pipeline__").collect()) == sorted(
        e["id"] for e in positive
    )
    expected: Counter = Counter()
    totals: Counter = Counter()
    for event in positive:
        key = (event["kind"], event["event_time"] - event["event_time"] % WINDOW_MS)
        expected[key] += 1
        totals[key] += Decimal(str(event["amount"]))
    gold = {
        (row.kind, int(row.window_start.timestamp() * 1000)): (row.events, row.amount)
        for row in table("tables/gold/__pipeline___per_minute").collect()
    }
    assert gold == {key: (count, totals[key]) for key, count in expected.items()}
