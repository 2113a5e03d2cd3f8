"""OpenLineage from the hop tasks, through Airflow's real OpenLineage provider: ``airflow dags
test`` of the stream DAG (each hop a spark-submit) with ``OPENLINEAGE_URL`` pointing at a small
HTTP receiver on 127.0.0.1 in this test. Each hop task's START and COMPLETE events must name its
inputs and outputs as the spec says (computed here from the spec's paths), the outputs' columns as
delta-rs reads them, the rows the run record says it wrote, the gate's assertions as its result
file says, and the Airflow DAG run as parent. Without ``OPENLINEAGE_URL`` nothing is sent; with
a consumer that is down the DAG run succeeds all the same."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from testkit.expected import assert_tables_match_landing
from testkit.paths import ROOT, VENV_BIN

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.quality]

HOPS = ("bronze", "silver", "gold")


class Receiver:
    """An OpenLineage consumer: every event POSTed to it, as JSON."""

    def __init__(self):
        received = self.events = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                received.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _dags_test(env: dict, day: str, extra: dict) -> None:
    done = subprocess.run(
        [str(VENV_BIN / "airflow"), "dags", "test", "ad_events__stream", day],
        env={**env, **extra},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def _columns(table: Path) -> list[tuple[str, str]]:
    from deltalake import DeltaTable

    return [(field.name, field.type.type) for field in DeltaTable(str(table)).schema().fields]


def test_each_hop_task_sends_its_datasets_rows_and_gate_to_an_openlineage_consumer(
    airflow_env, lake_home
):
    from spark_jobs.cli import main

    receiver = Receiver()
    try:
        assert main(["generate", "ad_events", "--events", "600", "--start", "2026-03-03"]) == 0
        _dags_test(airflow_env, "2026-03-04", {})
        assert receiver.events == []  # off without a transport
        start = "2026-03-03T06:00"
        assert main(["generate", "ad_events", "--events", "600", "--start", start]) == 0
        on = {"OPENLINEAGE_URL": receiver.url, "OPENLINEAGE_NAMESPACE": "lakehouse"}
        _dags_test(airflow_env, "2026-03-05", on)
    finally:
        receiver.stop()
    _check_events(receiver.events, lake_home)

    # A consumer that is down costs the run little: with the transport the guide recommends (a
    # short timeout, no retries), the events are dropped and the run succeeds.
    start = "2026-03-03T12:00"
    assert main(["generate", "ad_events", "--events", "600", "--start", start]) == 0
    down = {"type": "http", "url": receiver.url, "timeout": 1, "retry": {"total": 0}}
    _dags_test(airflow_env, "2026-03-06", {"AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(down)})
    assert_tables_match_landing(lake_home)


def _check_events(events: list[dict], lake_home: Path) -> None:
    # what each hop reads and writes, from the spec's own keys
    spec = yaml.safe_load((ROOT / "examples/ad_events/ad_events.yaml").read_text())
    hops = {hop["name"]: hop for hop in spec["hops"]}
    tables = {name: lake_home / hop["table"] for name, hop in hops.items()}
    reads = {
        "bronze": [("file", str(lake_home / spec["landing"]))],
        "silver": [("file", str(tables["bronze"]))],
        "gold": [("file", str(tables["silver"]))],
    }
    writes = {
        name: [("file", str(lake_home / hop[key])) for key in ("table", "quarantine") if key in hop]
        for name, hop in hops.items()
    }
    # the DAG run's own event (its COMPLETE: `dags test` runs no scheduler to send its START)
    dag_runs = {
        event["run"]["runId"] for event in events if event["job"]["name"] == "ad_events__stream"
    }
    assert len(dag_runs) == 1, [event["job"]["name"] for event in events]
    runs = sorted(Path(lake_home, "_ops/runs/ad_events").glob("*.json"))
    for hop in HOPS:
        mine = [event for event in events if event["job"]["name"] == f"ad_events__stream.{hop}"]
        kinds = [event["eventType"] for event in mine]
        assert kinds.count("START") == 1 and kinds.count("COMPLETE") == 1, (hop, kinds)
        for event in mine:
            assert event["job"]["namespace"] == "lakehouse"
            named = [(each["namespace"], each["name"]) for each in event["inputs"]]
            assert named == reads[hop], (hop, event["eventType"])
            assert [(each["namespace"], each["name"]) for each in event["outputs"]] == writes[hop]
            parent = event["run"]["facets"]["parent"]
            assert parent["job"]["name"] == "ad_events__stream"
            assert parent["run"]["runId"] in dag_runs
        [complete] = [event for event in mine if event["eventType"] == "COMPLETE"]
        table = complete["outputs"][0]
        fields = [(each["name"], each["type"]) for each in table["facets"]["schema"]["fields"]]
        assert fields == _columns(tables[hop])
        # the rows the hop's last run wrote, as its run record says
        record = max(
            (json.loads(path.read_text()) for path in runs if path.name.endswith(f".{hop}.json")),
            key=lambda record: record["started_at"],
        )
        stats = table["outputFacets"]["outputStatistics"]
        assert stats["rowCount"] == record["rows_out"] > 0
        summary = json.loads(
            Path(lake_home, "_ops/quality/ad_events", f"{record['run_id']}.{hop}.json").read_text()
        )
        assertions = table["facets"]["dataQualityAssertions"]["assertions"]
        assert [(each["assertion"], each["success"]) for each in assertions] == [
            (rule["rule"], rule["passed"]) for rule in summary["rules"]
        ]
        assert assertions  # every hop of the example has a suite
