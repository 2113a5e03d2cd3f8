"""``spark_jobs/engine/maintenance.py``: ``lakehouse maintain --dry-run`` reads the logs only (no
JVM) and changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit


def test_a_dry_run_reads_the_logs_only_starts_no_jvm_and_changes_nothing(tmp_path):
    """``maintain --dry-run`` on the history fixture, in a fresh process: exit 0, no PySpark
    imported, no file changed, and each table's file count what delta-rs (an independent reader)
    counts."""
    import os
    import subprocess
    import sys

    from deltalake import DeltaTable

    from testkit.lakes import fixture_lake
    from testkit.paths import file_tree

    lake = fixture_lake("history", tmp_path)
    env = {
        **os.environ,
        "LAKEHOUSE_HOME": lake.home,
        "LAKEHOUSE_PIPELINES": str(Path(lake.spec.source).parent.parent),
    }
    code = (
        "import json, sys; from spark_jobs.cli import main; import contextlib, io; out = "
        "io.StringIO()\nwith contextlib.redirect_stdout(out): code = main(['maintain', "
        "'ad_events', '--dry-run', '--json'])\nprint(json.dumps({'code': code, 'pyspark': "
        "'pyspark' in sys.modules, 'out': json.loads(out.getvalue())}))"
    )
    tree = file_tree(Path(lake.home))
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (result["code"], result["pyspark"]) == (0, False), done.stderr[-2000:]
    assert file_tree(Path(lake.home)) == tree
    counts = {entry["table"]: entry["files_before"] for entry in result["out"]["tables"]}
    assert counts and counts == {table: len(DeltaTable(table).file_uris()) for table in counts}
