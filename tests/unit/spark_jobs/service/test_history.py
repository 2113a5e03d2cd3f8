"""``spark_jobs/service/history.py``: the event log as the commands keep it and the CLI reads it:
a refused command is recorded with who asked, the log is synced after every writing command
whatever happened (a failed sync only warns), a dry run writes nothing; ``lakehouse events``
filters, limits, follows and refuses bad filters in one line. A real lake folder and a real
Delta table (delta-rs); no JVM (every command here is refused or a dry run before Spark)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from spark_jobs.cli import main
from spark_jobs.logs.ops import write_record
from spark_jobs.model.errors import PipelineBusy, RunFailed, UsageError
from spark_jobs.model.lake import Lake
from spark_jobs.model.records import RunRecord
from spark_jobs.model.spec import get_spec
from spark_jobs.service import history

pytestmark = pytest.mark.unit


@pytest.fixture
def lake(pipelines, lake_home) -> Lake:
    pipelines()
    return Lake.open(get_spec("ad_events"))


def _logged(lake: Lake) -> list[dict]:
    """The event log's rows, read by delta-rs directly (not by the code under test)."""
    from deltalake import DeltaTable

    frame = DeltaTable(lake.events).to_pandas()
    return frame.sort_values("sequence").to_dict("records")


def _record(lake: Lake, run_id: str, hop: str = "bronze", rows_out: int = 5) -> None:
    record = RunRecord("ad_events", hop, run_id, "run-once", started_at=time.time() - 30)
    record.rows_out = rows_out
    record.finish("succeeded")
    write_record(lake, record)


def test_a_refused_command_is_recorded_with_who_asked_and_the_log_synced_after_it(lake):
    _record(lake, "r1")
    with pytest.raises(PipelineBusy), history.recorded("ad_events", "backfill", "silver", "b7"):
        raise PipelineBusy("pipeline ad_events is busy: run r-other holds it")
    [refusal] = [json.loads(path.read_text()) for path in Path(lake.refusals).iterdir()]
    assert refusal["hop"] == "silver" and refusal["run_id"] == "b7"
    assert refusal["error"] == "PipelineBusy" and refusal["origin"]["command"] == "backfill"
    events = _logged(lake)
    assert [event["event_type"] for event in events] == ["run_started", "run_finished", "refused"]
    assert events[-1]["level"] == "ERROR" and "is busy: run r-other" in events[-1]["message"]


def test_a_failed_run_is_no_refusal_but_its_records_are_synced(lake):
    _record(lake, "r1")
    with pytest.raises(RunFailed), history.recorded("ad_events", "run"):
        raise RunFailed("silver failed")
    assert not Path(lake.refusals).exists()
    assert [event["event_type"] for event in _logged(lake)] == ["run_started", "run_finished"]


def test_a_dry_run_writes_nothing_not_even_its_refusal(lake):
    _record(lake, "r1")
    with pytest.raises(UsageError), history.recorded("ad_events", "rollback", dry_run=True):
        raise UsageError("refused plan")
    assert not Path(lake.refusals).exists() and not Path(lake.events).exists()


def test_a_sync_that_fails_warns_and_the_command_ends_as_it_would(lake, capsys):
    _record(lake, "r1")
    Path(lake.events).parent.mkdir(parents=True, exist_ok=True)
    Path(lake.events).write_text("not a table")  # a file where the table's folder goes
    with history.recorded("ad_events", "run"):
        pass
    assert "warning: the event log was not updated" in capsys.readouterr().err


def test_a_task_sends_its_origin_to_the_shared_driver_and_the_refusal_names_it(lake):
    from spark_jobs.control.coordination.lock import pipeline_lock
    from spark_jobs.shared_driver import perform_call

    sent = {"interface": "airflow", "user": "airflow", "dag_id": "ad_events__stream"}
    wire = {"command": "run", "pipeline": "ad_events", "hop": "gold", "origin": sent}
    with pipeline_lock(lake, "run", "r-test"):
        assert perform_call(wire) == 2
    [refusal] = [json.loads(path.read_text()) for path in Path(lake.refusals).iterdir()]
    assert refusal["origin"] == {**sent, "command": "run"}
    [event] = _logged(lake)
    assert (event["dag_id"], event["hop"], event["event_type"]) == (
        "ad_events__stream",
        "gold",
        "refused",
    )


def test_lakehouse_events_filters_limits_and_prints_json(lake, capsys):
    for number in range(4):
        _record(lake, f"r{number}", hop=("bronze", "silver")[number % 2], rows_out=number)
    assert main(["events", "ad_events", "--hop", "silver", "--type", "run_finished", "--json"]) == 0
    silver = json.loads(capsys.readouterr().out)["events"]
    assert [event["run_id"] for event in silver] == ["r1", "r3"]
    assert [event["details"]["rows_out"] for event in silver] == [1, 3]
    assert main(["events", "ad_events", "--limit", "3", "--json"]) == 0
    every = _logged(lake)
    assert [event["event_id"] for event in json.loads(capsys.readouterr().out)["events"]] == [
        event["event_id"] for event in every[-3:]
    ]
    assert main(["events", "--level", "error"]) == 0
    assert capsys.readouterr().out.strip() == "no events"


@pytest.mark.parametrize(
    "argv, problem",
    [
        (["events", "ad_events", "--hop", "nope"], "unknown hop"),
        (["events", "--hop", "silver"], "--hop needs a pipeline"),
        (["events", "ad_events", "--limit", "-2"], "--limit -2 is negative"),
        (["events", "ad_events", "--since", "yesterday"], "--since 'yesterday' is not an ISO"),
    ],
)
def test_bad_filters_are_one_line_and_exit_2(lake, capsys, argv, problem):
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: ") and problem in error and "\n" not in error


def test_following_gives_what_is_there_then_only_what_arrives(lake):
    _record(lake, "r1")
    followed = history.follow_events("ad_events", interval_s=0)
    first = next(followed)
    assert [event["event_type"] for event in first] == ["run_started", "run_finished"]
    assert next(followed) == []
    _record(lake, "r2", hop="gold")
    assert [(event["run_id"], event["hop"]) for event in next(followed)] == [
        ("r2", "gold"),
        ("r2", "gold"),
    ]
