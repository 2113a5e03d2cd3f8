"""``spark_jobs/perform.py``: what a performed call prints beside its result."""

from __future__ import annotations

import re

import pytest

from spark_jobs.perform import progress

pytestmark = pytest.mark.unit


def test_progress_lines_carry_the_seconds_since_the_command_began_and_json_keeps_quiet(capsys):
    progress(True)("[bronze] batch 0: 10 rows")
    assert capsys.readouterr().err == ""
    progress(False)("[bronze] batch 0: 10 rows")
    assert re.fullmatch(r" *\d+\.\ds \[bronze\] batch 0: 10 rows\n", capsys.readouterr().err)
