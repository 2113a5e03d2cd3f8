"""``plugins/lakehouse_airflow/ui/render.py``: the Lakehouse pages' Jinja environment and the
filters their templates format times, durations, counts, run ids and lake paths with, checked
against values worked out by hand (the module imports neither Airflow nor FastAPI, and no JVM;
it is the plugin's, so it is tested with it). What the pages show of a real lake is in
``test_ui.py``."""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path

import pytest
from lakehouse_airflow.ui.render import (
    TEMPLATES,
    age,
    ago,
    in_lake,
    lake_name,
    number,
    render,
    run_label,
    when,
)

pytestmark = [pytest.mark.unit, pytest.mark.airflow]

# 2026-01-31 08:38:48 UTC in epoch seconds, by hand: 56 years from 1970 with 14 leap days, then
# 30 days of January: 20484 days * 86400 s, plus 8 h 38 min 48 s (31128 s).
EPOCH = 20484 * 86400 + 8 * 3600 + 38 * 60 + 48
SHOWN = "2026-01-31 08:38:48 UTC"


@pytest.fixture
def far_from_utc():
    """The process's local zone at UTC+5:30 (a POSIX zone: no tz database needed), so a naive time
    read as local time would be 5.5 hours off."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "XST-5:30"
    time.tzset()
    assert time.localtime(0).tm_hour == 5 and time.localtime(0).tm_min == 30
    yield
    if before is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = before
    time.tzset()


@pytest.mark.parametrize(
    "value",
    [
        EPOCH,
        EPOCH + 0.9,  # the fraction is cut, not rounded
        "2026-01-31T08:38:48Z",
        "2026-01-31T08:38:48.250Z",
        "2026-01-31T09:38:48+01:00",
        "2026-01-31T03:08:48-05:30",
        dt.datetime(2026, 1, 31, 8, 38, 48, tzinfo=dt.UTC),
        dt.datetime(2026, 1, 31, 9, 38, 48, tzinfo=dt.timezone(dt.timedelta(hours=1))),
    ],
    ids=repr,
)
def test_a_time_given_as_epoch_seconds_iso_text_or_a_datetime_shows_in_utc(value):
    assert when(value) == SHOWN


def test_a_time_crossing_midnight_into_utc_shows_utcs_date():
    assert when("2026-01-01T01:30:00+02:00") == "2025-12-31 23:30:00 UTC"
    assert when(0) == "1970-01-01 00:00:00 UTC"


def test_a_time_naming_no_zone_is_utc_whatever_the_machines_zone(far_from_utc):
    assert when("2026-01-31T08:38:48") == SHOWN
    assert when(dt.datetime(2026, 1, 31, 8, 38, 48)) == SHOWN
    two_hours_ago = dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(hours=2)
    assert ago(two_hours_ago.isoformat()) == "2.0 h ago"


@pytest.mark.parametrize("value", [None, "", "yesterday", "2026-02-30T00:00:00"])
def test_no_time_or_text_that_is_no_time_shows_a_dash(value):
    assert when(value) == "-"
    assert ago(value) == "-"


@pytest.mark.parametrize(
    "seconds,shown",
    [
        (0, "0 s"),
        (45, "45 s"),
        ("45", "45 s"),
        (89, "89 s"),
        (90, "2 min"),  # 1.5 min, to the even minute
        (12 * 60, "12 min"),
        (89 * 60, "89 min"),
        (90 * 60, "1.5 h"),
        (3.5 * 3600, "3.5 h"),
        (36 * 3600 - 1, "36.0 h"),
        (36 * 3600, "1.5 d"),
        (2 * 86400, "2.0 d"),
        (-30, "0 s"),  # a clock a little ahead of the writer's: never a negative age
    ],
)
def test_a_duration_shows_in_the_one_unit_its_size_calls_for(seconds, shown):
    assert age(seconds) == shown


def test_no_duration_shows_a_dash():
    assert age(None) == "-"


def test_how_long_ago_counts_back_from_now_and_a_time_to_come_is_zero_seconds_ago():
    now = time.time()
    assert ago(now - 12 * 60) == "12 min ago"
    assert ago(dt.datetime.fromtimestamp(now - 3 * 86400, dt.UTC)) == "3.0 d ago"
    three_hours_ago = dt.datetime.fromtimestamp(now - 3 * 3600, dt.UTC)
    assert ago(three_hours_ago.strftime("%Y-%m-%dT%H:%M:%SZ")) == "3.0 h ago"
    assert ago(now + 600) == "0 s ago"


@pytest.mark.parametrize(
    "value,shown",
    [
        (12480, "12,480"),
        (0, "0"),
        (999, "999"),
        (-1234567, "-1,234,567"),
        (1234.56, "1,235"),  # four significant digits
        (3.14159, "3.142"),
        (0.5, "0.5"),
        ("n/a", "n/a"),  # text as it is
        (None, "-"),
        ("", "-"),
    ],
)
def test_a_count_shows_with_thousands_separators_and_nothing_as_a_dash(value, shown):
    assert number(value) == shown


@pytest.mark.parametrize(
    "run_id,shown",
    [
        ("scheduled__2026-01-31T08:30:00+00:00", "01-31 08:30:00 scheduled"),
        ("manual__2026-01-31T08:38:48.123456+00:00", "01-31 08:38:48 manual"),
        ("backfill__2026-01-01T00:00:00+00:00", "01-01 00:00:00 backfill"),
        ("asset_triggered__2026-01-31T08:38:48.5+00:00", "01-31 08:38:48 asset triggered"),
        ("20260131T083848Z-a1b2c3", "01-31 08:38:48 cli"),  # the CLI's new_run_id
    ],
)
def test_a_run_shows_as_its_time_to_the_second_and_its_kind(run_id, shown):
    assert run_label(run_id) == shown


@pytest.mark.parametrize(
    "run_id",
    [
        "r1",
        "maintain-20260131T083848Z-a1b2c3",  # the pattern starts the id, or it is no run's time
        "rb-20261129T073926Z-24b37e",
        "manual__2026-13-45T08:38:48",  # shaped like Airflow's but no real time
    ],
)
def test_a_run_id_of_no_known_shape_shows_as_it_is(run_id):
    assert run_label(run_id) == run_id


def test_no_run_id_shows_a_question_mark():
    assert run_label(None) == "?"
    assert run_label("") == "?"


@pytest.mark.parametrize(
    "path,home,shown",
    [
        ("/data/lake/tables/silver/ad_views", "/data/lake", "tables/silver/ad_views"),
        ("/data/lake/tables/silver/ad_views", "/data/lake/", "tables/silver/ad_views"),
        ("s3a://bucket/lake/tables/gold/x", "s3a://bucket/lake", "tables/gold/x"),
        # a sibling folder whose name starts like the lake's is not in the lake
        ("/data/lakehouse/tables/x", "/data/lake", "/data/lakehouse/tables/x"),
        ("/elsewhere/tables/x", "/data/lake", "/elsewhere/tables/x"),
        ("/data/lake/tables/x", None, "/data/lake/tables/x"),
        ("/data/lake", "/data/lake", "/data/lake"),
        (None, "/data/lake", "-"),
        ("", "/data/lake", "-"),
    ],
)
def test_a_path_in_the_lake_shows_relative_to_it_and_any_other_as_it_is(path, home, shown):
    assert in_lake(path, home) == shown


@pytest.mark.parametrize(
    "home,shown",
    [
        ("/data/lake", "lake"),
        ("/data/lake/", "lake"),
        ("s3a://bucket/teams/ads", "ads"),
        ("s3a://bucket", "bucket"),
        ("lake", "lake"),
        (None, ""),
    ],
)
def test_a_lake_is_named_by_its_last_folder_or_bucket_prefix(home, shown):
    assert lake_name(home) == shown


def test_every_template_compiles_with_the_filters_it_uses():
    """Jinja refuses a template naming an unknown filter when it compiles it."""
    names = sorted(path.name for path in (Path(TEMPLATES.loader.searchpath[0])).glob("*.html"))
    assert "message.html" in names and "pipelines.html" in names
    for name in names:
        assert TEMPLATES.get_template(name).name == name


def test_each_filter_is_registered_under_its_own_name():
    page = TEMPLATES.from_string(
        "{{ t|when }}|{{ s|age }}|{{ n|number }}|{{ r|run_label }}|{{ p|in_lake(h) }}|"
        "{{ h|lake_name }}|{{ t|ago }}"
    ).render(
        t=EPOCH,
        s=720,
        n=12480,
        r="20260131T083848Z-a1b2c3",
        p="/data/lake/tables/x",
        h="/data/lake",
    )
    shown, _, since = page.rpartition("|")
    assert shown == f"{SHOWN}|12 min|12,480|01-31 08:38:48 cli|tables/x|lake"
    assert since.endswith(" ago") and since != "- ago"


def test_a_page_links_to_the_app_and_airflow_under_the_root_it_is_mounted_at():
    values = dict(title="Rolled back", message="done", link="dags/x/grid", link_text="See")
    for root, app, airflow in [
        ("/lakehouse", "/lakehouse/", "/dags/x/grid"),
        ("/airflow/lakehouse", "/airflow/lakehouse/", "/airflow/dags/x/grid"),
        ("", "/", "/dags/x/grid"),
    ]:
        page = render("message.html", root=root, **values)
        assert f'<nav><a href="{app}">Lakehouse</a></nav>' in page, root
        assert f'<a id="link" href="{airflow}" target="_top">See</a>' in page, root


def test_a_page_escapes_what_it_is_given():
    page = render(
        "message.html",
        root="/lakehouse",
        title="Rollback <gold>",
        message="rolled back <b>gold</b> & silver",
    )
    assert "<title>Rollback &lt;gold&gt;</title>" in page
    assert '<p id="message">rolled back &lt;b&gt;gold&lt;/b&gt; &amp; silver</p>' in page
    assert "<b>" not in page
    assert 'id="link"' not in page  # no link given, none drawn


def test_a_cli_run_id_with_no_such_date_is_shown_as_it_is():
    # --run-id accepts it: the pages must not fail on it
    assert run_label("20261399T000000Z-mine") == "20261399T000000Z-mine"


@pytest.mark.parametrize(
    "value, shown",
    [(12480.0, "12,480"), (25000.5, "25,000"), (-1234.0, "-1,234"), (999.5, "999.5")],
)
def test_large_floats_keep_their_thousands_separators(value, shown):
    assert number(value) == shown
