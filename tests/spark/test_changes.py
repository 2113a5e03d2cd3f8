"""The ``crm`` example's ``changes`` hops apply a Debezium feed (inserts, updates, deletes,
re-inserts, resends, twins of one sequence, out-of-order arrival, late changes after a delete)
as an SCD type 1 table and a type 2 history, with their quality gates, and the summary below
them counts the live customers per tier; after every run (one of them SIGKILLed while the
changes hops apply its batch, then run again), a rollback and its replay, and backfills, all
equal a plain-Python model of the rules (testkit/changes_model.py)."""

from __future__ import annotations

import random

import pytest

from testkit.changes_model import T0_MS, cuts, feed, scd1, scd2, tiers
from testkit.changes_run import COLUMNS, HOPS, per_tier, tables
from testkit.lakes import example_copy
from testkit.paths import killed_mid_run

# The suites run where the crm tables are checked as shipped (the feed test, gold_orders); the
# two-column test changes the code and checks the order alone: without suites, a sixth shorter.
pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]


CHANGES_HOPS = ("customers", "customers_history")


def quiet(_line: str) -> None:
    pass


def _crm_lake(tmp_path, monkeypatch):
    """The crm example's lake under ``tmp_path``: its home and its customers' landing folder.
    Every batch of newer changes applies from the tables, as it does on a long feed."""
    example_copy(tmp_path / "pipelines", "crm", HOPS)
    home = tmp_path / "lake"
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(tmp_path / "pipelines"))
    monkeypatch.setenv("LAKEHOUSE_HOME", str(home))
    monkeypatch.setenv("LAKEHOUSE_CHANGES_FROM_TABLE_ROWS", "0")
    landing = home / "landing" / "crm" / "customers"
    landing.mkdir(parents=True)
    return home, landing


def _key(row: dict) -> tuple:
    start = row.get("valid_from")
    return row["customer_id"], tuple(start.values()) if start else None


@pytest.mark.quality
@pytest.mark.parametrize("seed", [3], ids=lambda seed: f"seed{seed}")
def test_a_change_feed_equals_the_model_through_runs_a_rollback_and_backfills(
    spark, tmp_path, monkeypatch, seed
):
    from spark_jobs import service
    from spark_jobs.model.errors import CodeChanged

    home, landing = _crm_lake(tmp_path, monkeypatch)

    arrival = feed(seed)
    rng = random.Random(seed)
    arrived = deleted = 0
    sizes = cuts(seed, len(arrival), 4)
    for number, size in enumerate(sizes):
        lines = [line for change in arrival[arrived : arrived + size] for line in change.lines()]
        if number == 1:
            lines.insert(rng.randrange(len(lines)), '{"op": "u", "after": {"name": "no key"}}')
        (landing / f"changes-{number:03d}.json").write_text("\n".join(lines) + "\n")
        arrived += size
        if number == len(sizes) - 1:
            # The last file's run is SIGKILLed while the changes hops apply it; the next
            # run finishes it.
            delay = rng.uniform(0.5, 4.0)
            killed, _code, _out = killed_mid_run(
                ["run", "crm"],
                delay,
                after=home / f"checkpoints/crm/bronze_customers/commits/{number}",
            )
            assert killed, (
                f"the run ended within {delay:.1f} s of bronze's batch: not a mid-run kill"
            )
        before = tables(spark, home) if number else ([], [])
        result = service.run("crm", progress=quiet)
        result.raise_for_gate()
        after = tables(spark, home)
        assert after == (scd1(arrival[:arrived]), scd2(arrival[:arrived])), f"after batch {number}"
        assert per_tier(spark, home) == tiers(after[0]), f"after batch {number}"
        # Each hop's live keys: the model's rows (type 1) and its open versions (type 2).
        live = [len(after[0]), sum(row["valid_to"] is None for row in after[1])]
        assert [record.live_keys for record in result.records if record.hop in CHANGES_HOPS] == live
        # (the killed run's rows deleted are split between it and this one)
        if number < len(sizes) - 1:
            # Each run's rows deleted: the rows (by key; by key and first sequence in
            # the history) gone.
            gone = [
                len({_key(row) for row in old} - {_key(row) for row in new})
                for old, new in zip(before, after)
            ]
            assert [
                record.rows_deleted for record in result.records if record.hop in CHANGES_HOPS
            ] == gone
            deleted += sum(gone)
    expected = (scd1(arrival), scd2(arrival))
    # deletes and versions were made
    assert expected[0] and any(row["valid_to"] is not None for row in expected[1])
    assert deleted > 0, "no run deleted a row: the rows-deleted counts were not put to the test"
    _pages_show_the_rows_deleted(result)

    # Back to batch 1 of bronze (the changes hops below follow), then the next run replays.
    service.rollback("crm", "bronze_customers", to_batch=1, progress=quiet)
    assert tables(spark, home) != expected
    service.run("crm", progress=quiet).raise_for_gate()
    assert tables(spark, home) == expected
    assert per_tier(spark, home) == tiers(expected[0])

    # A backfill of part of the range recomputes the keys it touches: the same table.
    middle = T0_MS + len(arrival) // 3 * 1000
    service.backfill("crm", middle, middle + 20_000, progress=quiet)
    assert tables(spark, home) == expected

    # Other rules cannot go on with a table the old ones built: refused before any query,
    # naming refresh.
    spec = tmp_path / "pipelines" / "crm" / "crm.yaml"
    rules = spec.read_text()
    spec.write_text(rules.replace("track_history: [tier]", "track_history: [tier, name]"))
    with pytest.raises(
        CodeChanged, match="customers_history's query changed .* other change rules"
    ):
        service.run("crm", progress=quiet)
    spec.write_text(rules)

    # A backfill into an empty lake over the same files gives the same tables.
    fresh = tmp_path / "fresh"
    monkeypatch.setenv("LAKEHOUSE_HOME", str(fresh))
    (fresh / "landing" / "crm").mkdir(parents=True)
    (fresh / "landing" / "crm" / "customers").symlink_to(landing)
    service.backfill("crm", T0_MS, T0_MS + 3_600_000, progress=quiet)
    assert tables(spark, fresh) == expected
    assert per_tier(spark, fresh) == tiers(expected[0])


def _pages_show_the_rows_deleted(result) -> None:
    """The Lakehouse page's last-run cell and each changes hop's runs table give its rows deleted
    and its live keys."""
    from lakehouse_airflow.ui.render import render

    from spark_jobs.control.overview import hop_overview, pipeline_overview
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.spec import get_spec

    lake = Lake.open(get_spec("crm"))
    page = render("pipelines.html", pipelines=[pipeline_overview(lake)], broken={})
    for record in result.records:
        cell = page.split(f'data-hop="{record.hop}"')[1].split("</tr>")[0]
        shown = f'<span class="deleted">{record.rows_deleted} deleted</span>' in cell
        assert shown == bool(record.rows_deleted), cell  # none shown where none were deleted
        if record.hop in CHANGES_HOPS:
            html = render(
                "hop.html",
                pipeline="crm",
                charts=[],
                hop=hop_overview(lake, record.hop),
                batches=[],
                quarantine=None,
            )
            assert f'<td class="num deleted">{record.rows_deleted}</td>' in html
            assert f'<td class="num live">{record.live_keys}</td>' in html
            assert f'<span class="live">{record.live_keys} live keys</span>' in cell


def test_a_sequence_of_two_columns_orders_changes_as_the_pair_does(spark, tmp_path, monkeypatch):
    """``sequence_by: [lsn_epoch, lsn_step]`` (the lsn split in two by the transform): changes apply
    in the order of the pair, column by column, so both tables equal the model's by lsn, and a type
    2 history's validity columns hold the pair; a rollback and its replay keep them equal."""
    from spark_jobs import service

    pipeline = example_copy(tmp_path / "pipelines", "crm", HOPS)
    code = (pipeline / "crm.py").read_text()
    (pipeline / "crm.py").write_text(
        code.replace("transforms.check_changes(frame),", "_split(transforms.check_changes(frame)),")
        + "\n\ndef _split(frame):\n    from pyspark.sql import functions as F\n\n"
        "    offset = F.col('position.offset')\n"
        "    return frame.withColumn('lsn_epoch', F.floor(offset / 400).cast('long'))"
        ".withColumn('lsn_step', (offset % 400).cast('long'))\n"
    )
    spec = (pipeline / "crm.yaml").read_text()
    assert spec.count("sequence_by: position") == 2
    (pipeline / "crm.yaml").write_text(
        spec.replace("sequence_by: position", "sequence_by: [lsn_epoch, lsn_step]")
    )
    home = tmp_path / "lake"
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(tmp_path / "pipelines"))
    monkeypatch.setenv("LAKEHOUSE_HOME", str(home))
    landing = home / "landing" / "crm" / "customers"
    landing.mkdir(parents=True)
    # PostgreSQL's positions: each one's offset is 20,000,000 + 40 * its sequence number.
    arrival = feed(5, keys=8, changes=60, connector="postgresql")
    assert any(change.lsn >= 10 for change in arrival)  # epochs differ: the pair is put to the test

    def pair(column: str) -> str:
        offset = f"CAST({column}.lsn_epoch * 400 + {column}.lsn_step AS DECIMAL(38,0))"
        position = f"named_struct('log', '', 'offset', {offset}, 'serial', 0L)"
        return f"IF({column} IS NULL, NULL, {position}) AS {column}"

    def both() -> tuple[list[dict], list[dict]]:
        latest = spark.read.format("delta").load(str(home / "tables/silver/crm_customers"))
        history = spark.read.format("delta").load(str(home / "tables/silver/crm_customers_history"))
        return (
            [
                row.asDict(recursive=True)
                for row in latest.select(*COLUMNS).orderBy("customer_id").collect()
            ],
            [
                row.asDict(recursive=True)
                for row in history.selectExpr(*COLUMNS, pair("valid_from"), pair("valid_to"))
                .orderBy("customer_id", "valid_from")
                .collect()
            ],
        )

    half = len(arrival) // 2
    for number, part in enumerate((arrival[:half], arrival[half:])):
        (landing / f"changes-{number:03d}.json").write_text(
            "".join(line + "\n" for change in part for line in change.lines())
        )
        service.run("crm", progress=quiet).raise_for_gate()
    expected = (scd1(arrival), scd2(arrival))
    assert both() == expected
    service.rollback("crm", "bronze_customers", to_batch=0, progress=quiet)
    service.run("crm", progress=quiet).raise_for_gate()
    assert both() == expected


def test_a_batch_of_newer_changes_applies_from_the_tables_without_reading_the_feed(
    spark, tmp_path, monkeypatch
):
    """A batch whose every change is newer than what the tables hold of its key applies from the
    type 1 row or the type 2 history's last version and the deleted keys: with the files of every
    change bronze held before it moved out of bronze's folder, both tables, the deleted keys and
    the summary still equal the model of all changes (a read of the feed would fail)."""
    import dataclasses

    from spark_jobs import service

    home, landing = _crm_lake(tmp_path, monkeypatch)
    # in sequence order, one change per sequence, none with a value left out
    arrival, seen = [], set()
    for change in sorted(feed(6, keys=10, changes=90, connector="sqlserver"), key=lambda c: c.lsn):
        if change.lsn not in seen:
            seen.add(change.lsn)
            arrival.append(dataclasses.replace(change, email_unavailable=False))
    assert {"d"} <= {change.op for change in arrival[60:]}  # the newer batch deletes too
    bronze = home / "tables/bronze/crm_customers"

    def land(number: int, part) -> None:
        (landing / f"changes-{number:03d}.json").write_text(
            "".join(line + "\n" for change in part for line in change.lines())
        )
        service.run("crm", "bronze_customers", quality="off", progress=quiet)

    land(0, arrival[:60])
    for hop in HOPS[1:]:
        service.run("crm", hop, quality="off", progress=quiet)
    older = [path for path in bronze.rglob("*.parquet") if "_delta_log" not in path.parts]
    land(1, arrival[60:])
    moved = tmp_path / "moved"
    moved.mkdir()
    for number, path in enumerate(older):
        path.rename(moved / f"{number}.parquet")
    for hop in HOPS[1:]:
        service.run("crm", hop, quality="off", progress=quiet)
    assert tables(spark, home) == (scd1(arrival), scd2(arrival))
    assert per_tier(spark, home) == tiers(scd1(arrival))
    deleted = spark.read.format("delta").load(
        str(home / "tables/silver/crm_customers_deleted_keys")
    )
    live = {row["customer_id"] for row in scd1(arrival)}
    assert {row.customer_id for row in deleted.collect()} == {
        change.key for change in arrival if change.key
    } - live


def test_a_rule_naming_a_column_the_changes_lack_is_one_line_naming_it(
    spark, tmp_path, monkeypatch
):
    """A changes hop's rules are checked against its stream's columns before the query starts:
    the run raises that check's own message, not Spark's report of a failed stream."""
    from spark_jobs import service
    from spark_jobs.model.errors import UsageError

    pipeline = example_copy(tmp_path / "pipelines", "crm", HOPS[:2])
    spec = (pipeline / "crm.yaml").read_text()
    assert spec.count("operation: op\n") == 1
    (pipeline / "crm.yaml").write_text(spec.replace("operation: op\n", "operation: kind\n"))
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(tmp_path / "pipelines"))
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "lake"))
    landing = tmp_path / "lake" / "landing" / "crm" / "customers"
    landing.mkdir(parents=True)
    changes = feed(1, keys=3, changes=6, connector="postgresql")
    (landing / "changes.json").write_text(
        "".join(line + "\n" for change in changes for line in change.lines())
    )
    with pytest.raises(UsageError, match=r"^hop customers: the changes have no column 'kind'"):
        service.run("crm", quality="off", progress=quiet)


def _tier_at_orders(landing) -> dict[str, tuple]:
    """Each valid order of the crm sample's files (its resends once), with the tier a plain-Python
    type 2 history of the customers' changes gives its customer at the order's log position."""
    import importlib.util
    import json

    from testkit.changes_model import Change
    from testkit.paths import EXAMPLES

    spec = importlib.util.spec_from_file_location("crm_sample", EXAMPLES / "crm" / "crm_sample.py")
    crm_sample = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(crm_sample)

    def events(folder: str, bad: tuple[str, ...]) -> list[dict]:
        return [
            json.loads(line)
            for path in sorted((landing / folder).iterdir())
            for line in path.read_text().splitlines()
            if line not in bad
        ]

    # The model's sequences are small numbers (its times are T0_MS + sequence seconds): log
    # positions less T0_MS.
    changes = [
        Change(
            row["customer_id"],
            event["source"]["lsn"] - T0_MS,
            event["op"],
            row["name"],
            row["tier"],
        )
        for event in events("customers", crm_sample.BAD_LINES)
        for row in [event["after"] or event["before"]]
    ]

    def lsn(position: dict | None) -> int | None:
        """The model's sequence number of its (PostgreSQL) position."""
        return None if position is None else (int(position["offset"]) - 20_000_000) // 40

    versions = [
        {**version, "valid_from": lsn(version["valid_from"]), "valid_to": lsn(version["valid_to"])}
        for version in scd2(changes)
    ]
    orders = {}
    for event in events("orders", crm_sample.BAD_ORDERS):
        order, lsn = event["after"], event["source"]["lsn"] - T0_MS
        tiers = [
            version["tier"]
            for version in versions
            if version["customer_id"] == order["customer_id"]
            and version["valid_from"] <= lsn
            and (version["valid_to"] is None or lsn < version["valid_to"])
        ]
        assert len(tiers) <= 1, f"versions overlap at {lsn}: {tiers}"
        orders[order["order_id"]] = (
            order["customer_id"],
            order["amount"],
            lsn + T0_MS,
            tiers[0] if tiers else None,
        )
    return orders


@pytest.mark.quality
def test_gold_orders_carry_the_tier_each_customer_had_when_ordering(spark, tmp_path, monkeypatch):
    """The crm sample's orders, joined with the customers' history as a static input, carry the
    tier a plain-Python history gives each customer at the order's log position (bad lines
    quarantined, resends once), through a rollback of the gold hop and its replay; a changes
    hop's rows in are the rows its upstream wrote (a batch read once, not twice)."""
    from spark_jobs import service
    from testkit.paths import EXAMPLES

    home = tmp_path / "lake"
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(EXAMPLES))
    monkeypatch.setenv("LAKEHOUSE_HOME", str(home))
    bad = 0
    # ten minutes apart: the second part's late changes fall before any of its orders
    for part in range(2):
        made = service.generate(
            "crm",
            300,
            seed=part,
            start_ms=T0_MS + part * 600_000,
            bad_fraction=0.03,
            late_fraction=0.05,
        )
        bad += made.bad_lines
        records = {record.hop: record for record in service.run("crm", progress=quiet).records}
        assert (
            records["customers"].rows_in
            == records["customers_history"].rows_in
            == records["bronze_customers"].rows_out
        )
    expected = _tier_at_orders(home / "landing" / "crm")
    # a customer unknown too
    assert {tier for *_rest, tier in expected.values()} == {"bronze", "silver", "gold", None}

    def gold() -> dict[str, tuple]:
        frame = spark.read.format("delta").load(str(home / "tables/gold/crm_orders"))
        return {
            row.order_id: (row.customer_id, row.amount, int(row.position.offset), row.tier)
            for row in frame.select(
                "order_id", "customer_id", "amount", "position", "tier"
            ).collect()
        }

    assert gold() == expected
    quarantined = sum(
        spark.read.format("delta").load(str(home / f"tables/quarantine/crm_{name}")).count()
        for name in ("customers", "orders")
    )
    assert quarantined == bad > 0
    service.rollback("crm", "gold_orders", to_batch=0, progress=quiet)
    assert gold() != expected
    service.run("crm", progress=quiet).raise_for_gate()
    assert gold() == expected
