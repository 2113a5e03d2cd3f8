"""Hostile input at bronze: bad files land beside good ones; the run succeeds, every bad line is
in quarantine with a reason and its file, and lines in = bronze + quarantine."""

from __future__ import annotations

import json
import shutil

import pytest

from spark_jobs.cli import main
from testkit.expected import assert_tables_match_landing, hadoop_lines, landing_lines

pytestmark = [pytest.mark.spark, pytest.mark.integration]

T0 = 1_775_001_600_000  # 2026-04-01T00:00:00Z


def _event(n: int, **fields) -> dict:
    return {
        "user_id": f"u{n}",
        "page_id": "p",
        "ad_id": fields.pop("ad_id", f"ad-{n % 7}"),
        "ad_type": "banner",
        "event_type": "view",
        "event_time": T0 + n * 10,
        "ip_address": "1.2.3.4",
        **fields,
    }


def _line(n: int, **fields) -> bytes:
    return json.dumps(_event(n, **fields)).encode()


HOSTILE = {
    "empty.json": b"",
    "blank-lines.json": b"\n\n   \n\n",
    "crlf.json": b"\r\n".join(_line(n) for n in range(5)) + b"\r\n",
    "no-final-newline.json": b"\n".join(_line(n) for n in range(5, 9)),
    "not-utf8.json": b'{"ad_id":"\xff\xfe","event_type":"view","event_time":1775001600000}\n'
    + _line(9)
    + b"\n",
    "nul-bytes.json": (
        b'{"ad_id":"a\x00b","event_type":"view","event_time":1775001600000}\n\x00\x00\n'
    )
    + _line(10)
    + b"\n",
    "not-objects.json": b'[1, 2]\n"a bare string"\n42\nnull\n',
    "wrong-types.json": b"\n".join(
        [
            # extra fields: ignored, the event is kept
            _line(11, extra={"kept": "no"}, unknown_field=1),
            _line(12, ad_id={"nested": "object"}),
            _line(13, user_id=["a", "list"]),
            _line(14, event_time=str(T0)),  # a number as a string
            _line(15, event_time=-5),
            _line(16, event_time=99_999_999_999_999),  # year 5138
            _line(17, event_type="hover"),
        ]
    )
    + b"\n",
    "huge-line.json": _line(18, ad_id="x" * (20 << 20)) + b"\n" + _line(19) + b"\n",
    ".hidden.json": _line(20) + b"\n",  # ignored, as Spark does
    "_in-progress.json": _line(21) + b"\n",
}


def test_hostile_files_beside_good_ones(spark, lake_home, capsys):
    assert (
        main(
            [
                "generate",
                "ad_events",
                "--events",
                "400",
                "--files",
                "2",
                "--seed",
                "3",
                "--start",
                "2026-04-01T00:00:00",
            ]
        )
        == 0
    )
    landing = lake_home / "landing/ad_events"
    for name, data in HOSTILE.items():
        (landing / name).write_bytes(data)
    # A mapping file of the generated campaigns covers the ads above too.
    with open(lake_home / "landing/campaigns/campaigns.csv", "a") as handle:
        handle.writelines(f"ad-{n},campaign-x\n" for n in range(7))

    capsys.readouterr()
    assert main(["run", "ad_events", "--json"]) == 0
    bronze = json.loads(capsys.readouterr().out)["hops"][0]
    lines = landing_lines(lake_home)
    assert bronze["rows_in"] == len(lines) == bronze["rows_out"] + bronze["rows_quarantined"]
    assert_tables_match_landing(lake_home)

    quarantine = spark.read.format("delta").load(str(lake_home / "tables/quarantine/ad_events"))
    reasons = {(row._source_file.rsplit("/", 1)[-1], row.reason) for row in quarantine.collect()}
    assert ("not-utf8.json", "not valid UTF-8") in reasons
    assert ("huge-line.json", "line longer than 1048576 bytes") in reasons
    assert ("blank-lines.json", "not a JSON object") in reasons
    expected_reasons = {
        "ad_id is not a string",
        "user_id is not a string",
        "event_time is not a number",
        "event_time out of range (2000..2100)",
        "event_type is not one of view|click|purchase",
    }
    assert {reason for name, reason in reasons if name == "wrong-types.json"} == expected_reasons
    assert quarantine.where("reason IS NULL OR _source_file IS NULL").count() == 0
    files = {
        row._source_file.rsplit("/", 1)[-1]
        for row in spark.read.format("delta")
        .load(str(lake_home / "tables/bronze/ad_events"))
        .select("_source_file")
        .collect()
    }
    assert not files & {".hidden.json", "_in-progress.json"}
    assert {"crlf.json", "no-final-newline.json", "wrong-types.json"} <= files


def test_hadoop_line_rules_match_what_spark_reads(spark, tmp_path):
    """The plain-Python expectation splits lines like Spark's text source does."""
    for name, data in HOSTILE.items():
        if name.startswith((".", "_")) or name == "huge-line.json":
            continue
        path = tmp_path / name
        path.write_bytes(data)
        read = [row.value for row in spark.read.text(str(path)).collect()]
        assert read == hadoop_lines(data), name


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no campaigns CSV"),
        (b"ad_id,campaign_id\n", "has no rows"),
        (b"ad_id,campaign_id\nad-1,c1\nad-1,c2\nad-2,c3\n", "lists ad_id ad-1 more than once"),
    ],
)
def test_a_bad_campaigns_file_stops_silver_with_a_clear_error(
    spark, lake_home, capsys, content, message
):
    assert (
        main(
            [
                "generate",
                "ad_events",
                "--events",
                "50",
                "--seed",
                "1",
                "--start",
                "2026-04-01T00:00:00",
            ]
        )
        == 0
    )
    campaigns = lake_home / "landing/campaigns"
    shutil.rmtree(campaigns)
    if content is not None:
        campaigns.mkdir()
        (campaigns / "campaigns.csv").write_bytes(content)
    capsys.readouterr()
    assert main(["run", "ad_events"]) == 2
    assert message in capsys.readouterr().err
    assert not (lake_home / "tables/silver/ad_views").exists()
