"""The benchmark suite's own instruments (the suite itself runs in CI as `make bench-smoke`)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from bench.cost import GoldWatermark, _percentiles, _trickle
from testkit.paths import ROOT

pytestmark = [pytest.mark.unit]

# A parent that starts a child burning about 1 s of CPU and exits at once, without waiting:
# the child is an orphan, like pyspark's JVM when the Python that launched it ends.
ORPHAN = """
import subprocess, sys
subprocess.Popen([sys.executable, "-c",
    "import time\\nend = time.process_time() + 1.0\\nwhile time.process_time() < end: pass"])
"""


def test_the_meter_counts_the_cpu_of_orphaned_descendants():
    done = subprocess.run(
        [sys.executable, "-m", "bench.meter", "--", sys.executable, "-c", ORPHAN],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["exit_code"] == 0
    assert found["cpu_s"] >= 0.9  # the orphan's second is counted, not lost with it
    assert found["wall_s"] < found["cpu_s"] + 30
    assert "python" in " ".join(found["processes"]) or any(
        name.startswith("python") for name in found["processes"]
    )
    split = found["cpu_s_by_process"]
    # the orphan, by name
    assert sum(seconds for name, seconds in split.items() if name.startswith("python")) >= 0.8
    assert sum(split.values()) == pytest.approx(found["cpu_s"], abs=0.2)


def test_cpu_by_process_groups_instances_and_keeps_the_unsampled_rest():
    from bench.meter import _group, by_process

    cpu = {
        (10, 1.0): (_group("airflow worker -- LocalExecutor: 01a2"), 2.0),
        (11, 1.5): (_group("airflow worker -- 01a3"), 1.5),
        (10, 9.0): (_group("java"), 30.0),  # pid 10 used again: another process
        (12, 2.0): (_group("airflow api_server -- host:127.0.0.1 port:1"), 4.0),
    }
    found = by_process(cpu, total=40.0)
    assert found == {
        "java": 30.0,
        "airflow api_ser": 4.0,
        "airflow worker": 3.5,
        "(not sampled)": 2.5,
    }
    assert list(found)[:3] == ["java", "airflow api_ser", "airflow worker"]  # largest first


def test_the_meter_stops_an_always_on_command_and_reports_its_exit():
    done = subprocess.run(
        [sys.executable, "-m", "bench.meter", "--stop-after", "1", "--", "sleep", "30"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["exit_code"] == -15 and 0.9 <= found["wall_s"] < 10


def test_gold_watermark_reads_window_ends_from_the_delta_log_stats(tmp_path):
    log = tmp_path / "tables/gold/campaign_views_10s/_delta_log"
    log.mkdir(parents=True)

    def add(end: str) -> str:
        stats = json.dumps({"numRecords": 1, "maxValues": {"window_end": end}})
        return json.dumps({"add": {"path": "part.parquet", "stats": stats}})

    watcher = GoldWatermark(tmp_path)
    assert watcher.poll() is None
    (log / "00000000000000000000.json").write_text(
        json.dumps({"commitInfo": {}}) + "\n" + add("2026-11-22T10:00:10.000Z")
    )
    assert watcher.poll() == 1_795_341_610_000
    # an older window updated
    (log / "00000000000000000001.json").write_text(add("2026-11-22T10:00:00.000Z"))
    assert watcher.poll() == 1_795_341_610_000


def test_files_land_on_their_own_clock_while_a_job_holds_the_main_thread(tmp_path):
    landing = [tmp_path / "a", tmp_path / "b"]
    for folder in landing:
        folder.mkdir()
    arrivals, landed = [], {"files": 0, "events": 0}
    began = time.time()
    thread = threading.Thread(
        target=_trickle, args=(landing, 10, 0.2, began, 1.0, arrivals, landed), daemon=True
    )
    thread.start()
    time.sleep(1.3)  # the main thread is busy (a run-once job) for the whole trickle
    thread.join(timeout=5)
    names = sorted(path.name for path in landing[0].iterdir())
    assert (
        len(names) == landed["files"] == len(arrivals) >= 4
        and landed["events"] == 2 * landed["files"]
    )
    assert names == sorted(path.name for path in landing[1].iterdir())  # both lakes get every file
    # on the trickle's clock
    assert all(arrivals[n] - began >= 0.2 * n - 0.05 for n in range(len(arrivals)))
    assert arrivals[-1] - began < 1.0 + 0.2


def test_staleness_percentiles_are_nearest_rank():
    samples = [float(n) for n in range(1, 101)]  # 1..100: p50 = 50, p95 = 95
    assert _percentiles(list(reversed(samples))) == {"p50": 50.0, "p95": 95.0, "max": 100.0}
    assert _percentiles([3.0]) == {"p50": 3.0, "p95": 3.0, "max": 3.0}
    assert _percentiles([]) == {"p50": None, "p95": None, "max": None}


def test_the_benchmarks_page_shows_each_soak_part_from_the_newest_run_that_ran_it():
    """A run of one soak part (the others at 0 steps) does not hide another part an earlier run
    recorded: each comes from its newest run, which the page names."""
    from bench.soak import markdown, newest_parts

    def part(steps: int, seed: int) -> dict:
        return {
            "steps": steps,
            "sequences": 1,
            "seeds": [seed],
            "operations": {"run": steps},
            "failures": [],
            "seconds": 60.0,
            "settles": 1,
        }

    def run(started: str, kafka: int, changes: int) -> dict:
        return {
            "started": started,
            "soak": {
                **part(0, 0),
                "refusals": {},
                "shop": part(0, 0),
                "kafka": part(kafka, 7),
                "changes": part(changes, 8),
            },
        }

    documents = [run("first", 200, 0), run("second", 0, 0), run("third", 0, 150)]
    shown = newest_parts(documents)
    assert (shown["kafka"]["steps"], shown["changes"]["steps"], shown["recorded"]) == (
        200,
        150,
        {"kafka": "first"},
    )
    text = markdown(shown)
    assert (
        "Kafka (bronze fed by a topic" in text
        and "crm (a change feed" in text
        and "kafka (first)" in text
    )
    assert "shop (" not in text  # no run ran it


# A parent (group "other") with two children burning CPU for the whole window: one whose command
# line holds " scheduler", one whose holds " triggerer".
BURNERS = """
import subprocess, sys, time
burn = "import sys, time\\nend = time.time() + float(sys.argv[1])\\nwhile time.time() < end: pass"
words = ("scheduler", "triggerer")
children = [subprocess.Popen([sys.executable, "-c", burn, "8", word]) for word in words]
for child in children:
    child.wait()
"""


def _kill_tree(parent: subprocess.Popen) -> None:
    import psutil

    for child in psutil.Process(parent.pid).children(recursive=True):
        child.kill()
    parent.kill()
    parent.wait()


def test_the_idle_window_counts_each_group_of_a_process_tree():
    from bench.idle import cpu_over

    parent = subprocess.Popen([sys.executable, "-c", BURNERS])
    try:
        time.sleep(1)  # both children started
        found = cpu_over(parent.pid, 2.0)
    finally:
        _kill_tree(parent)
    # each child burned up to the 2 s of the window (two cores; much less on a busy machine)
    assert 0.1 < found["scheduler"] <= 2.5 and 0.1 < found["triggerer"] <= 2.5, found
    assert found.get("other", 0) < 0.3 and found["postgres"] == 0 and found["api_server"] == 0


# A " scheduler" process that only waits for its child, a burner whose command line names no
# group: the child's CPU is the scheduler's (as an executor's workers are).
WORKER_OF = """
import subprocess, sys
burn = "import time\\nend = time.time() + 8\\nwhile time.time() < end: pass"
subprocess.Popen([sys.executable, "-c", burn]).wait()
"""


def test_a_process_no_group_names_counts_in_its_nearest_named_ancestor():
    from bench.idle import cpu_over

    parent = subprocess.Popen([sys.executable, "-c", WORKER_OF, "scheduler"])
    try:
        time.sleep(1)
        found = cpu_over(parent.pid, 2.0)
    finally:
        _kill_tree(parent)
    assert 0.1 < found["scheduler"] <= 2.5 and found.get("other", 0) < 0.3, found
