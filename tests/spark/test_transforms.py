"""The pure transforms on small inline DataFrames with exact expected output."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.testing import assertDataFrameEqual

from spark_jobs.control.companions import companion_module
from spark_jobs.model.spec import get_spec

# The example's transforms and sample module, imported as the platform imports them.
t = companion_module(get_spec("ad_events"), "_transforms")
sample = companion_module(get_spec("ad_events"), "_sample")

pytestmark = [pytest.mark.spark]

T0 = 1_772_323_200_000  # 2026-03-01T00:00:00Z


def _lines(spark, values):
    return spark.createDataFrame(
        [(value, "f.json") for value in values], "value string, _source_file string"
    )


def test_parse_events_keeps_valid_events_typed(spark):
    line = (
        '{"user_id":"u","page_id":"p","ad_id":"a","ad_type":"banner","event_type":"view",'
        f'"event_time":{T0 + 1234},"ip_address":"1.2.3.4","extra":1}}'
    )
    parsed = t.parse_events(_lines(spark, [line]))
    expected = spark.createDataFrame(
        [
            (
                "u",
                "p",
                "a",
                "banner",
                "view",
                T0 + 1234,
                dt.datetime(2026, 3, 1, 0, 0, 1, 234000),
                "1.2.3.4",
                dt.date(2026, 3, 1),
                '{"extra":1}',
                "f.json",
            )
        ],
        "user_id string, page_id string, ad_id string, ad_type string, event_type string, "
        "event_time long, event_ts timestamp, ip_address string, event_date date, _rescued "
        "string, _source_file string",
    )
    assertDataFrameEqual(t.valid_events(parsed), expected)
    assert t.invalid_lines(parsed).count() == 0


def test_a_sample_event_takes_the_plain_shape_and_parses_the_same(spark):
    """The generator's events (every known field, of its type, nothing else) match
    ``PLAIN_SHAPE``, which lets a line skip the per-field type checks and the rescued map; the
    row is what those would have given: typed, nothing rescued."""
    import json
    import random

    from pyspark.sql import functions as F

    event = sample.event(random.Random(7), T0 + 5)
    line = json.dumps(event, separators=(",", ":"))
    shape = (
        spark.createDataFrame([(line,)], "value string")
        .select(F.schema_of_variant(F.parse_json("value")))
        .first()[0]
    )
    assert shape == t.PLAIN_SHAPE
    rows = [row.asDict() for row in t.valid_events(t.parse_events(_lines(spark, [line]))).collect()]
    assert rows == [
        {
            **event,
            "event_ts": dt.datetime(2026, 3, 1, 0, 0, 0, 5000),
            "event_date": dt.date(2026, 3, 1),
            "_rescued": None,
            "_source_file": "f.json",
        }
    ]


def test_parse_events_rescues_fields_the_schema_does_not_have(spark):
    """Unknown fields are kept as JSON text in ``_rescued`` (null when there are none); a known
    field of the wrong type is quarantined as before, unknown fields or not."""
    base = f'"ad_id":"a","event_type":"view","event_time":{T0}'
    lines = [
        "{%s}" % base,
        '{%s,"geo":{"lat":1.5,"tags":["x",null]},"session":"s1"}' % base,
        '{%s,"coupon":null}' % base,
    ]
    parsed = t.parse_events(_lines(spark, lines))
    assert sorted((row._rescued for row in t.valid_events(parsed).collect()), key=str) == sorted(
        [None, '{"geo":{"lat":1.5,"tags":["x",null]},"session":"s1"}', '{"coupon":null}'], key=str
    )
    wrong = '{"ad_id":"a","user_id":5,"event_type":"view","event_time":%d,"extra":"x"}' % T0
    parsed = t.parse_events(_lines(spark, [wrong]))
    assert t.valid_events(parsed).count() == 0
    assert [row.reason for row in t.invalid_lines(parsed).collect()] == ["user_id is not a string"]


@pytest.mark.parametrize(
    "line, reason",
    [
        ("not json", "not a JSON object"),
        ("", "not a JSON object"),
        ("[1, 2]", "not a JSON object"),
        ('"a string"', "not a JSON object"),
        ('{"event_type":"view","event_time":1}', "missing ad_id"),
        ('{"ad_id":null,"event_type":"view","event_time":1}', "missing ad_id"),
        ('{"ad_id":"a","event_time":1}', "missing event_type"),
        ('{"ad_id":"a","event_type":"view"}', "missing event_time"),
        (
            '{"ad_id":"a","event_type":"view","event_time":"1772323200000"}',
            "event_time is not a number",
        ),
        ('{"ad_id":"a","event_type":"view","event_time":true}', "event_time is not a number"),
        (
            '{"ad_id":"a","event_type":"hover","event_time":1}',
            "event_type is not one of view|click|purchase",
        ),
        (
            '{"ad_id":"a","event_type":"view","event_time":-5}',
            "event_time out of range (2000..2100)",
        ),
        (
            '{"ad_id":"a","event_type":"view","event_time":4102444800000}',
            "event_time out of range (2000..2100)",
        ),
        (
            '{"ad_id":{"id":"a"},"event_type":"view","event_time":1772323200000}',
            "ad_id is not a string",
        ),
        (
            '{"ad_id":"a","user_id":[1],"event_type":"view","event_time":1772323200000}',
            "user_id is not a string",
        ),
        (
            '{"ad_id":"a","ip_address":7,"event_type":"view","event_time":1772323200000}',
            "ip_address is not a string",
        ),
    ],
)
def test_parse_events_quarantines_invalid_lines_with_reason(spark, line, reason):
    parsed = t.parse_events(_lines(spark, [line]))
    assert t.valid_events(parsed).count() == 0
    expected = spark.createDataFrame(
        [(line, reason, "f.json")], "raw_line string, reason string, _source_file string"
    )
    assertDataFrameEqual(t.invalid_lines(parsed), expected)


def test_parse_events_accepts_a_fractional_event_time(spark):
    parsed = t.parse_events(
        _lines(spark, ['{"ad_id":"a","event_type":"click","event_time":1.7723232000015e12}'])
    )
    assert [row.event_time for row in t.valid_events(parsed).collect()] == [1772323200001]


def test_parse_events_keeps_json_null_optional_fields(spark):
    parsed = t.parse_events(
        _lines(
            spark, ['{"ad_id":"a","user_id":null,"event_type":"view","event_time":1772323200000}']
        )
    )
    assert [(row.ad_id, row.user_id) for row in t.valid_events(parsed).collect()] == [("a", None)]


def _events(spark, rows):
    return spark.createDataFrame(
        [
            (
                ad,
                kind,
                T0 + offset,
                dt.datetime.fromtimestamp((T0 + offset) / 1000, dt.UTC).replace(tzinfo=None),
            )
            for ad, kind, offset in rows
        ],
        "ad_id string, event_type string, event_time long, event_ts timestamp",
    ).selectExpr(
        "*",
        "'u' user_id",
        "'p' page_id",
        "'banner' ad_type",
        "'ip' ip_address",
        "to_date(event_ts) event_date",
    )


def test_enrich_views_keeps_only_views_and_joins_campaigns(spark):
    events = _events(
        spark, [("a1", "view", 0), ("a1", "click", 1), ("a2", "view", 2), ("zz", "view", 3)]
    )
    campaigns = spark.createDataFrame(
        [("a1", "c1"), ("a2", "c2")], "ad_id string, campaign_id string"
    )
    got = t.enrich_views(events, campaigns).select("ad_id", "campaign_id", "event_time")
    expected = spark.createDataFrame(
        [("a1", "c1", T0), ("a2", "c2", T0 + 2), ("zz", None, T0 + 3)],
        "ad_id string, campaign_id string, event_time long",
    )
    assertDataFrameEqual(got, expected)


def test_count_views_per_campaign_and_10_second_window(spark):
    views = _events(
        spark, [("a", "view", 0), ("a", "view", 9_999), ("a", "view", 10_000), ("b", "view", 5)]
    )
    views = views.selectExpr("*", "CASE ad_id WHEN 'a' THEN 'c1' ELSE 'c2' END campaign_id")
    start = dt.datetime(2026, 3, 1)
    expected = spark.createDataFrame(
        [
            ("c1", start, start + dt.timedelta(seconds=10), 2),
            ("c1", start + dt.timedelta(seconds=10), start + dt.timedelta(seconds=20), 1),
            ("c2", start, start + dt.timedelta(seconds=10), 1),
        ],
        "campaign_id string, window_start timestamp, window_end timestamp, views long",
    )
    assertDataFrameEqual(t.count_views(views), expected)


def test_count_views_ignores_views_without_campaign(spark):
    views = _events(spark, [("a", "view", 0)]).selectExpr("*", "CAST(NULL AS string) campaign_id")
    assert t.count_views(views).count() == 0


def test_a_held_batch_is_cached_uncompressed_while_held_and_the_setting_comes_back(spark):
    """The sinks' ``held``: the cache is filled with compression off, then dropped, and the
    session's own setting (set or not) is as before."""
    from spark_jobs.engine.tables import _CACHE_COMPRESSED, held

    for before in ("true", None):
        if before is None:
            spark.conf.unset(_CACHE_COMPRESSED)
        else:
            spark.conf.set(_CACHE_COMPRESSED, before)
        frame = spark.range(100)
        with held(frame) as batch:
            assert batch.count() == 100 and batch.is_cached
            assert spark.conf.get(_CACHE_COMPRESSED) == "false"
        assert not frame.is_cached
        assert spark.conf.get(_CACHE_COMPRESSED, None) == before
