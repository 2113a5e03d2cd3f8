"""The lake on an S3 object store, against the real S3 server (SeaweedFS on
loopback, ``include/scripts/s3_server.py``), with Spark reading and writing ``s3a://`` through
hadoop-aws and the plain-file readers through s3fs.

The model check of ``testkit/model.py`` runs on an S3 lake: landings, run-once in increments,
rollbacks with cascade, a backfill, a job killed with SIGKILL and run again (it waits for the dead
job's lease to expire), and a settle, every table checked against the landing files in plain
Python after each step. Then the JVM-free readers (``status``, ``checkpoint validate``) on the
same lake, a backfill of every hop over all the data (the tables equal the landing files again),
read by Spark and by delta-rs (another Delta implementation, over S3), and the fence: a run whose
lease was taken over commits nothing more.
"""

from __future__ import annotations

import json
import time

import pytest
from s3_server import BUCKET  # include/scripts (tests/conftest.py puts it on the path)

from testkit.model import run_sequence
from testkit.model_lake import (
    SPAN_MS,
    T0,
    Lake,
    check_equal,
    stored,
    stored_by_delta_rs,
    write_spec,
)

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

LEASE_S = 6
# The scripted sequence: every kind of step (targets, ranges and the kill's moment are drawn
# from the seed); a settle at the end brings the lake up to date and compares it whole. The
# storage is what this test is about: the random sequences of tests/spark/test_model.py (and the
# benchmark suite's soak) cover the orders of steps on a local lake, so each kind runs here once
# (run three times).
OPERATIONS = ["run", "land", "run", "backfill", "rollback", "kill", "land", "run"]


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``lakehouse ARGV`` in-process: its exit code, stdout and stderr."""
    import contextlib
    import io

    from spark_jobs.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def s3_lake(s3, tmp_path, monkeypatch, request) -> str:
    """An S3 lake of this test's own (spelt ``s3://``: the platform says ``s3a://``)."""
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("LAKEHOUSE_HOME", f"s3://{BUCKET}/{request.node.name[:40]}")
    monkeypatch.setenv("LAKEHOUSE_LEASE_SECONDS", str(LEASE_S))
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(write_spec(tmp_path / "pipelines")))
    return f"s3a://{BUCKET}/{request.node.name[:40]}"


def test_the_pipeline_on_an_s3_lake_matches_the_model(spark, s3_lake, monkeypatch):
    from spark_jobs.model.lake import lakehouse_home

    assert lakehouse_home() == s3_lake
    sequence = run_sequence(spark, s3_lake, seed=7, steps=len(OPERATIONS), operations=OPERATIONS)
    print(sequence.transcript())
    assert (
        sequence.settles == 1 and sequence.counts["kill"] == 1 and sequence.counts["rollback"] == 1
    )

    # Everything lives in the bucket; nothing was written to a local folder named like the URI.
    import s3fs

    store = s3fs.S3FileSystem()
    top = {path.rsplit("/", 1)[-1] for path in store.ls(s3_lake.removeprefix("s3a://"))}
    assert {"landing", "tables", "checkpoints", "_ops"} <= top

    # The readers without a JVM, on the same lake.
    code, out, err = run_cli(["status", "ad_events", "--json"])
    assert code == 0, err
    status = json.loads(out)
    hops = {hop["hop"]: hop for hop in status["hops"]}
    assert set(hops) == {"bronze", "silver", "gold"}
    assert all(hop["batches"] for hop in hops.values())
    code, out, err = run_cli(["checkpoint", "validate", "ad_events", "--json"])
    assert code == 0 and json.loads(out)["consistent"], out + err
    code, out, err = run_cli(["run", "ad_events", "--json"])  # settled: nothing new anywhere
    assert code == 0 and all(hop["rows_out"] == 0 for hop in json.loads(out)["hops"]), err

    # A backfill of every hop over all the data rewrites each table as the stream wrote it.
    span = [time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) for ms in (T0, T0 + SPAN_MS)]
    code, out, err = run_cli(
        ["backfill", "ad_events", "--start", span[0], "--end", span[1], "--json"]
    )
    assert code == 0, err
    assert sum(hop["rows_out"] for hop in json.loads(out)["hops"]) > 0
    expected = Lake(s3_lake, None).expected()
    check_equal(stored(spark, s3_lake), expected)
    # an independent reader (delta-rs over S3) agrees
    check_equal(stored_by_delta_rs(s3_lake), expected)

    # The example's quality suite on bronze's last run there: its result and Data Docs page go to
    # the lake's _ops.
    monkeypatch.delenv("LAKEHOUSE_QUALITY")
    code, out, err = run_cli(["quality", "ad_events", "--hop", "bronze", "--json"])
    # 1: a rule failed on the model's deliberately bad data, which is a result too
    assert code in (0, 1), err
    summary = json.loads(out)
    assert summary["rows"] > 0 and summary["result"].startswith(f"{s3_lake}/_ops/quality/")
    assert store.exists(summary["result"]) and store.exists(summary["data_docs"])


def test_a_run_whose_lease_was_taken_over_commits_nothing_more(spark, s3_lake):
    """Another job takes the lease over while this one runs (the holder was paused past its expiry,
    as the lease tests show at the lock's level): the run's next commit is refused by the fence,
    and the hop's table is as it was."""
    import s3fs

    from spark_jobs import service
    from spark_jobs.logs import delta_log
    from spark_jobs.model.errors import LakehouseError

    store = s3fs.S3FileSystem()
    lake_key = s3_lake.removeprefix("s3a://")
    store.pipe(
        f"{lake_key}/landing/campaigns/campaigns.csv", b"ad_id,campaign_id\nad-01,campaign-1\n"
    )
    event = {
        "user_id": "u1",
        "page_id": "p",
        "ad_id": "ad-01",
        "ad_type": "banner",
        "event_type": "view",
        "event_time": 1_780_000_000_000,
        "ip_address": "1.2.3.4",
    }
    store.pipe(f"{lake_key}/landing/ad_events/events-1.json", (json.dumps(event) + "\n").encode())
    told = []

    def progress(message: str) -> None:
        told.append(message)
        # bronze committed; silver's query is about to start
        if message.startswith("[silver] run-once"):
            lease = f"{lake_key}/_ops/locks/ad_events.lease"
            taken = json.loads(store.cat_file(lease))
            store.pipe(lease, json.dumps({**taken, "owner": "another-job", "pid": 1}).encode())
            # the holder's next renewal finds the lease is not its own
            time.sleep(LEASE_S / 3 + 1.5)

    with pytest.raises(LakehouseError, match="lease was taken over"):
        service.run("ad_events", run_id="r-fenced", quality="off", progress=progress)
    # committed before the takeover
    assert delta_log.table_version(f"{s3_lake}/tables/bronze/ad_events") == 0
    # fenced: never written
    assert delta_log.table_version(f"{s3_lake}/tables/silver/ad_views") is None
    assert (
        json.loads(store.cat_file(f"{lake_key}/_ops/locks/ad_events.lease"))["owner"]
        == "another-job"
    )
