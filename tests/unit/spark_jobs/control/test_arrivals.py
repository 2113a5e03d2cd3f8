"""``spark_jobs/control/arrivals.py``: what the arrival trigger of a stream DAG sees, the landing
files of each ingest hop that its stream has not taken, in real lakes (``tests/fixtures/lakes``:
``history`` of ad_events, ``nodata`` of shop with two ingest hops) and in one built here from
files as Spark writes them, with real files dropped into the landing folders (no JVM, no broker:
topic-fed hops ask one, and are not tested here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_jobs.control.arrivals import Arrived, arrived
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import load_spec
from testkit.lakes import fixture_lake

pytestmark = pytest.mark.unit


def _drop(folder: str, *names: str) -> list[str]:
    """Files ``names`` written into ``folder``; their paths."""
    paths = [Path(folder, name) for name in names]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('{"event_time": 0}\n')
    return [str(path) for path in paths]


def test_only_files_the_stream_has_not_taken_arrive_and_spark_s_hidden_names_never_do(tmp_path):
    """history: bronze's batches took six files (its source log compacted after two batches),
    all still in the landing folder: nothing arrived. Two new files arrive; a name Spark skips
    (``.``, ``_``) does not."""
    lake = fixture_lake("history", tmp_path)
    landing = lake.landing_of(lake.spec.hop("bronze"))
    assert len(list(Path(landing).iterdir())) == 6
    assert arrived(lake) == [Arrived("bronze", frozenset())]

    new = _drop(landing, "events-late-0000.json", "events-late-0001.json")
    _drop(landing, ".events-late-0002.json.crc", "_SUCCESS", "_temporary/part-0000.json")
    [bronze] = arrived(lake)
    assert (bronze.hop, bronze.items, bronze.records) == ("bronze", frozenset(new), False)
    assert bronze.text() == "2 files arrived for bronze"


def test_each_ingest_hop_sees_its_own_landing_folder_and_only_ingest_hops_are_watched(tmp_path):
    """nodata (shop): orders and payments land in two folders; the three hops below read tables.
    A file in the orders folder arrives for bronze_orders alone."""
    lake = fixture_lake("nodata", tmp_path)
    assert arrived(lake) == [
        Arrived("bronze_orders", frozenset()),
        Arrived("bronze_payments", frozenset()),
    ]
    orders = _drop(lake.landing_of(lake.spec.hop("bronze_orders")), "orders-new.json")
    assert arrived(lake) == [
        Arrived("bronze_orders", frozenset(orders)),
        Arrived("bronze_payments", frozenset()),
    ]


def test_a_file_spark_logged_as_an_escaped_uri_is_taken(tmp_path):
    """Spark's source log names files as URIs (a space as ``%20``); the listing has plain paths.
    A lake in a folder with a space: the file batch 0 read is taken, the other two arrived; a
    hop whose stream never ran has every file arrived."""
    home = tmp_path / "the lake"
    spec_file = tmp_path / "team.yaml"
    spec_file.write_text(
        "name: team\nhops:\n"
        "  - {name: a, kind: ingest, landing: landing/a b, table: tables/a, time_column: t}\n"
        "  - {name: b, kind: ingest, landing: landing/b, table: tables/b, time_column: t}\n"
        "  - {name: c, kind: append, upstream: a, table: tables/c, time_column: t}\n"
    )
    lake = Lake(str(home), load_spec(spec_file))
    taken, *waiting = _drop(home / "landing" / "a b", "x 0.json", "x 1.json", "x 2.json")
    fresh = _drop(home / "landing" / "b", "y.json")
    log = home / "checkpoints" / "team" / "a" / "sources" / "0" / "0"
    log.parent.mkdir(parents=True)
    entry = {"path": Path(taken).as_uri(), "timestamp": 0, "batchId": 0}
    assert "%20" in entry["path"]
    log.write_text("v1\n" + json.dumps(entry) + "\n")

    assert arrived(lake) == [Arrived("a", frozenset(waiting)), Arrived("b", frozenset(fresh))]


def test_what_was_announced_is_taken_off_and_the_text_counts_what_is_left():
    """The trigger announces what is new since its last look (``arrived - seen``) in one line."""
    files = Arrived("bronze", frozenset({"/l/1.json", "/l/2.json", "/l/3.json"}))
    left = files - frozenset({"/l/1.json", "/l/2.json", "/l/other.json"})
    assert left == Arrived("bronze", frozenset({"/l/3.json"}))
    assert left.text() == "1 file arrived for bronze"
    records = Arrived("raw", frozenset({"events/0@10", "events/1@7"}), records=True)
    assert records.text() == "records arrived in 2 partitions for raw"
    assert (records - frozenset({"events/0@10"})).text() == "records arrived in 1 partition for raw"
