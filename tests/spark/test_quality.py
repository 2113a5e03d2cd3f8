"""Quality gates: GX suites checked on each run's increment, with warn / drop / fail policies.

Expected counts come from the landing lines we write, in plain Python.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from spark_jobs.cli import main
from testkit.expected import valid_event
from testkit.lakes import suites_copy

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.quality]

CAMPAIGN_RULE = "expect_column_values_to_not_be_null(campaign_id)"


@pytest.fixture
def suites(tmp_path, monkeypatch):
    """A copy of the suites under $LAKEHOUSE_QUALITY; ``set_policy(hop, rule, policy)`` edits it."""
    folder = tmp_path / "quality"
    suites_copy(folder)
    monkeypatch.setenv("LAKEHOUSE_QUALITY", str(folder))

    def set_policy(hop: str, rule: str, policy: str) -> None:
        path = folder / "ad_events" / f"{hop}.json"
        suite = json.loads(path.read_text())
        for expectation in suite["expectations"]:
            target = expectation["kwargs"].get("column") or ",".join(
                expectation["kwargs"].get("column_list", [])
            )
            if f"{expectation['type']}({target})" == rule:
                expectation["meta"]["policy"] = policy
        path.write_text(json.dumps(suite))

    return set_policy


def _landing_batch(home: Path, seed: int, orphans: int) -> list[str]:
    """Good events, plus ``orphans`` views of an ad no campaign has; returns the orphan lines."""
    assert (
        main(
            [
                "generate",
                "ad_events",
                "--events",
                "300",
                "--files",
                "2",
                "--seed",
                str(seed),
                "--start",
                f"2026-04-02T00:{seed:02d}:00",
            ]
        )
        == 0
    )
    lines = [
        json.dumps(
            {
                "user_id": f"u{seed}-{n}",
                "page_id": "p",
                "ad_id": "ad-without-campaign",
                "ad_type": "mail",
                "event_type": "view",
                "event_time": 1_775_088_000_000 + seed * 60_000 + n,
                "ip_address": "1.2.3.4",
            }
        )
        for n in range(orphans)
    ]
    if lines:
        landing = home / "landing" / "ad_events"
        (landing / f".orphans-{seed}.tmp").write_text("".join(line + "\n" for line in lines))
        (landing / f".orphans-{seed}.tmp").rename(landing / f"orphans-{seed}.json")
    return lines


def _summary(home: Path, run_id: str, hop: str) -> dict:
    return json.loads(
        (home / "_ops" / "quality" / "ad_events" / f"{run_id}.{hop}.json").read_text()
    )


def _counted_as_written(spark, home: Path, run_id: str, hop_name: str) -> bool:
    """Whether the gate took its counts as the run wrote its rows; either way its result must
    equal the one computed from the rows read back (the gate as it is without counts)."""
    from spark_jobs.engine import quality
    from spark_jobs.engine.expectations import without_run_identity
    from spark_jobs.service import open_lake

    summary = _summary(home, run_id, hop_name)
    result = json.loads(Path(summary["result"]).read_text())
    record = json.loads((home / "_ops/runs/ad_events" / f"{run_id}.{hop_name}.json").read_text())
    lake = open_lake("ad_events")
    again = quality.check(spark, lake, lake.spec.hop(hop_name), dict(record, counted=None))
    assert again["counted_as_written"] is False
    assert without_run_identity(
        json.loads(Path(again["result"]).read_text())
    ) == without_run_identity(result), hop_name
    assert {key: again[key] for key in ("gate", "rows", "failed", "warned", "rules")} == {
        key: summary[key] for key in ("gate", "rows", "failed", "warned", "rules")
    }
    return summary["counted_as_written"]


def _rule(summary: dict, name: str) -> dict:
    return next(rule for rule in summary["rules"] if rule["rule"] == name)


def _silver_views(spark, home: Path) -> list[tuple]:
    frame = spark.read.format("delta").load(str(home / "tables/silver/ad_views"))
    return sorted(
        (row.ad_id, row.event_time) for row in frame.select("ad_id", "event_time").collect()
    )


def _views_in_landing(home: Path, name_part: str = "") -> list[tuple]:
    """(ad_id, event_time) of every valid view in the landing files whose name has ``name_part``."""
    folder = home / "landing" / "ad_events"
    found = []
    for path in folder.iterdir():
        if path.name.startswith((".", "_")) or name_part not in path.name:
            continue
        for line in path.read_text().splitlines():
            event = valid_event(line)
            if event and event["event_type"] == "view":
                found.append((event["ad_id"], int(event["event_time"])))
    return sorted(found)


@pytest.mark.slow
def test_policies_on_each_runs_increment(spark, lake_home, suites, capsys):
    # warn: recorded, the gate passes, the rows stay.
    suites("silver", CAMPAIGN_RULE, "warn")
    orphans = _landing_batch(lake_home, 1, orphans=7)
    # One file per batch: the two generated files share their 10-second windows, so gold's
    # increment has windows that two batches of this run updated (one row each in the check).
    assert main(["run", "ad_events", "--run-id", "r1", "--max-files-per-trigger", "1"]) == 0
    gold = _summary(lake_home, "r1", "gold")
    assert gold["gate"] == "passed", gold
    assert (
        len(json.loads((lake_home / "_ops/runs/ad_events/r1.gold.json").read_text())["batch_ids"])
        >= 2
    )
    summary = _summary(lake_home, "r1", "silver")
    assert summary["gate"] == "passed" and summary["warned"] == [CAMPAIGN_RULE]
    assert _rule(summary, CAMPAIGN_RULE)["failing"] == len(orphans) == 7
    assert _silver_views(spark, lake_home) == _views_in_landing(lake_home)
    record = json.loads((lake_home / "_ops/runs/ad_events/r1.silver.json").read_text())
    assert record["quality"]["gate"] == "passed" and record["quality"]["warned"] == [CAMPAIGN_RULE]
    # Counted as written, the gate reads nothing back, unless a rule failed (its first failing
    # values are read from the rows) or gold's counts do not add up (two batches changed a window).
    assert len(record["batch_ids"]) >= 2 and record["counted"]["batches"] == len(
        record["batch_ids"]
    )
    assert not _counted_as_written(spark, lake_home, "r1", "silver")
    assert not _counted_as_written(spark, lake_home, "r1", "gold")

    # fail, on a clean increment: the earlier run's accepted orphans are not this run's rows.
    suites("silver", CAMPAIGN_RULE, "fail")
    _landing_batch(lake_home, 2, orphans=0)
    assert main(["run", "ad_events", "--run-id", "r2", "--max-files-per-trigger", "1"]) == 0
    summary = _summary(lake_home, "r2", "silver")
    assert summary["gate"] == "passed" and _rule(summary, CAMPAIGN_RULE)["failing"] in (0, None)
    # seed 2's file only
    assert summary["rows"] == len(_views_in_landing(lake_home, "20260402T000200")) > 0
    # Silver's counts of two batches add up; gold's two batches may have changed one window twice.
    assert _counted_as_written(spark, lake_home, "r2", "silver") and not _counted_as_written(
        spark, lake_home, "r2", "gold"
    )

    # drop: the failing rows go to silver's quarantine with the rule; written + quarantined = read.
    suites("silver", CAMPAIGN_RULE, "drop")
    orphans = _landing_batch(lake_home, 3, orphans=5)
    capsys.readouterr()
    assert main(["run", "ad_events", "--run-id", "r3"]) == 0
    # The gate says how many rows the rule dropped, and the run record holds it.
    assert f"ok     drop  {CAMPAIGN_RULE} dropped {len(orphans)}" in capsys.readouterr().err
    record = json.loads((lake_home / "_ops/runs/ad_events/r3.silver.json").read_text())
    assert record["rows_dropped_by_rule"] == {CAMPAIGN_RULE: len(orphans)}
    assert _rule(_summary(lake_home, "r3", "silver"), CAMPAIGN_RULE)["dropped"] == len(orphans)
    quarantine = (
        spark.read.format("delta").load(str(lake_home / "tables/quarantine/ad_views")).collect()
    )
    assert sorted(json.loads(row.raw_line)["user_id"] for row in quarantine) == sorted(
        json.loads(line)["user_id"] for line in orphans
    )
    assert {row.reason for row in quarantine} == {f"quality: {CAMPAIGN_RULE}"}
    stored = _silver_views(spark, lake_home) + sorted(
        (json.loads(r.raw_line)["ad_id"], r.event_time) for r in quarantine
    )
    assert sorted(stored) == _views_in_landing(lake_home)
    assert _summary(lake_home, "r3", "silver")["gate"] == "passed"
    # The rows kept, counted as written; gold's one batch, counted before its MERGE.
    assert _counted_as_written(spark, lake_home, "r3", "silver") and _counted_as_written(
        spark, lake_home, "r3", "gold"
    )

    # A run with nothing new: its gates take no Spark job (nothing was written to check).
    assert main(["run", "ad_events", "--run-id", "r3-idle"]) == 0
    idle = json.loads((lake_home / "_ops/runs/ad_events/r3-idle.silver.json").read_text())
    assert (
        idle["rows_out"] == 0
        and _summary(lake_home, "r3-idle", "silver")["note"] == "no rows written: nothing to check"
    )
    from spark_jobs.engine import quality
    from spark_jobs.service import open_lake

    lake = open_lake("ad_events")
    spark.sparkContext.setJobGroup("idle-gate", "the gate of a run that wrote nothing")
    try:
        assert quality.check(spark, lake, lake.spec.hop("silver"), idle)["gate"] == "passed"
        assert spark.sparkContext.statusTracker().getJobIdsForGroup("idle-gate") == []
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)

    # fail: the gate fails, the hops below do not run, the message says how to undo.
    suites("silver", CAMPAIGN_RULE, "fail")
    orphans = _landing_batch(lake_home, 4, orphans=3)
    capsys.readouterr()
    assert main(["run", "ad_events", "--run-id", "r4"]) == 1
    err = capsys.readouterr().err
    assert "quality gate of silver failed" in err and "--hop silver --to-run r4" in err
    summary = _summary(lake_home, "r4", "silver")
    assert summary["gate"] == "failed" and _rule(summary, CAMPAIGN_RULE)["failing"] == 3
    assert not (lake_home / "_ops/runs/ad_events/r4.gold.json").exists()

    assert main(["status", "ad_events", "--json"]) == 0
    silver = next(
        hop for hop in json.loads(capsys.readouterr().out)["hops"] if hop["hop"] == "silver"
    )
    assert silver["last_run"]["run_id"] == "r4" and silver["last_run"]["quality"]["failed"] == [
        CAMPAIGN_RULE
    ]

    # The CLI's own check of that run says the same, and the Data Docs page shows it.
    assert main(["quality", "ad_events", "--hop", "silver", "--run", "r4", "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed["failed"] == [CAMPAIGN_RULE] and _rule(printed, CAMPAIGN_RULE)["failing"] == 3
    _assert_data_docs_render(Path(printed["data_docs"]), "ad_events.silver", CAMPAIGN_RULE)
    results = lake_home / "_ops" / "quality" / "ad_events"
    summaries = [
        path
        for path in results.glob("*.json")
        if not path.name.endswith(".result.json") and not path.name.startswith("r3-idle.")
    ]
    # every hop of r1..r4 but r4's gold (r3-idle's gates checked nothing)
    assert len(summaries) == 3 * 4 - 1
    # each validated run has its GX result; only r4's silver page is rendered (by the
    for path in summaries:
        summary = json.loads(path.read_text())  # CLI's check): a gate in a hop's run writes no page
        result = json.loads(Path(summary["result"]).read_text())
        assert result["suite_name"] == summary["suite"] and len(result["results"]) == len(
            summary["rules"]
        )
        assert Path(summary["data_docs"]).exists() == (path.name == "r4.silver.json"), path.name

    # A backfill checks its range: every view of the day (the rule is `fail` now, so nothing is
    # dropped and every orphan of the day fails it).
    assert (
        main(
            [
                "backfill",
                "ad_events",
                "--hop",
                "silver",
                "--start",
                "2026-04-02",
                "--end",
                "2026-04-03",
                "--run-id",
                "b1",
                "--quality=report",
            ]
        )
        == 0
    )
    summary = _summary(lake_home, "b1", "silver")
    all_orphans = [
        view for view in _views_in_landing(lake_home) if view[0] == "ad-without-campaign"
    ]
    assert summary["rows"] == len(_views_in_landing(lake_home)) and summary["gate"] == "failed"
    assert _rule(summary, CAMPAIGN_RULE)["failing"] == len(all_orphans) == 7 + 5 + 3

    # Without a gate (--quality=off) a run counts nothing for one; a later check reads its rows.
    _landing_batch(lake_home, 5, orphans=0)
    assert main(["run", "ad_events", "--run-id", "r5", "--quality=off"]) == 0
    records = {
        hop: json.loads((lake_home / f"_ops/runs/ad_events/r5.{hop}.json").read_text())
        for hop in ("silver", "gold")
    }
    assert all(record["batch_ids"] and record["counted"] is None for record in records.values()), (
        records
    )
    capsys.readouterr()
    assert main(["quality", "ad_events", "--hop", "gold", "--run", "r5", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (
        printed["counted_as_written"] is False
        and printed["rows"] == records["gold"]["rows_out"] > 0
    )


def _assert_data_docs_render(page: Path, suite_name: str, rule: str) -> None:
    """Open the page in headless Chromium (Debian's; `.ci/run` installs it) and read the DOM."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: `.ci/run` installs Debian's chromium package")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    profile = page.parent / ".chromium-profile"
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    shutil.rmtree(profile, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert suite_name in dom and "campaign_id" in dom
    assert "Validation Results" in dom or "validation" in dom.lower()
    # Nothing loads from elsewhere (a CDN is out of reach offline and refused by the page's policy),
    # each expectation shows its status as a word, the failed rule among them, and the run is named.
    assert not re.search(r'<(?:script|link)[^>]+(?:src|href)="https?://', dom)
    statuses = re.findall(r'<span class="status (\w+)" title="(\w+)">', dom)
    assert ("bad", "failed") in statuses and ("ok", "passed") in statuses, statuses
    assert "__none__" not in dom and 'href="../quality"' in dom
    # A bound on the hop's time column (epoch milliseconds in the suite) reads as a time.
    assert (
        'title="946684800000 ms since the epoch">2000-01-01 00:00:00 UTC<' in dom
        and "946684800000.0" not in dom
    )
