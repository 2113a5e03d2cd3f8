"""``spark_jobs/engine/progress.py``: a run's progress lines go to stderr, a run with no lock has a
fence that does nothing, and a failure is reported by its first line. Plain Python errors and a
stand-in with a JVM error's ``desc`` (no JVM)."""

from __future__ import annotations

import pytest

from spark_jobs.engine.progress import first_line, stderr_progress, unfenced

pytestmark = pytest.mark.unit


def test_a_progress_line_goes_to_stderr_whole_and_nothing_to_stdout(capsys):
    stderr_progress("[bronze] batch 3: 1,200 rows (400 rows/s)")
    stderr_progress("second")
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "[bronze] batch 3: 1,200 rows (400 rows/s)\nsecond\n"


def test_the_fence_of_a_run_without_a_lock_lets_every_batch_through():
    assert unfenced() is None


def test_a_failure_is_its_first_line_after_any_leading_blank_lines():
    error = RuntimeError("\n\n   boom: the table is gone\n\tat org.apache.X(X.java:1)\n")
    assert first_line(error) == "boom: the table is gone"


def test_a_jvm_error_is_its_description_not_its_whole_text():
    """Py4J-style errors carry the Java message in ``desc``; their ``str`` is a long trace."""

    class JvmError(Exception):
        desc = "[DELTA_TABLE_NOT_FOUND] Delta table `t` doesn't exist.\nJVM stacktrace: ..."

    error = JvmError("An error occurred while calling o42.load.\nTrace: ...")
    assert first_line(error) == "[DELTA_TABLE_NOT_FOUND] Delta table `t` doesn't exist."


def test_an_empty_description_falls_back_to_the_errors_own_text():
    class JvmError(Exception):
        desc = ""

    assert first_line(JvmError("what str says")) == "what str says"

    class NoDesc(Exception):
        desc = None

    assert first_line(NoDesc("plain\nsecond")) == "plain"


def test_a_first_line_is_cut_at_500_characters():
    error = ValueError("x" * 499 + "yz" + "\nnext")
    assert first_line(error) == "x" * 499 + "y"
    assert len(first_line(ValueError("a" * 500))) == 500


def test_an_error_with_no_text_is_named_by_its_type():
    assert first_line(KeyboardInterrupt()) == "KeyboardInterrupt"
    assert first_line(ValueError("  \n \t ")) == "ValueError"

    class Blank(Exception):
        desc = "   "

    # a blank description is taken as the text: blank, so the type names it
    assert first_line(Blank("ignored")) == "Blank"


def test_any_object_is_reported_by_its_text():
    assert first_line("a message, not an error\nmore") == "a message, not an error"
    assert first_line(42) == "42"
