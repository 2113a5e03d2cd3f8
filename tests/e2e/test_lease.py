"""The pipeline lock on an object-store lake: a lease object written with S3
conditional writes, against the real S3 server (SeaweedFS on loopback,
``include/scripts/s3_server.py``).

Three ways it must hold: two processes contending never hold it at once; a holder killed with
SIGKILL stops renewing, its lease expires and the next job proceeds; a holder paused past its
expiry (SIGSTOP) while another took the lease over must not commit when it wakes up.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from s3_server import BUCKET  # include/scripts (tests/conftest.py puts it on the path)

from spark_jobs.model.errors import PipelineBusy

pytestmark = [pytest.mark.integration]

LEASE_S = 3


@pytest.fixture
def s3_lake(s3, monkeypatch, request) -> dict[str, str]:
    """An S3 lake of its own for this test: the environment a job on it gets."""
    env = {
        **s3.env(),
        "LAKEHOUSE_HOME": f"s3://{BUCKET}/{request.node.name[:40]}",
        "LAKEHOUSE_LEASE_SECONDS": str(LEASE_S),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return {**os.environ, **env}


def _open_lake():
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.spec import get_spec

    return Lake.open(get_spec("ad_events"))


CONTENDER = """
import sys, time
from spark_jobs.control.coordination.lock import pipeline_lock
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import get_spec
lake = Lake.open(get_spec("ad_events"))
for turn in range(int(sys.argv[2])):
    with pipeline_lock(lake, "contender", run_id=sys.argv[1], wait_s=60):
        with open(sys.argv[3], "a") as log:
            log.write(f"start {sys.argv[1]}\\n")
        time.sleep(0.3)
        with open(sys.argv[3], "a") as log:
            log.write(f"end {sys.argv[1]}\\n")
"""


def test_two_processes_contending_never_hold_the_lease_at_once(s3_lake, tmp_path):
    log = tmp_path / "turns.log"
    jobs = [
        subprocess.Popen(
            [sys.executable, "-c", CONTENDER, name, "4", str(log)],
            env=s3_lake,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    for job in jobs:
        assert job.wait(timeout=180) == 0, job.stderr.read()[-2000:]
    lines = log.read_text().splitlines()
    assert len(lines) == 16 and sorted(lines).count("start a") == 4
    for start, end in zip(lines[::2], lines[1::2]):  # every turn ends before the next begins
        assert start.startswith("start ") and end == "end " + start.split()[1], lines


HOLDER = """
import sys, time
from spark_jobs.control.coordination.lease import Lease, LeaseLost
lease = Lease(sys.argv[1])
assert lease.try_take({"action": "holder", "run_id": "h"}) is None
print("held", flush=True)
try:
    for commit in range(1000):
        print("sleeping", flush=True)
        time.sleep(1.5)
        lease.check()  # the fencing check before each commit
        with open(sys.argv[2], "a") as log:
            log.write(f"commit {commit} {time.time()}\\n")
except LeaseLost as error:
    print("fenced:", error, flush=True)
    sys.exit(3)
"""


def _start_holder(env, path: str, log) -> subprocess.Popen:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, path, str(log)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert holder.stdout.readline().strip() == "held", holder.stderr.read()[-2000:]
    return holder


def test_a_killed_holders_lease_expires_and_the_next_job_proceeds(s3_lake, tmp_path):
    from spark_jobs.control.coordination.lock import holder, lease_path, pipeline_lock

    lake = _open_lake()
    job = _start_holder(s3_lake, lease_path(lake), tmp_path / "commits.log")
    try:
        assert holder(lake)["pid"] == job.pid
        with pytest.raises(
            PipelineBusy, match=f"is busy: holder h \\(pid {job.pid} on .*\\.lease; wait for it"
        ):
            with pipeline_lock(lake, "run"):
                pass
        time.sleep(LEASE_S)  # renewed meanwhile: still busy
        with pytest.raises(PipelineBusy):
            with pipeline_lock(lake, "run"):
                pass
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    killed_at = time.time()
    with pipeline_lock(lake, "run", wait_s=LEASE_S * 4):
        waited = time.time() - killed_at
        assert holder(lake)["action"] == "run" and holder(lake)["pid"] == os.getpid()
    assert waited <= LEASE_S + 2, waited  # no longer than the lease had left
    assert holder(lake) is None  # let go: the object is gone


def test_a_paused_holder_past_its_expiry_does_not_commit_after_a_takeover(s3_lake, tmp_path):
    from spark_jobs.control.coordination.lease import Lease
    from spark_jobs.control.coordination.lock import lease_path

    lake = _open_lake()
    log = tmp_path / "commits.log"
    job = _start_holder(s3_lake, lease_path(lake), log)
    try:
        # it has committed at least once
        while job.stdout.readline().strip() != "sleeping" or not log.exists():
            pass
        # paused between commits, as a long GC pause or a frozen VM would be
        os.killpg(job.pid, signal.SIGSTOP)
        commits_before = log.read_text().count("commit")
        taker = Lease(lease_path(lake))
        deadline = time.time() + LEASE_S * 4
        while (found := taker.try_take({"action": "taker", "run_id": "t"})) is not None:
            assert found["pid"] == job.pid and time.time() < deadline
            time.sleep(0.2)
        taken_at = time.time()
        os.killpg(job.pid, signal.SIGCONT)
        out, err = job.communicate(timeout=30)
        assert job.returncode == 3 and "fenced:" in out, (out, err[-2000:])
        assert log.read_text().count("commit") == commits_before  # nothing written after it woke up
        assert all(float(line.split()[2]) < taken_at for line in log.read_text().splitlines())
        taker.check()  # the taker holds it
        taker.release()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
