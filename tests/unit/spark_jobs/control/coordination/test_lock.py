"""``spark_jobs/control/coordination/lock.py``: the pipeline lock, held by another process and freed
by the kernel when that process is killed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit


def test_a_killed_holder_does_not_keep_the_pipeline_lock(tmp_path, monkeypatch):
    import signal
    import time

    from spark_jobs.control.coordination.lock import holder, pipeline_lock
    from spark_jobs.model.errors import PipelineBusy
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.spec import get_spec

    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path))
    lake = Lake.open(get_spec("ad_events"))
    script = (
        "from spark_jobs.model.lake import Lake; from spark_jobs.model.spec import get_spec; "
        "from spark_jobs.control.coordination.lock import pipeline_lock; import time\n"
        "with pipeline_lock(Lake.open(get_spec('ad_events')), 'run', 'r-held'):\n"
        "    print('held', flush=True); time.sleep(600)"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "LAKEHOUSE_HOME": str(tmp_path)},
    )
    try:
        assert process.stdout.readline().strip() == "held"
        assert holder(lake)["run_id"] == "r-held"
        told = []
        with pytest.raises(PipelineBusy, match="busy: run r-held"):
            with pipeline_lock(lake, "backfill", wait_s=1.2, progress=told.append):
                pass
        assert len(told) == 1 and told[0].startswith(
            "backfill waits for the pipeline's lock: run r-held (pid "
        ), told
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    started = time.monotonic()
    # taken at once: the kernel dropped the dead holder's lock
    with pipeline_lock(lake, "run", "r-next"):
        assert time.monotonic() - started < 1
        assert holder(lake)["run_id"] == "r-next"
    assert holder(lake) is None
