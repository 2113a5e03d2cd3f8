"""``spark_jobs/control/writers/samples.py``: ``lakehouse generate``'s sample files (a multi-source
sample, a change feed's Debezium events, CSV with a header), read back as plain text (no JVM)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from spark_jobs.cli import main
from spark_jobs.control.writers.samples import csv_text
from spark_jobs.model.formats import FormatSpec

pytestmark = pytest.mark.unit


def test_the_sample_writer_puts_every_key_in_the_header_and_bad_lines_where_they_stood():
    fmt = FormatSpec.from_raw(
        {"format": "csv", "columns": {"id": "string", "n": "int"}, "csv": {"delimiter": ";"}}, "hop"
    )
    text = csv_text(
        fmt, [{"id": "a;b", "n": 1}, "not a row", {"id": 'say "x"', "n": None, "extra": 2}]
    )
    assert text.splitlines()[2] == "not a row"
    rows = list(csv.reader(io.StringIO(text), delimiter=";"))
    assert rows == [["id", "n", "extra"], ["a;b", "1", ""], ["not a row"], ['say "x"', "", "2"]]


def test_a_multi_source_sample_writes_each_sources_file_and_payments_name_their_orders(
    lake_home, capsys, tmp_path, monkeypatch
):
    """``lakehouse generate shop``: an orders JSON-lines file and a payments CSV file (header
    first) per file index, in each ingest hop's landing folder; every payment names an order of
    the same call; the counts it prints are the files' (read back here as plain text)."""
    assert (
        main(
            [
                "generate",
                "shop",
                "--events",
                "400",
                "--files",
                "2",
                "--seed",
                "7",
                "--bad-fraction",
                "0.05",
                "--start",
                "2026-03-01T00:00:00",
                "--json",
            ]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    orders = sorted((lake_home / "landing/shop/orders").glob("*.json"))
    payments = sorted((lake_home / "landing/shop/payments").glob("*.csv"))
    assert len(orders) == len(payments) == 2 and sorted(map(str, orders + payments)) == sorted(
        result["files"]
    )
    parsed, bad = [], 0
    for path in orders:
        for line in path.read_text().splitlines():
            try:
                order = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if (
                not order["order_id"].startswith("o-")
                or {"merchant_id", "customer_id"} - set(order)
                or not isinstance(order["amount"], (int, float))
                or order["currency"] not in ("EUR", "USD", "GBP")
            ):
                bad += 1
            else:
                parsed.append(order)
    rows = [path.read_text().splitlines() for path in payments]
    assert all(lines[0] == "payment_id,order_id,paid_amount,status,paid_time" for lines in rows)
    bodies = [line.split(",") for lines in rows for line in lines[1:]]

    def valid(fields: list[str]) -> bool:
        from datetime import datetime

        try:
            float(fields[2]), datetime.fromisoformat(fields[4])
        except (ValueError, IndexError):
            return False
        return len(fields) == 5 and fields[3] in ("paid", "failed")

    good = [fields for fields in bodies if valid(fields)]
    bad += len(bodies) - len(good)
    assert bad == result["bad_lines"] > 0
    assert {fields[1] for fields in good} <= {order["order_id"] for order in parsed}
    distinct = {order["order_id"] for order in parsed}
    assert len(distinct) + result["bad_lines"] // 2 == result["events"] == 400 and len(
        parsed
    ) > len(distinct)
    # A sample that names a folder the spec does not have: one line naming the hop and the fix.
    specs = tmp_path / "team"
    specs.mkdir()
    (specs / "one.yaml").write_text(
        "name: one\nlanding: landing/one\nhops:\n"
        "  - {name: bronze, kind: ingest, table: tables/one, time_column: t}\n"
    )
    (specs / "one_sample.py").write_text(
        "from spark_jobs.authoring import SampleFiles\n"
        "def landing_files(rng, start_ms, events, bad_fraction, late_fraction):\n"
        "    return SampleFiles({'orders': ('.json', '{}\\n')}, events)\n"
    )
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(specs))
    assert main(["generate", "one", "--events", "1"]) == 2
    assert (
        "sample writes files for orders, which is not an ingest hop: use one of bronze"
        in capsys.readouterr().err
    )


def test_the_crm_sample_writes_inserts_updates_deletes_and_late_changes_as_debezium_events(
    tmp_path, monkeypatch
):
    import json

    from spark_jobs import service
    from testkit.paths import EXAMPLES

    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(EXAMPLES))
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path))
    result = service.generate("crm", 400, seed=5, start_ms=1_780_000_000_000, late_fraction=0.1)
    events = [json.loads(line) for line in Path(result.files[0]).read_text().splitlines()]
    assert {event["op"] for event in events} == {"c", "u", "d"}
    assert all(
        (event["before"] if event["op"] == "d" else event["after"])["customer_id"]
        for event in events
    )
    positions = [event["source"]["lsn"] for event in events]
    late = sum(
        1
        for index, position in enumerate(positions)
        if position < max(positions[:index], default=0)
    )
    assert late == result.late_events > 0  # each late event arrives after a newer one
