"""``plugins/lakehouse_airflow/assets.py``: each hop's table as an Airflow asset, against the
DAGs the platform's DAG factory builds from the example specs, the specs' own files, Airflow's
serialization (what the scheduler matches a user's DAG with) and Airflow's real outlet event
accessors, fed with the run records of lakes real runs wrote (``tests/fixtures/lakes/``).

``test_airflow.py`` has the asset names each producing task of ad_events reads and writes;
``test_operators.py`` the landing asset of a folder a hop names; ``test_platform.py`` the asset
graph the running platform draws. Here: the assets' identity (name and URI) across DAGs and
pipelines, a user's DAG scheduled on a table, and the event a producing task gives.
"""

from __future__ import annotations

import json

import pendulum
import pytest
import yaml

from testkit.lakes import fixture_lake
from testkit.paths import EXAMPLES

pytestmark = [pytest.mark.unit, pytest.mark.airflow]


def _raw_spec(pipeline: str) -> dict:
    return yaml.safe_load((EXAMPLES / pipeline / f"{pipeline}.yaml").read_text())


def _asset_dependencies(dag) -> list[dict]:
    """The DAG's asset dependencies as Airflow serializes them (the scheduler's and the UI's)."""
    from airflow.serialization.serialized_objects import DagSerialization

    serialized = DagSerialization.to_dict(dag)["dag"]["dag_dependencies"]
    return [each for each in serialized if each["dependency_type"] == "asset"]


def test_a_dag_scheduled_on_a_table_waits_on_the_asset_its_producing_tasks_write(
    airflow_in_process, monkeypatch
):
    """The module docstring's use, ``schedule=[table_asset("ad_events", "gold")]``. Airflow links
    a producer and a consumer by the asset's name and URI, and the URI does not depend on where
    the lake lives (Airflow refuses a second URI for a name)."""
    from airflow.sdk import DAG
    from lakehouse_airflow import dag_factory
    from lakehouse_airflow.assets import table_asset

    from spark_jobs.model.spec import get_spec

    [gold_table] = [hop["table"] for hop in _raw_spec("ad_events")["hops"] if hop["name"] == "gold"]
    gold = {"name": "ad_events.gold", "uri": f"lakehouse://ad_events/{gold_table}"}
    spec = get_spec("ad_events")
    for dag in (dag_factory.build_stream_dag(spec), dag_factory.build_backfill_dag(spec)):
        produced = [json.loads(each["dependency_id"]) for each in _asset_dependencies(dag)]
        assert gold in produced, (dag.dag_id, produced)

    monkeypatch.setenv("LAKEHOUSE_HOME", "s3a://another-bucket/lake")  # the lake moved
    start = pendulum.datetime(2026, 1, 1, tz="UTC")
    with DAG("reports", schedule=[table_asset("ad_events", "gold")], start_date=start) as reports:
        pass
    [consumed] = _asset_dependencies(reports)
    assert (consumed["source"], consumed["target"]) == ("asset", "reports")
    assert json.loads(consumed["dependency_id"]) == gold
    assert table_asset(spec, "gold") == table_asset("ad_events", "gold")


def test_every_asset_a_producing_task_reads_is_the_one_above_it_in_every_example(
    airflow_in_process,
):
    """In every DAG of every example pipeline (what Airflow parses), a table's producing task
    reads the very assets (name and URI) the producing tasks of its upstream hops write, or its
    landing folder's, so Airflow draws one lineage graph; and no name has two URIs."""
    from lakehouse_airflow.dag_factory import build_all

    dags = build_all()
    written = {}  # asset name -> the asset, as every task writing it has it
    for dag in dags.values():
        for task in dag.tasks:
            for asset in task.outlets:
                assert written.setdefault(asset.name, asset) == asset, (dag.dag_id, task.task_id)
    pipelines = sorted({dag_id.split("__")[0] for dag_id in dags})
    assert pipelines == sorted(path.name for path in EXAMPLES.iterdir() if path.is_dir())
    for pipeline in pipelines:
        raw = _raw_spec(pipeline)
        producers = [dags[f"{pipeline}__stream"], dags[f"{pipeline}__backfill"]]
        for hop in raw["hops"]:
            table = written[f"{pipeline}.{hop['name']}"]
            assert (table.uri, table.group) == (
                f"lakehouse://{pipeline}/{hop['table']}",
                "lakehouse",
            )
            upstream = hop.get("upstream")
            if upstream is None:  # an ingest hop: its landing folder
                folder = hop.get("landing") or raw["landing"]
                expected = [(f"lakehouse://{pipeline}/{folder}", "lakehouse")]
                read = [(asset.uri, asset.group) for asset in _inlets(producers, table)]
            else:
                names = [upstream] if isinstance(upstream, str) else upstream
                expected = [written[f"{pipeline}.{name}"] for name in names]
                read = _inlets(producers, table)
            assert read == expected * len(producers), (pipeline, hop["name"])


def _inlets(dags, table) -> list:
    """The inlets of the tasks of ``dags`` that write ``table``, one task after the other."""
    return [
        asset
        for dag in dags
        for task in dag.tasks
        if table in task.outlets
        for asset in task.inlets
    ]


@pytest.fixture
def history(tmp_path, monkeypatch):
    """The fixture lake of runs r0..r2 and a backfill b1, as this process's lake; its folder."""
    lake = fixture_lake("history", tmp_path)
    monkeypatch.setenv("LAKEHOUSE_HOME", lake.home)
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(tmp_path / "history-pipelines"))
    return tmp_path / "history"


def _record(folder, run_id: str, hop: str) -> dict:
    return json.loads((folder / "_ops" / "runs" / "ad_events" / f"{run_id}.{hop}.json").read_text())


def test_a_producing_task_gives_its_tables_event_the_runs_versions_and_rows(
    airflow_in_process, history
):
    """What a DAG scheduled on the table reads in its triggering event: the stream's gate after
    a run, the backfill's hop task after a backfill, and the run that created the table."""
    from airflow.sdk.execution_time.context import OutletEventAccessors
    from lakehouse_airflow import dag_factory
    from lakehouse_airflow.assets import announce

    from spark_jobs.model.spec import get_spec

    spec = get_spec("ad_events")
    stream, backfill = dag_factory.build_stream_dag(spec), dag_factory.build_backfill_dag(spec)
    table = f"{history}/tables/gold/campaign_views_10s"
    for task, run_id in (
        (stream.get_task("gate_gold"), "r1"),
        (backfill.get_task("gold"), "b1"),
        (stream.get_task("gate_gold"), "r0"),
    ):
        record = _record(history, run_id, "gold")
        versions = record["tables"][table]
        expected = {
            "version": versions["version_after"],
            "previous_version": versions["version_before"],
            "rows": record["rows_out"],
            "quarantined": record["rows_quarantined"],
            "run_id": run_id,
            "mode": record["mode"],
        }
        events = OutletEventAccessors()  # what Airflow gives the task as ``outlet_events``
        assert announce(events, "ad_events", "gold", run_id) == expected
        [outlet] = task.outlets
        # looking the outlet up adds an empty event when announce keyed another asset
        assert events[outlet].extra == expected and len(events) == 1, run_id
        json.dumps(events[outlet].extra)  # Airflow stores it as JSON
    assert _record(history, "r0", "gold")["tables"][table]["version_before"] is None  # created


def test_a_run_that_wrote_no_row_ends_the_task_skipped_and_gives_no_event(
    airflow_in_process, tmp_path, monkeypatch
):
    from airflow.sdk.exceptions import AirflowSkipException
    from airflow.sdk.execution_time.context import OutletEventAccessors
    from lakehouse_airflow.assets import announce

    lake = fixture_lake("straddle", tmp_path)
    monkeypatch.setenv("LAKEHOUSE_HOME", lake.home)
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(tmp_path / "straddle-pipelines"))
    idle = _record(tmp_path / "straddle", "s1", "bronze")  # found nothing new
    [change] = [idle["tables"][table] for table in idle["tables"] if "/bronze/" in table]
    assert idle["rows_out"] == 0 and change["version_before"] == change["version_after"]
    for run_id in ("s1", "a-run-that-never-ran-bronze"):
        events = OutletEventAccessors()
        with pytest.raises(AirflowSkipException, match=f"run {run_id} wrote and deleted no row"):
            announce(events, "ad_events", "bronze", run_id)
        assert len(events) == 0
    # outside a task (no outlet events): nothing to skip
    assert announce(None, "ad_events", "bronze", "s1") is None
    assert (
        announce(None, "ad_events", "bronze", "s0")["rows"]
        == _record(tmp_path / "straddle", "s0", "bronze")["rows_out"]
    )


def test_a_run_that_only_deleted_rows_gives_an_event(airflow_in_process, history):
    """A changes hop's run whose MERGE only deleted rows wrote none, but changed its table: a DAG
    scheduled on the table runs after it (the run record as such a run writes it)."""
    from airflow.sdk.execution_time.context import OutletEventAccessors
    from lakehouse_airflow.assets import announce

    record = {**_record(history, "r1", "gold"), "run_id": "d1", "rows_out": 0, "rows_deleted": 2}
    (history / "_ops" / "runs" / "ad_events" / "d1.gold.json").write_text(json.dumps(record))
    [versions] = record["tables"].values()
    assert versions["version_after"] != versions["version_before"]
    events = OutletEventAccessors()
    extra = announce(events, "ad_events", "gold", "d1")
    assert (extra["rows"], extra["rows_deleted"], extra["version"]) == (
        0,
        2,
        versions["version_after"],
    )
    assert len(events) == 1
