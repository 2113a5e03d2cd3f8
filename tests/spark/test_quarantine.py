"""``lakehouse quarantine``: the quarantine tables' rows counted by reason and by file, equal to the
invalid lines of the landing files (computed in plain Python), of all runs or of one."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from spark_jobs.cli import main
from testkit.expected import landing_lines, valid_event
from testkit.lakes import increment

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _invalid_by_file(lake_home) -> Counter:
    return Counter(name for name, line in landing_lines(lake_home) if valid_event(line) is None)


def _quarantine(capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main(["quarantine", "ad_events", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_quarantine_is_counted_by_reason_and_file_for_all_runs_or_one(spark, lake_home, capsys):
    increment(0, run_id="r0")
    first = _invalid_by_file(lake_home)
    increment(1, run_id="r1")
    every = _invalid_by_file(lake_home)
    assert first and every - first, "the generator writes invalid lines in both increments"

    bronze, silver = _quarantine(capsys)["hops"]
    # no drop rule without suites
    assert (bronze["hop"], silver["hop"]) == ("bronze", "silver") and silver["rows"] == 0
    assert bronze["rows"] == sum(every.values())
    assert sum(reason["rows"] for reason in bronze["reasons"]) == bronze["rows"]
    assert {each["value"].rsplit("/", 1)[-1]: each["rows"] for each in bronze["files"]} == dict(
        every
    )
    assert all(
        len(bronze["samples"][reason["value"]]) == min(reason["rows"], 3)
        for reason in bronze["reasons"]
    )
    assert {again["start"][:10] for again in bronze["ingest_again"]} == {"2026-04-01"}

    [one] = _quarantine(capsys, "--hop", "bronze", "--run", "r1")["hops"]
    assert one["run_id"] == "r1"
    assert {each["value"].rsplit("/", 1)[-1]: each["rows"] for each in one["files"]} == dict(
        every - first
    )

    assert main(["quarantine", "ad_events", "--hop", "gold"]) == 2
    assert "gold has no quarantine table" in capsys.readouterr().err
