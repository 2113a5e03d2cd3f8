"""``spark_jobs/model/errors.py``: the errors a user can act on, against what their handlers
rely on: the CLI's handler (``spark_jobs.perform.answered``) prints each as one ``error:`` line
and exits with its code (docs/reference/cli.md: 2 for what the user can fix, 1 for a run or gate
that failed), the handlers that catch a family of them, and the details a handler reads beside
the message. ``test_cli.py`` has bad usage and a missing Java or jars through the real CLI."""

from __future__ import annotations

import inspect

import pytest

from spark_jobs.model import errors
from spark_jobs.perform import answered

pytestmark = pytest.mark.unit

# A Spark job started and failed, a gate stopped the run, what a stream must read is gone
# (docs/guides/maintenance.md: "stops the run (exit 1)"), a checkpoint log Spark cannot read.
FAILED_RUNS = {"RunFailed", "QualityGateFailed", "DataGone", "DamagedLog"}


def _one_of_each() -> list[errors.LakehouseError]:
    """An instance of every error class the module defines, built as its raisers build it."""
    built = []
    for name, cls in inspect.getmembers(errors, inspect.isclass):
        if cls.__module__ != errors.__name__:
            continue
        if cls is errors.DamagedLog:
            built.append(cls("/lake/checkpoints/p/gold/commits/7", "empty file"))
        elif cls is errors.CodeChanged:
            built.append(cls(f"{name}: run `lakehouse refresh p --hop gold`", hop="gold"))
        else:
            built.append(cls(f"{name}: what is wrong and how to fix it"))
    return built


def test_the_cli_prints_every_error_as_its_one_line_and_exits_1_for_a_failed_run_else_2(capsys):
    built = _one_of_each()
    # every class of the module is an error the CLI, the Airflow tasks and the UI catch
    assert all(isinstance(error, errors.LakehouseError) for error in built)
    assert {type(error).__name__ for error in built} >= FAILED_RUNS | {"UsageError", "SetupError"}
    for error in built:

        def command(error=error) -> int:
            raise error

        code = answered(command)
        out, err = capsys.readouterr()
        expected_code = 1 if type(error).__name__ in FAILED_RUNS else 2
        assert (code, out, err) == (expected_code, "", f"error: {error.args[0]}\n"), type(error)


def test_a_handler_of_a_family_catches_its_members():
    """``except RunFailed`` (a run's failure) takes a failed gate; a damaged log file is a
    damaged checkpoint, and a ``ValueError`` for the readers that skip what they cannot parse."""
    with pytest.raises(errors.RunFailed):
        raise errors.QualityGateFailed("quality gate of silver failed")
    for family in (errors.CheckpointDamaged, ValueError):
        with pytest.raises(family):
            raise errors.DamagedLog("/lake/checkpoints/p/gold/offsets/3", "truncated JSON")
    # a refused rollback (nothing changed, exit 2) is no failed run
    assert not issubclass(errors.RollbackRefused, errors.RunFailed)


def test_an_error_keeps_what_its_handler_reads_beside_a_message_of_one_line():
    path, reason = "/lake/checkpoints/p/gold/commits/7", "version line only"
    damaged = errors.DamagedLog(path, reason)
    assert (damaged.path, damaged.reason) == (path, reason)
    assert str(damaged) == (
        "/lake/checkpoints/p/gold/commits/7: version line only "
        "(see `lakehouse checkpoint validate`)"
    )
    # The hop the stream DAG's check names, not in the line the CLI prints.
    changed = errors.CodeChanged("hop gold's query changed: run `lakehouse refresh`", hop="gold")
    assert changed.hop == "gold" and str(changed) == changed.args[0]
    # The refused plan the CLI prints before the line, when there is one.
    plan = object()
    assert errors.RollbackRefused("refused", plan).plan is plan
    assert errors.RollbackRefused("refused").plan is None
