"""The Lakehouse pages (``lakehouse_airflow.ui``) inside Airflow's real API app, in this process:
Airflow's own ``create_app`` mounts the plugin, Airflow's auth manager signs the tokens and
decides who may do what, and a real lake (three increments, a real Great Expectations result)
is read. The browser walk through the login page is in ``test_platform.py``."""

from __future__ import annotations

import html
import json
import os
import re
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

pytestmark = [pytest.mark.airflow, pytest.mark.quality]

PIPELINE = "ad_events"


@pytest.fixture(scope="module")
def airflow_app(airflow_in_process):
    from airflow.api_fastapi.app import create_app
    from fastapi.testclient import TestClient

    with TestClient(create_app("core"), base_url="http://127.0.0.1:18080") as client:
        yield client


def _token(role: str) -> str:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    return get_auth_manager().generate_jwt(
        SimpleAuthManagerUser(username=f"a-{role.lower()}", role=role)
    )


def _as(role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {_token(role)}"}


def _routes():
    """(method, path) of every route of the plugin's app, read from the app itself."""
    from fastapi.routing import APIRoute
    from lakehouse_airflow.ui.app import app

    samples = {
        "pipeline": PIPELINE,
        "hop": "bronze",
        "dag_id": f"{PIPELINE}__stream",
        "name": "r2.silver.html",
    }
    found = []
    for route in app.routes:
        if isinstance(route, APIRoute):
            path = re.sub(r"{(\w+)(:path)?}", lambda match: samples[match.group(1)], route.path)
            found.extend((method, "/lakehouse" + path) for method in sorted(route.methods))
    return found


def test_every_route_refuses_without_a_login(airflow_app):
    routes = _routes()
    assert len(routes) >= 8 and ("POST", f"/lakehouse/pipelines/{PIPELINE}/rollback") in routes
    for method, path in routes:
        anonymous = airflow_app.request(method, path, follow_redirects=False)
        assert anonymous.status_code == 401, (method, path, anonymous.status_code)
        forged = airflow_app.request(
            method,
            path,
            headers={"Authorization": "Bearer not-a-token"},
            cookies={"_token": "not-a-token"},
            follow_redirects=False,
        )
        assert forged.status_code in (401, 403), (method, path, forged.status_code)
        # A browser is sent to Airflow's login page, and back here after it, as
        # Airflow's own pages do.
        if method == "GET":
            browser = airflow_app.get(path, headers={"Accept": "text/html"}, follow_redirects=False)
            assert browser.status_code == 303, (path, browser.status_code)
            login = urlsplit(browser.headers["location"])
            assert login.path.startswith("/auth/") and parse_qs(login.query)["next"] == [
                f"http://127.0.0.1:18080{path}"
            ]
    # A signed-in user without a role (no permission on any DAG) reads no pipeline; a
    # browser reads why.
    nobody = {"Authorization": f"Bearer {_token('')}"}
    assert airflow_app.get(f"/lakehouse/pipelines/{PIPELINE}", headers=nobody).status_code == 403
    refused = airflow_app.get(
        f"/lakehouse/pipelines/{PIPELINE}", headers={**nobody, "Accept": "text/html"}
    )
    assert (
        refused.status_code == 403
        and "you may not read the DAGs of pipeline ad_events" in refused.text
    )
    missing = airflow_app.get(
        "/lakehouse/no/such/page", headers={**_as("VIEWER"), "Accept": "text/html"}
    )
    assert missing.status_code == 404 and "<h1>Not found</h1>" in missing.text
    assert airflow_app.get("/lakehouse/no/such/page", headers=_as("VIEWER")).json() == {
        "detail": "Not Found"
    }
    # Every DAG of a pipeline has its Lakehouse tab.
    for kind in ("stream", "backfill", "rollback", "refresh", "maintenance"):
        tab = airflow_app.get(f"/lakehouse/dags/{PIPELINE}__{kind}", headers=_as("VIEWER"))
        assert tab.status_code == 200 and f'id="pipeline-{PIPELINE}"' in tab.text, kind


def _commit_ids(checkpoint: Path) -> list[int]:
    return sorted(
        int(path.name) for path in (checkpoint / "commits").iterdir() if path.name.isdigit()
    )


def test_a_viewer_reads_every_figure_but_cannot_confirm_a_rollback(
    spark, three_increments, airflow_app
):
    from spark_jobs import service

    home = three_increments  # runs r0, r1, r2 of every hop
    # the copy's commits are as old as the session's template: made now
    for name in ("bronze", "silver", "gold"):
        checkpoint = home / "checkpoints" / PIPELINE / name
        os.utime(checkpoint / "commits" / str(_commit_ids(checkpoint)[-1]))
    service.quality(PIPELINE, "silver", "r2")  # a real GX result and its Data Docs page
    page_file = home / "_ops" / "quality" / PIPELINE / "r2.silver.html"
    rendered = page_file.read_bytes()
    # as a gate in a hop's run leaves it: the result only; the app renders the page
    page_file.unlink()
    late = home / "landing" / PIPELINE / "late-file.json"
    late.write_text('{"ad_id": "x"}\n' * 10)
    viewer = _as("VIEWER")

    listing = airflow_app.get("/lakehouse/?format=json", headers=viewer)
    assert listing.status_code == 200
    [pipeline] = [p for p in listing.json()["pipelines"] if p["pipeline"] == PIPELINE]
    # a pipeline on its schedule: no watcher, so no arrival to show
    assert pipeline["cadence"] == f"every {pipeline['schedule']}" and pipeline["schedule"]
    assert pipeline["last_arrival"] is None
    hops = {hop["hop"]: hop for hop in pipeline["hops"]}
    assert list(hops) == ["bronze", "silver", "gold"]
    for name, hop in hops.items():
        checkpoint = home / "checkpoints" / PIPELINE / name
        assert hop["last_committed_batch"] == _commit_ids(checkpoint)[-1]
        state = checkpoint / "state"
        on_disk = (
            sum(path.stat().st_size for path in state.rglob("*") if path.is_file())
            if state.exists()
            else None
        )
        assert hop["state_bytes"] == on_disk, name
        assert hop["last_run"]["run_id"] == "r2" and hop["freshness"]["last_commit_age_s"] >= 0
    assert hops["bronze"]["backlog"]["landing"] == {"files": 1, "bytes": late.stat().st_size}
    assert hops["silver"]["backlog"]["upstream_versions"] == []

    page = airflow_app.get("/lakehouse/", headers=viewer).text
    assert 'data-hop="gold"' in page and "1 files" in page

    hop_page = airflow_app.get(f"/lakehouse/pipelines/{PIPELINE}/hops/silver", headers=viewer)
    assert hop_page.status_code == 200
    batches = _commit_ids(home / "checkpoints" / PIPELINE / "silver")
    rate_chart = re.search(
        r'<svg class="chart" id="rows-per-second".*?</svg>', hop_page.text, re.S
    ).group(0)
    # one bar per batch the three runs made
    assert rate_chart.count('class="bar"') == len(batches) == 3
    # One quality bar per run with a gate result (r2's, checked above): its share of rules passed.
    checked = json.loads((home / "_ops" / "quality" / PIPELINE / "r2.silver.json").read_text())
    quality_chart = re.search(
        r'<svg class="chart" id="quality".*?</svg>', hop_page.text, re.S
    ).group(0)
    assert quality_chart.count('class="bar"') == 1 and all(
        rule["passed"] for rule in checked["rules"]
    )
    series = airflow_app.get(
        f"/lakehouse/pipelines/{PIPELINE}/hops/silver?format=json", headers=viewer
    ).json()["series"]
    pass_rates = {run["run_id"]: run["quality_pass_rate"] for run in series["runs"]}
    assert pass_rates == {"r0": None, "r1": None, "r2": 1.0}, pass_rates
    # nothing loads from elsewhere
    assert "http://" not in hop_page.text.replace("http://www.w3.org/2000/svg", "")

    # Bronze's quarantine, read without a JVM: every invalid line of the files the runs ingested.
    from testkit.expected import landing_lines, valid_event

    invalid = [
        line
        for name, line in landing_lines(home)
        if valid_event(line) is None and name != late.name
    ]
    held = airflow_app.get(
        f"/lakehouse/pipelines/{PIPELINE}/hops/bronze?format=json", headers=viewer
    ).json()["quarantine"]
    assert (
        held["rows"] == len(invalid) > 0
        and sum(reason["rows"] for reason in held["reasons"]) == held["rows"]
    )
    bronze_page = airflow_app.get(
        f"/lakehouse/pipelines/{PIPELINE}/hops/bronze", headers=viewer
    ).text
    assert f"{held['rows']} rows in" in bronze_page
    assert all(
        html.escape(reason["value"], quote=False) in bronze_page for reason in held["reasons"]
    )

    quality = airflow_app.get(f"/lakehouse/pipelines/{PIPELINE}/quality", headers=viewer).text
    link = re.search(r'class="data-docs" href="([^"]+)"', quality).group(1)
    docs = airflow_app.get(link, headers=viewer)
    # rendered on this first view
    assert docs.status_code == 200 and docs.content == page_file.read_bytes()
    assert b"ad_events.silver" in docs.content and len(docs.content) == pytest.approx(
        len(rendered), rel=0.01
    )

    plan = airflow_app.get(
        f"/lakehouse/pipelines/{PIPELINE}/rollback?hop=silver&to_batch=0", headers=viewer
    )
    assert (
        "undo batches 1..2 (2)" in plan.text
        and 'id="confirm"' not in plan.text
        and "no-permission" in plan.text
    )
    # What it takes away, for people: per hop the batches, each table's rows since the version it
    # goes back to (counted here by delta-rs at both versions), the runs undone, what is read again.
    from deltalake import DeltaTable

    away = airflow_app.get(
        f"/lakehouse/pipelines/{PIPELINE}/rollback?hop=silver&to_batch=0&format=json",
        headers=viewer,
    ).json()["takes_away"]
    assert [(hop["hop"], hop["batches"]) for hop in away][0] == ("silver", [1, 2]) and away[0][
        "reread"
    ]
    assert [run["run_id"] for run in away[0]["runs"]] == ["r2", "r1"] and "gold" in [
        hop["hop"] for hop in away
    ]
    silver = away[0]["tables"][0]
    table = str(home / "tables" / "silver" / "ad_views")
    count = lambda version: DeltaTable(table, version=version).to_pyarrow_table().num_rows
    assert silver["rows"] == count(silver["version_now"]) - count(silver["back_to"]) > 0, silver
    assert 'class="takes-away"' in plan.text and "(UTC)" in plan.text
    replanned = airflow_app.get(
        f"/lakehouse/pipelines/{PIPELINE}/rollback?hop=silver&to_batch=0&replan=true",
        headers=viewer,
    ).text
    assert "replays batches 1..2 as logged" in plan.text and "replays batches 1..2" not in replanned
    assert "next run re-reads" in replanned and 'name="replan" value="true" checked' in replanned
    # `exact`: a plan that replays as logged goes ahead; one that plans afresh is refused,
    # nothing to confirm.
    exact = airflow_app.get(
        f"/lakehouse/pipelines/{PIPELINE}/rollback?hop=silver&to_batch=0&exact=true", headers=viewer
    ).text
    assert (
        "Refused" not in exact
        and 'name="exact" value="true" checked' in exact
        and "no-permission" in exact
    )
    refused_plan = airflow_app.get(
        f"/lakehouse/pipelines/{PIPELINE}/rollback?hop=silver&to_batch=-1&exact=true",
        headers=viewer,
    ).text
    assert (
        "Refused: nothing can be confirmed." in refused_plan and "cannot replay" in refused_plan
    ), refused_plan[-2000:]
    refused = airflow_app.post(
        f"/lakehouse/pipelines/{PIPELINE}/rollback",
        headers=viewer,
        data={"hop": "silver", "to_batch": "0", "form_token": "x"},
    )
    assert refused.status_code == 403

    # Freshness (the spec's 45 minutes): every hop just committed; gold's last commit made an
    # hour old is stale.
    assert {
        name: (hop["freshness"]["limit_s"], hop["freshness"]["stale"]) for name, hop in hops.items()
    } == {name: (2700.0, False) for name in hops}
    gold_checkpoint = home / "checkpoints" / PIPELINE / "gold"
    gold_commit = gold_checkpoint / "commits" / str(_commit_ids(gold_checkpoint)[-1])
    an_hour_ago = time.time() - 3600
    os.utime(gold_commit, (an_hour_ago, an_hour_ago))
    listing = airflow_app.get("/lakehouse/?format=json", headers=viewer).json()
    [pipeline] = [p for p in listing["pipelines"] if p["pipeline"] == PIPELINE]
    assert {hop["hop"]: hop["freshness"]["stale"] for hop in pipeline["hops"]} == {
        "bronze": False,
        "silver": False,
        "gold": True,
    }
    page = airflow_app.get("/lakehouse/", headers=viewer).text
    rows = {
        re.match(r'(\w+)"', row).group(1): row.split("</tr>")[0]
        for row in page.split('<tr class="hop" data-hop="')[1:]
    }
    assert [hop for hop, row in rows.items() if 'class="num bad stale"' in row] == ["gold"], rows
    # The stream DAG's deadline callback, as the executor calls it: the alert names gold;
    # the page shows it.
    from lakehouse_airflow.freshness import freshness_missed

    message = freshness_missed({"dag_run": {"dag_run_id": "scheduled__late"}}, pipeline=PIPELINE)
    [alert] = [
        json.loads(path.read_text())
        for path in (home / "_ops" / "alerts" / PIPELINE).glob("*.json")
    ]
    assert (
        alert["stale"] == ["gold"]
        and alert["dag_run"] == "scheduled__late"
        and alert["freshness"] == "45 minutes"
    )
    assert message.endswith("stale hops: gold"), message
    assert (
        "Freshness deadline missed 1 time(s); last: scheduled__late"
        in airflow_app.get("/lakehouse/", headers=viewer).text
    )


@pytest.mark.parametrize(
    "name",
    [
        "../../../../etc/passwd",
        "..%2F..%2Fetc%2Fpasswd",
        "%2Fetc%2Fpasswd",
        "/etc/passwd",
        ".hidden.html",
        "r2.silver.result.json",
    ],
)
def test_data_docs_refuse_paths_outside_the_quality_folder(airflow_app, lake_home, name):
    folder = lake_home / "_ops" / "quality" / PIPELINE
    folder.mkdir(parents=True)
    (folder / "r2.silver.html").write_text("<html>page</html>")
    (folder / "r2.silver.result.json").write_text("{}")
    (folder / ".hidden.html").write_text("secret")
    (lake_home / "_ops" / "secret.html").write_text("secret")
    viewer = _as("VIEWER")
    assert (
        airflow_app.get(
            f"/lakehouse/pipelines/{PIPELINE}/quality/r2.silver.html", headers=viewer
        ).text
        == "<html>page</html>"
    )
    refused = airflow_app.get(f"/lakehouse/pipelines/{PIPELINE}/quality/{name}", headers=viewer)
    assert "secret" not in refused.text and "root:" not in refused.text
    if refused.request.url.path.startswith(f"/lakehouse/pipelines/{PIPELINE}/quality/"):
        assert refused.status_code == 404  # the client sent the name as it is: the app refused it
    # the client resolved the dots first: the request left the app's folder, as a browser's would
    else:
        assert refused.status_code != 200 or "<html>page</html>" not in refused.text


@pytest.mark.parametrize(
    "name",
    [
        "../secret.html",
        "../../_ops/secret.html",
        "/etc/passwd",
        "a/../../x.html",
        ".hidden.html",
        "r2.silver.result.json",
        "..",
        "",
    ],
)
def test_data_docs_names_are_plain_html_files_of_the_quality_folder(lake_home, name):
    """What the route checks (through the service) before it opens anything, for names a client
    sends without resolving dots: no path, so the page is a 404."""
    from spark_jobs import service
    from spark_jobs.model.lake import Lake

    lake = Lake.named(PIPELINE)
    assert service.data_docs_path(lake, "r2.silver.html").endswith(
        f"_ops/quality/{PIPELINE}/r2.silver.html"
    )
    assert service.data_docs_path(lake, name) is None and service.data_docs_page(lake, name) is None


def test_confirming_a_rollback_triggers_the_rollback_dag_which_then_succeeds(
    spark, three_increments, airflow_app
):
    """A user's confirmation creates a ``ad_events__rollback`` run with ``dry_run`` off (through
    Airflow's own trigger code); a cross-site or forged form does not. The run's conf then runs
    the DAG (in process) and rolls silver back."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    from airflow.models import DagRun
    from airflow.utils.session import create_session

    from spark_jobs.logs import checkpoint_log
    from testkit.airflow import dag_test
    from testkit.paths import ROOT

    checkpoints = three_increments / "checkpoints" / PIPELINE
    before = {hop: _commit_ids(checkpoints / hop) for hop in ("silver", "gold")}
    records = [
        json.loads(path.read_text())
        for path in (three_increments / "_ops" / "runs" / PIPELINE).glob("*.json")
    ]
    r2_batches = {
        record["hop"]: record["batch_ids"] for record in records if record["run_id"] == "r2"
    }
    DagBundlesManager().sync_bundles_to_db()
    sync_bag_to_db(DagBag(dag_folder=str(ROOT / "dags")), "dags-folder", None)
    user = _as("USER")
    url = f"/lakehouse/pipelines/{PIPELINE}/rollback"
    form_page = airflow_app.get(f"{url}?hop=silver&to_run=r2", headers=user).text
    token = re.search(r'name="form_token" value="([^"]+)"', form_page).group(1)
    form = {
        "hop": "silver",
        "to_run": "r2",
        "cascade": "true",
        "exact": "true",
        "form_token": token,
    }

    cross_site = airflow_app.post(url, data=form, headers={**user, "Origin": "http://evil.example"})
    assert cross_site.status_code == 403
    forged_token = token[:-1] + ("1" if token.endswith("0") else "0")
    forged = airflow_app.post(url, data={**form, "form_token": forged_token}, headers=user)
    assert forged.status_code == 403
    assert (
        airflow_app.post(url, data={**form, "form_token": token}, headers=_as("VIEWER")).status_code
        == 403
    )

    confirmed = airflow_app.post(
        url, data=form, headers={**user, "Origin": "http://127.0.0.1:18080"}, follow_redirects=False
    )
    assert confirmed.status_code == 303, confirmed.text
    run_id = parse_qs(urlsplit(confirmed.headers["location"]).query)["triggered"][0]
    with create_session() as session:
        run = (
            session.query(DagRun)
            .filter(DagRun.dag_id == f"{PIPELINE}__rollback", DagRun.run_id == run_id)
            .one()
        )
        run_conf = dict(run.conf)
    assert run_conf == {
        "hop": "silver",
        "to_run": "r2",
        "cascade": True,
        "replan": False,
        "exact": True,
        "dry_run": False,
    }

    _run, state, tasks = dag_test(f"{PIPELINE}__rollback", conf=run_conf)
    assert state == "success" and tasks == {
        "plan": "success",
        "execute": "success",
        "verify": "success",
    }, tasks
    # gold read what silver's r2 wrote: the cascade undid it too
    for hop, commits in before.items():
        first_undone = min(r2_batches[hop])
        assert checkpoint_log.commit_batch_ids(
            str(three_increments / "checkpoints" / PIPELINE / hop)
        ) == [batch for batch in commits if batch < first_undone]


def test_every_page_fits_its_window_at_1400_px_and_at_a_narrow_width(
    spark, three_increments, airflow_app, tmp_path
):
    """Each Lakehouse page as the app serves it, laid out by headless Chromium at 1400 px and at
    480 px: nothing makes the page scroll sideways (a wide table scrolls inside itself), times
    read as times with their zone, and runs are told apart by time and kind."""
    from testkit.browser import Browser

    viewer = _as("VIEWER")
    pages = {
        "pipelines": "/lakehouse/",
        "hop": f"/lakehouse/pipelines/{PIPELINE}/hops/gold",
        "quality": f"/lakehouse/pipelines/{PIPELINE}/quality",
        "rollback": f"/lakehouse/pipelines/{PIPELINE}/rollback?hop=silver&to_batch=0",
        "tab": f"/lakehouse/dags/{PIPELINE}__maintenance",
    }
    with Browser() as browser:
        for name, path in pages.items():
            page = airflow_app.get(path, headers=viewer)
            assert page.status_code == 200, (name, page.status_code)
            saved = tmp_path / f"{name}.html"
            saved.write_text(page.text)
            for width in (1400, 480):
                browser.set_width(width)
                browser.goto(saved.as_uri())
                assert browser.overflow_px() <= 0, (name, width, browser.overflow_px())
    hop = airflow_app.get(pages["hop"], headers=viewer).text
    # committed at, with its zone
    assert re.search(r"<td>20\d\d-\d\d-\d\d \d\d:\d\d:\d\d UTC</td>", hop)
    assert "watermark (ms)" not in hop and str(three_increments) not in hop.split("</h1>")[0]


def test_the_events_page_lists_the_event_log_newest_first_and_filters_it(
    spark, three_increments, airflow_app
):
    """The page reads the event log the commands appended (it writes nothing itself); its rows and
    filters are checked against the table as delta-rs reads it, apart from the code under test."""
    from deltalake import DeltaTable

    from spark_jobs import service
    from spark_jobs.model.lake import Lake

    viewer = _as("VIEWER")
    empty = airflow_app.get(
        f"/lakehouse/pipelines/{PIPELINE}/events?format=json", headers=viewer
    ).json()
    assert (empty["events"], empty["total"]) == ([], 0)  # the fixture's runs appended none
    service.sync_events(Lake.named(PIPELINE))  # what a command does as it ends
    table = DeltaTable(str(three_increments / "_ops" / "events")).to_pandas()
    newest_first = table.sort_values(["timestamp", "sequence"], ascending=False)
    every = airflow_app.get(
        f"/lakehouse/pipelines/{PIPELINE}/events?format=json", headers=viewer
    ).json()
    assert every["total"] == len(table) > 0
    assert [event["event_id"] for event in every["events"]] == list(newest_first.event_id)
    gold = airflow_app.get(
        f"/lakehouse/pipelines/{PIPELINE}/events?hop=gold&type=run_finished&limit=2&format=json",
        headers=viewer,
    ).json()
    wanted = newest_first[
        (newest_first.hop == "gold") & (newest_first.event_type == "run_finished")
    ]
    assert [event["event_id"] for event in gold["events"]] == list(wanted.event_id[:2])
    assert gold["total"] == len(wanted) == 3  # runs r0, r1, r2
    page = airflow_app.get(
        f"/lakehouse/pipelines/{PIPELINE}/events?level=ERROR",
        headers={**viewer, "Accept": "text/html"},
    )
    assert page.status_code == 200 and "No event matches." in page.text  # no run failed
    bad = airflow_app.get(
        f"/lakehouse/pipelines/{PIPELINE}/events?type=nope&format=json", headers=viewer
    )
    assert bad.status_code == 400 and "is not an event type" in bad.json()["detail"]
    listed = airflow_app.get(
        f"/lakehouse/pipelines/{PIPELINE}", headers={**viewer, "Accept": "text/html"}
    )
    assert f'href="/lakehouse/pipelines/{PIPELINE}/events"' in listed.text
