"""``spark_jobs/shared_driver.py``: a call a task sends the shared driver is performed as the CLI
would perform its command line: the same ``error:`` line and exit code for every problem found
before Spark starts, and one line naming an unknown command."""

from __future__ import annotations

import pytest

from spark_jobs.cli import main
from spark_jobs.model.calls import BackfillCall, RollbackCall, RunCall
from spark_jobs.shared_driver import perform_call

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "call",
    [
        RunCall(pipeline="nope"),
        RunCall(pipeline="ad_events", hop="platinum"),
        RunCall(pipeline="ad_events", run_id="../../etc"),
        RunCall(pipeline="ad_events", quality="sometimes"),
        BackfillCall(pipeline="ad_events", start="2026-03-02", end="2026-03-01"),
        RollbackCall(pipeline="ad_events", hop="platinum", to_batch=1),
        RollbackCall(pipeline="ad_events", hop="silver", to_time="yesterday"),
    ],
    ids=["pipeline", "hop", "run-id", "quality", "range", "rollback-hop", "time"],
)
def test_the_driver_answers_a_bad_call_as_the_cli_answers_its_command_line(call, capsys):
    code = perform_call(call.to_wire())
    driver = capsys.readouterr()
    assert code == 2 and driver.err.startswith("error: ") and driver.err.count("\n") == 1
    # the CLI's parser refuses a quality it does not list before any call is made
    if getattr(call, "quality", None) != "sometimes":
        assert (main(call.argv()), *capsys.readouterr()) == (code, driver.out, driver.err)


def test_an_unknown_command_on_the_wire_is_one_line(capsys):
    assert perform_call({"command": "drop", "pipeline": "ad_events"}) == 2
    assert capsys.readouterr().err == (
        "error: 'drop' is not a command a task can send: one of run, backfill, rollback, "
        "refresh, maintain\n"
    )
