"""Fast tests of the control layer and the engine's helpers: the lock, the sample generator,
query fingerprints, state rebuilds, gates of repairs, always-on failures."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from spark_jobs.cli import main

pytestmark = [pytest.mark.unit]




def test_a_killed_holder_does_not_keep_the_pipeline_lock(tmp_path, monkeypatch):
    import signal
    import time

    from spark_jobs.control.coordination.lock import holder, pipeline_lock
    from spark_jobs.model.errors import PipelineBusy
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.spec import get_spec

    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path))
    lake = Lake.open(get_spec("ad_events"))
    script = ("from spark_jobs.model.lake import Lake; from spark_jobs.model.spec import get_spec; "
              "from spark_jobs.control.coordination.lock import pipeline_lock; import time\n"
              "with pipeline_lock(Lake.open(get_spec('ad_events')), 'run', 'r-held'):\n"
              "    print('held', flush=True); time.sleep(600)")
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "LAKEHOUSE_HOME": str(tmp_path)})
    try:
        assert process.stdout.readline().strip() == "held"
        assert holder(lake)["run_id"] == "r-held"
        told = []
        with pytest.raises(PipelineBusy, match="busy: run r-held"):
            with pipeline_lock(lake, "backfill", wait_s=1.2, progress=told.append):
                pass
        assert len(told) == 1 and told[0].startswith("backfill waits for the pipeline's lock: run r-held (pid "), told
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    started = time.monotonic()
    with pipeline_lock(lake, "run", "r-next"):  # taken at once: the kernel dropped the dead holder's lock
        assert time.monotonic() - started < 1
        assert holder(lake)["run_id"] == "r-next"
    assert holder(lake) is None


def test_a_multi_source_sample_writes_each_sources_file_and_payments_name_their_orders(lake_home, capsys, tmp_path,
                                                                                        monkeypatch):
    """``lakehouse generate shop``: an orders JSON-lines file and a payments CSV file (header
    first) per file index, in each ingest hop's landing folder; every payment names an order of
    the same call; the counts it prints are the files' (read back here as plain text)."""
    assert main(["generate", "shop", "--events", "400", "--files", "2", "--seed", "7", "--bad-fraction", "0.05",
                 "--start", "2026-03-01T00:00:00", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    orders = sorted((lake_home / "landing/shop/orders").glob("*.json"))
    payments = sorted((lake_home / "landing/shop/payments").glob("*.csv"))
    assert len(orders) == len(payments) == 2 and sorted(map(str, orders + payments)) == sorted(result["files"])
    parsed, bad = [], 0
    for path in orders:
        for line in path.read_text().splitlines():
            try:
                order = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if not order["order_id"].startswith("o-") or {"merchant_id", "customer_id"} - set(order) or \
                    not isinstance(order["amount"], (int, float)) or order["currency"] not in ("EUR", "USD", "GBP"):
                bad += 1
            else:
                parsed.append(order)
    rows = [path.read_text().splitlines() for path in payments]
    assert all(lines[0] == "payment_id,order_id,paid_amount,status,paid_time" for lines in rows)
    bodies = [line.split(",") for lines in rows for line in lines[1:]]
    def valid(fields: list[str]) -> bool:
        from datetime import datetime

        try:
            float(fields[2]), datetime.fromisoformat(fields[4])
        except (ValueError, IndexError):
            return False
        return len(fields) == 5 and fields[3] in ("paid", "failed")

    good = [fields for fields in bodies if valid(fields)]
    bad += len(bodies) - len(good)
    assert bad == result["bad_lines"] > 0
    assert {fields[1] for fields in good} <= {order["order_id"] for order in parsed}
    distinct = {order["order_id"] for order in parsed}
    assert len(distinct) + result["bad_lines"] // 2 == result["events"] == 400 and len(parsed) > len(distinct)
    # A sample that names a folder the spec does not have: one line naming the hop and the fix.
    specs = tmp_path / "team"
    specs.mkdir()
    (specs / "one.yaml").write_text("name: one\nlanding: landing/one\nhops:\n"
                                    "  - {name: bronze, kind: ingest, table: tables/one, time_column: t}\n")
    (specs / "one_sample.py").write_text(
        "from spark_jobs.authoring import SampleFiles\n"
        "def landing_files(rng, start_ms, events, bad_fraction, late_fraction):\n"
        "    return SampleFiles({'orders': ('.json', '{}\\n')}, events)\n")
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(specs))
    assert main(["generate", "one", "--events", "1"]) == 2
    assert "sample writes files for orders, which is not an ingest hop: use one of bronze" in capsys.readouterr().err


GOLD_PLAN = """\
~Project [kind#10, window#20-T60000ms.start AS window_start#30, count#21L]
+- ~Aggregate [window#25-T60000ms, kind#10], [window#25-T60000ms AS window#20-T60000ms, kind#10, count(1) AS count#21L]
   +- ~Project [named_struct(start, (event_ts#11-T60000ms % 60000000)) AS window#25-T60000ms, kind#10, \
exists(tags#13, lambdafunction(lambda x_1#40 = a, lambda x_1#40, false)) AS tagged#41]
      +- ~Filter isnotnull(event_ts#11-T60000ms)
         +- ~EventTimeWatermark 4846bf13-83ec-44ae-b376-d951bbf09d57, event_ts#11: timestamp, 1 minutes
            +- StreamingRelation FileSource[/lake/a], [kind#10, event_ts#11, _batch_id#12L], name=<Unassigned>"""


@pytest.mark.parametrize("edit, kind", [
    (lambda plan: plan.replace("#1", "#7").replace("4846bf13", "00000000"), "unchanged"),
    (lambda plan: plan.replace("/lake/a", "/elsewhere/b"), "unchanged"),
    (lambda plan: plan.replace("lambda x_1", "lambda x_9"), "unchanged"),  # PySpark's per-process numbering
    (lambda plan: plan.replace("count#21L]\n", "count#21L, kind#10 AS k#31]\n", 1), "compatible"),
    (lambda plan: plan.replace("1 minutes", "2 minutes").replace("-T60000ms", "-T120000ms"), "compatible"),
    (lambda plan: plan.replace("% 60000000", "% 120000000"), "incompatible"),
    (lambda plan: plan.replace("isnotnull(event_ts#11-T60000ms)", "(kind#10 = a)"), "incompatible"),
    (lambda plan: plan.replace("~Aggregate [window#25-T60000ms, kind#10]", "~Aggregate [window#25-T60000ms]"),
     "incompatible"),
], ids=["ids", "paths", "lambdas", "column-above-the-state", "watermark-delay", "window", "filter-below", "key"])
def test_a_query_fingerprint_tells_changes_its_state_can_follow(edit, kind):
    """Expected kinds by Spark's rules for a restarted query: only what feeds the state (keys,
    windows, filters before it) is incompatible; ids, paths and the watermark delay are not."""
    from spark_jobs.control import fingerprint
    from spark_jobs.model.spec import HopSpec

    hop = HopSpec(name="gold", kind="aggregate", table="t", time_column="window_start", upstreams=("silver",),
                  keys=("kind", "window_start"))
    old, new = (fingerprint.of_plan(plan, hop, "code") for plan in (GOLD_PLAN, edit(GOLD_PLAN)))
    assert old.stateful == ("Aggregate",)
    assert fingerprint.change(old, new) == kind
    assert fingerprint.change(None, new) == "unchanged"  # no committed batch: any code may start


def test_a_state_rebuild_is_refused_for_a_hop_that_reads_landing_files(tmp_path):
    from spark_jobs.control.rollback import rebuild
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.spec import get_spec

    lake = Lake(str(tmp_path), get_spec("ad_events"))
    said = rebuild.refusal(lake, lake.spec.hop("bronze"), "2026-03-01T00:00:00")
    assert said.startswith("--from 2026-03-01T00:00:00: hop bronze reads landing files") and "leave out --from" in said
    assert rebuild.refusal(lake, lake.spec.hop("gold"), "2026-03-01T00:00:00") is None


def test_an_always_on_query_that_stopped_by_itself_fails_the_session():
    """``run --continuous`` checks each query every second: one with an exception fails the
    session, and so does one that is no longer active with none (a query the session did not
    stop). A stand-in for Spark's StreamingQuery: only the two members the check reads."""
    from spark_jobs.engine.continuous import query_failure

    class Query:
        def __init__(self, active: bool, error: Exception | None = None):
            self.isActive, self.error = active, error

        def exception(self):
            return self.error

    assert query_failure("gold", Query(active=True)) is None
    assert query_failure("gold", Query(active=True, error=RuntimeError("boom\nat ..."))) == "gold failed: boom"
    assert query_failure("gold", Query(active=False, error=RuntimeError("boom"))) == "gold failed: boom"
    assert query_failure("gold", Query(active=False)).startswith("gold's query stopped without an error")
