"""``ad_events`` end to end: sample files, every hop run once with its quality gate, each table
equal to what the files say, computed here in plain Python. Run it with pytest where the
platform is installed: ``pytest <this file>`` (it points ``LAKEHOUSE_PIPELINES`` at the folder
holding this pipeline's)."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

EVENT_TYPES = ("view", "click", "purchase")
FIELDS = ("user_id", "page_id", "ad_id", "ad_type", "event_type", "ip_address")
WINDOW_MS = 10_000


def _valid(line: str) -> dict | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if not isinstance(event, dict) or not all(
        isinstance(event.get(name, ""), str) for name in FIELDS
    ):
        return None
    if not event.get("ad_id") or event.get("event_type") not in EVENT_TYPES:
        return None
    time = event.get("event_time")
    return event if isinstance(time, int) and not isinstance(time, bool) else None


def test_sample_files_run_through_every_hop(tmp_path, monkeypatch):
    from spark_jobs import service
    from spark_jobs.engine.session import build_session

    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(Path(__file__).resolve().parents[1]))
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "lake"))
    monkeypatch.delenv("LAKEHOUSE_QUALITY", raising=False)
    service.generate(
        "ad_events", 800, files=2, seed=1, start_ms=1_772_323_200_000, bad_fraction=0.03
    )
    service.run("ad_events", progress=lambda line: None).raise_for_gate()

    lines = [
        line
        for path in sorted((tmp_path / "lake" / "landing" / "ad_events").glob("*.json"))
        for line in path.read_text().splitlines()
    ]
    events = [event for event in map(_valid, lines) if event is not None]
    assert events and len(events) < len(lines)
    with open(tmp_path / "lake" / "landing" / "campaigns" / "campaigns.csv") as handle:
        campaign_of = {row["ad_id"]: row["campaign_id"] for row in csv.DictReader(handle)}

    spark = build_session("test-ad_events")
    table = lambda relative: spark.read.format("delta").load(str(tmp_path / "lake" / relative))  # noqa: E731
    assert sorted(row.user_id for row in table("tables/bronze/ad_events").collect()) == sorted(
        e["user_id"] for e in events
    )
    assert table("tables/quarantine/ad_events").count() == len(lines) - len(events)
    views = [event for event in events if event["event_type"] == "view"]
    silver = sorted(
        (row.ad_id, row.event_time, row.campaign_id)
        for row in table("tables/silver/ad_views").collect()
    )
    assert silver == sorted(
        (e["ad_id"], e["event_time"], campaign_of.get(e["ad_id"])) for e in views
    )
    expected = Counter(
        (campaign_of[e["ad_id"]], e["event_time"] - e["event_time"] % WINDOW_MS)
        for e in views
        if e["ad_id"] in campaign_of
    )
    gold = {
        (row.campaign_id, int(row.window_start.timestamp() * 1000)): row.views
        for row in table("tables/gold/campaign_views_10s").collect()
    }
    assert gold == dict(expected)
