"""Benchmark: the cost of discontinuous run-once streaming against an always-on stream.

One arrival trickle (``rate`` events/s written as a file every ``file_every`` seconds, each
event stamped with its arrival time) lands in two lakes at once (hard links). Lake A is
processed by ``lakehouse run --continuous --trigger-interval '10 seconds'`` for the whole
trickle; lake B by ``lakehouse run`` every ``interval`` seconds, as the stream DAG would.
Every job runs under :mod:`bench.meter`, which counts the CPU-seconds of the Python
process, its JVM and every other descendant. Held core-seconds are a job's wall time times
the cores it holds (``local[2]``: 2). Staleness is sampled every 2 s from gold's Delta log
(no JVM): the age of the newest window end visible in gold.

The per-day figures for hourly runs are measured, not extrapolated: the always-on job's
cost per hour, against 24 times one run-once job over an hour of arrivals (``rate`` x 3600
events in the same files, landed in a third lake whose tables a first small run made), run
after the trickle with the machine to itself. A linear model from the 5-minute runs (their
fixed cost, a run with nothing new, plus a cost per event) is kept beside it: it overstates
an hourly run, since a run's per-batch work does not grow with its events.

Both ways run side by side on the same 2 cores, so each slows the other a little; the
held core-seconds of the always-on job do not depend on that (it holds its cores anyway).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from bench.common import CORES, ROOT, lakehouse_command, metered
from testkit.lakes import topic_spec_copy

GOLD = "tables/gold/campaign_views_10s"
TOPIC = "cost-arrivals"  # the kafka source's topic
DAY_S = 86_400
GRACE_S = 60  # the always-on job runs this long after the trickle ends, to show its last files


def _example_sample():
    """The ad_events example's sample module (its ads and campaigns), imported as
    the platform does.
    """
    from spark_jobs.control.companions import companion_module
    from spark_jobs.model.spec import load_spec

    return companion_module(
        load_spec(ROOT / "examples" / "ad_events" / "ad_events.yaml"), "_sample"
    )


def _write_file(
    landing_dirs: list[Path],
    index: int,
    events: int,
    now_ms: int,
    span_ms: int,
    rng,
    topic: str | None = None,
) -> None:
    """One arrival: a file in each landing folder (hard links), or its lines
    produced to ``topic``.
    """
    ad_ids = _example_sample().ad_ids

    ads = ad_ids()
    lines = []
    for position in range(events):
        event_time = now_ms - span_ms + (position + 1) * span_ms // events
        lines.append(
            json.dumps(
                {
                    "user_id": f"u{rng.randrange(10_000)}",
                    "page_id": f"p{rng.randrange(1000)}",
                    "ad_id": rng.choice(ads)[0],
                    "ad_type": "banner",
                    "event_type": rng.choice(("view", "click", "purchase")),
                    "event_time": event_time,
                    "ip_address": "10.0.0.1",
                },
                separators=(",", ":"),
            )
        )
    if topic is not None:
        from spark_jobs.control import topics

        topics.produce(topic, lines)
        return
    text = "".join(line + "\n" for line in lines)
    first = landing_dirs[0] / f"trickle-{index:05d}.json"
    staging = landing_dirs[0] / f".trickle-{index:05d}.json.tmp"
    staging.write_text(text)
    for other in landing_dirs[1:]:
        os.link(staging, other / first.name)  # hard link under the final name: appears whole
    staging.rename(first)


def _campaigns(home: Path) -> None:
    ad_ids = _example_sample().ad_ids

    folder = home / "landing/campaigns"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "campaigns.csv").write_text(
        "ad_id,campaign_id\n" + "".join(f"{a},{c}\n" for a, c in ad_ids())
    )


class GoldWatermark:
    """The newest ``window_end`` in gold, from the add actions' statistics in its Delta log."""

    def __init__(self, home: Path) -> None:
        self.log = home / GOLD / "_delta_log"
        self.read: set[str] = set()
        self.newest_ms: float | None = None

    def poll(self) -> float | None:
        if self.log.is_dir():
            for path in sorted(self.log.glob("*.json")):
                if path.name in self.read:
                    continue
                try:
                    actions = [
                        json.loads(line) for line in path.read_text().splitlines() if line.strip()
                    ]
                except (OSError, json.JSONDecodeError):
                    continue  # being written: read it at the next poll
                self.read.add(path.name)
                for action in actions:
                    stats = (action.get("add") or {}).get("stats")
                    end = stats and json.loads(stats).get("maxValues", {}).get("window_end")
                    if end:
                        end_ms = (
                            dt.datetime.fromisoformat(end.replace("Z", "+00:00")).timestamp() * 1000
                        )
                        self.newest_ms = max(self.newest_ms or 0.0, end_ms)
        return self.newest_ms


def _staleness(
    watchers: dict[str, GoldWatermark], arrivals: list[float], stop: threading.Event, samples: dict
) -> None:
    """Every 2 s: how long the oldest landed file that gold does not show yet has waited (0: none).

    A file's newest event is stamped with its arrival, so gold shows it once its newest
    ``window_end`` reaches that time (10-s windows: up to 10 s early).
    """
    while not stop.wait(2):
        now = time.time()
        for name, watcher in watchers.items():
            newest_s = (watcher.poll() or 0.0) / 1000
            waiting = [arrived for arrived in list(arrivals) if arrived > newest_s]
            samples[name].append(round(now - waiting[0], 1) if waiting else 0.0)


def _trickle(
    landing: list[Path],
    rate: int,
    file_every_s: float,
    began: float,
    duration_s: float,
    arrivals: list[float],
    landed: dict,
    topic: str | None = None,
) -> None:
    """Land a file every ``file_every_s`` seconds on the trickle's own clock, whatever the jobs
    are doing (a thread: files keep landing while a run-once job runs, as they would)."""
    rng = random.Random(7)
    per_file = max(int(rate * file_every_s), 1)
    while time.time() - began < duration_s or landed["files"] == 0:
        arrived = time.time()
        _write_file(
            landing,
            landed["files"],
            per_file,
            int(arrived * 1000),
            int(file_every_s * 1000),
            rng,
            topic,
        )
        arrivals.append(arrived)
        landed["files"] += 1
        landed["events"] += per_file
        time.sleep(max(began + landed["files"] * file_every_s - time.time(), 0))


@contextmanager
def _broker(root: Path, source: str):
    """For ``source`` kafka, a broker of the run's own (its settings in the environment meanwhile)
    and the topic the trickle produces to; None for landing files."""
    if source == "files":
        yield None
        return
    from kafka_server import KafkaServer  # include/scripts

    from testkit.paths import environment_kept

    server = KafkaServer(root / "kafka")
    with environment_kept(*server.env()):
        server.start()
        try:
            os.environ.update(server.env())
            server.create_topic(TOPIC, CORES)
            server.create_topic(f"{TOPIC}-hourly", CORES)
            yield TOPIC
        finally:
            server.stop()


def run(
    rate: int,
    duration_s: float,
    interval_s: float,
    file_every_s: float = 5.0,
    log_dir: Path | None = None,
    source: str = "files",
) -> dict:
    """The comparison with arrivals as landing files (``source`` files) or records produced to a
    topic on a broker of its own (``kafka``: both lakes' bronze read the same topic)."""
    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-cost-"))
    if source == "kafka":
        sys.path.insert(0, str(ROOT / "include" / "scripts"))  # kafka_server
    with _broker(root, source) as topic:
        return {
            "source": source,
            **_compare(root, rate, duration_s, interval_s, file_every_s, log_dir or root, topic),
        }


def _compare(
    root: Path,
    rate: int,
    duration_s: float,
    interval_s: float,
    file_every_s: float,
    log_dir: Path,
    topic: str | None,
) -> dict:
    (root / "no-suites").mkdir()
    homes, envs = {}, {}
    for name in ("always_on", "run_once"):
        homes[name], envs[name] = _lake(root, name.replace("_", "-"))
        if topic:
            envs[name]["LAKEHOUSE_PIPELINES"] = str(
                topic_spec_copy(root / "pipelines", topic=topic)
            )
    watchers = {name: GoldWatermark(home) for name, home in homes.items()}
    samples: dict[str, list[float]] = {name: [] for name in homes}
    results: dict[str, list[dict]] = {"always_on": [], "run_once": []}
    stop = threading.Event()
    try:
        began = time.time()
        always_on = threading.Thread(
            target=lambda: results["always_on"].append(
                metered(
                    lakehouse_command(
                        "run",
                        "ad_events",
                        "--continuous",
                        "--trigger-interval",
                        "10 seconds",
                        "--quality=off",
                        "--run-id",
                        "always-on",
                    ),
                    envs["always_on"],
                    stop_after=duration_s + GRACE_S,
                    log=log_dir / "always-on.log",
                )
            )
        )
        always_on.start()
        arrivals: list[float] = []
        sampler = threading.Thread(
            target=_staleness, args=(watchers, arrivals, stop, samples), daemon=True
        )
        sampler.start()
        landing = [home / "landing/ad_events" for home in homes.values()]
        landed = {"files": 0, "events": 0}
        trickle = threading.Thread(
            target=_trickle,
            daemon=True,
            args=(landing, rate, file_every_s, began, duration_s, arrivals, landed, topic),
        )
        trickle.start()
        runs_events: list[int] = []
        seen = 0  # events landed when the last run started: what it could see
        next_run = began + interval_s
        while trickle.is_alive():
            trickle.join(timeout=max(next_run - time.time(), 0))
            if trickle.is_alive():
                runs_events.append(landed["events"] - seen)
                seen = landed["events"]
                results["run_once"].append(
                    _run_once(envs["run_once"], len(results["run_once"]), log_dir)
                )
                # As the stream DAG (one active run): a run longer than the interval
                # delays the next.
                next_run = max(next_run + interval_s, time.time())
                print(
                    f"  cost: run-once {len(runs_events)} at {time.time() - began:.0f} s: "
                    f"{results['run_once'][-1]['wall_s']:.0f} s",
                    flush=True,
                )
        events_landed = landed["events"]
        # The trickle ended: the last run picks up what is left, while the always-on job has
        # GRACE_S more seconds to show its last files before it is stopped.
        runs_events.append(events_landed - seen)
        results["run_once"].append(_run_once(envs["run_once"], len(results["run_once"]), log_dir))
        always_on.join()
        stop.set()
        # nothing new: the fixed cost
        empty = _run_once(envs["run_once"], len(results["run_once"]), log_dir)
        equal = (
            _gold_views(homes["always_on"])
            == _gold_views(homes["run_once"])
            == _expected_views(homes["run_once"], topic)
        )
        if not equal:
            raise RuntimeError(
                "the two ways ended with different gold counts: the comparison would not be fair"
            )
        print(
            f"  cost: one run-once job over an hour of arrivals ({rate * 3600:,} events)",
            flush=True,
        )
        hourly = _hourly_run(root, rate, file_every_s, log_dir, topic and f"{topic}-hourly")
    finally:
        stop.set()
        shutil.rmtree(root, ignore_errors=True)
    return _summary(
        rate, duration_s, interval_s, events_landed, results, runs_events, empty, hourly, samples
    )


def _lake(root: Path, name: str) -> tuple[Path, dict]:
    """A lake under ``root`` with an empty landing folder and the campaigns, and the environment
    that points a job at it (quality off: ``root/no-suites`` holds no suite)."""
    home = root / name
    (home / "landing/ad_events").mkdir(parents=True)
    _campaigns(home)
    return home, {
        **os.environ,
        "LAKEHOUSE_HOME": str(home),
        "LAKEHOUSE_QUALITY": str(root / "no-suites"),
    }


def _run_once(env: dict, index: int | str, log_dir: Path) -> dict:
    return metered(
        lakehouse_command("run", "ad_events", "--quality=off", "--run-id", f"run-once-{index}"),
        env,
        log=log_dir / "run-once.log",
    )


def _hourly_run(
    root: Path, rate: int, file_every_s: float, log_dir: Path, topic: str | None
) -> dict:
    """One metered run-once job over an hour of arrivals, on tables a first small run made."""
    home, env = _lake(root, "hourly")
    if topic:
        env["LAKEHOUSE_PIPELINES"] = str(topic_spec_copy(root / "pipelines-hourly", topic=topic))
    landing = home / "landing/ad_events"
    rng = random.Random(11)
    per_file = max(int(rate * file_every_s), 1)
    span_ms = int(file_every_s * 1000)
    files = max(round(3600 / file_every_s), 1)
    start_ms = int(time.time() * 1000) - (files + 1) * span_ms
    _write_file([landing], 0, per_file, start_ms, span_ms, rng, topic)
    # creates the tables, as the runs before any hourly run would have
    _run_once(env, "hourly-setup", log_dir)
    for index in range(1, files + 1):
        _write_file([landing], index, per_file, start_ms + index * span_ms, span_ms, rng, topic)
    measured = _run_once(env, "hourly", log_dir)
    if _gold_views(home) != _expected_views(home, topic):
        raise RuntimeError(
            "the hourly run left gold with other counts than its landing files: "
            "its cost would not count"
        )
    return {**measured, "events": files * per_file}


def _gold_views(home: Path) -> int:
    """Views in gold, read with pyarrow from the files Delta's log says are current (no JVM)."""
    import pyarrow.parquet as pq

    current: set[str] = set()
    for path in sorted((home / GOLD / "_delta_log").glob("*.json")):
        for line in path.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            if "deletionVector" in json.dumps(action.get("add") or {}):
                raise RuntimeError("gold has deletion vectors: count its views with Spark instead")
            if "add" in action:
                current.add(action["add"]["path"])
            if "remove" in action:
                current.discard(action["remove"]["path"])
    from urllib.parse import unquote

    return sum(
        sum(
            pq.read_table(home / GOLD / unquote(name), columns=["views"])
            .column("views")
            .to_pylist()
        )
        for name in current
    )


def _expected_views(home: Path, topic: str | None = None) -> int:
    """Views with a campaign, counted from the landing files (or the topic's records, read with a
    plain consumer) in plain Python."""
    if topic:
        from spark_jobs.model.kafka import KafkaConnection
        from testkit.expected import topic_records

        return sum(
            '"event_type":"view"' in value
            for _address, value in topic_records(KafkaConnection.from_env().client_config(), topic)
        )
    total = 0
    for path in (home / "landing/ad_events").glob("trickle-*.json"):
        total += sum(1 for line in path.read_text().splitlines() if '"event_type":"view"' in line)
    return total


def _summary(
    rate, duration_s, interval_s, events, results, runs_events, empty, hourly, samples
) -> dict:
    on = results["always_on"][0]
    runs = results["run_once"]
    measured = {
        "always_on": {
            "jobs": 1,
            "cpu_s": on["cpu_s"],
            "held_core_s": round(on["wall_s"] * CORES, 1),
            "wall_s": on["wall_s"],
        },
        "run_once": {
            "jobs": len(runs),
            "cpu_s": round(sum(r["cpu_s"] for r in runs), 1),
            "held_core_s": round(sum(r["wall_s"] for r in runs) * CORES, 1),
            "wall_s": round(sum(r["wall_s"] for r in runs), 1),
        },
    }
    for name, way in measured.items():
        way["staleness_s"] = _percentiles(samples[name])
        # Events per CPU-second: records/s/core if one core did nothing else (the paper's unit),
        # here for the whole job with its start, its idle triggers and its Delta commits.
        way["events_per_cpu_s"] = round(events / way["cpu_s"]) if way["cpu_s"] else None
    # Per day at hourly runs: the always-on job's cost per hour x 24 against 24 measured hourly
    # run-once jobs. Beside it, the linear model from the 5-minute runs: each the fixed cost
    # (nothing new) plus a cost per event x an hour of events. The first run also creates the
    # tables, so it is left out when there are others.
    with_data = [(r, n) for r, n in zip(runs, runs_events) if n][1:] or list(zip(runs, runs_events))
    per_event = {
        key: statistics.median(max(r[key] - empty[key], 0.0) / max(n, 1) for r, n in with_data)
        for key in ("cpu_s", "wall_s")
    }
    hourly_events = rate * 3600
    projected = {
        "always_on": {
            "cpu_s": round(on["cpu_s"] / on["wall_s"] * DAY_S),
            "held_core_s": CORES * DAY_S,
        },
        "run_once_hourly": {
            "cpu_s": round(24 * hourly["cpu_s"]),
            "held_core_s": round(24 * CORES * hourly["wall_s"]),
        },
        "run_once_hourly_linear": {
            "cpu_s": round(24 * (empty["cpu_s"] + per_event["cpu_s"] * hourly_events)),
            "held_core_s": round(
                24 * CORES * (empty["wall_s"] + per_event["wall_s"] * hourly_events)
            ),
        },
    }
    return {
        "rate_events_per_s": rate,
        "duration_s": duration_s,
        "run_once_every_s": interval_s,
        "events": events,
        "trigger_interval": "10 seconds",
        "cores_held": CORES,
        "measured": measured,
        "measured_ratios": {
            key: round(measured["always_on"][key] / measured["run_once"][key], 1)
            for key in ("cpu_s", "held_core_s")
        },
        "fixed_cost_per_run": {
            "cpu_s": empty["cpu_s"],
            "held_core_s": round(empty["wall_s"] * CORES, 1),
            "jvm_started": "java" in empty["processes"],
        },
        "cost_per_1k_events": {key: round(value * 1000, 3) for key, value in per_event.items()},
        "hourly_run": {
            "events": hourly["events"],
            "cpu_s": hourly["cpu_s"],
            "wall_s": hourly["wall_s"],
            "held_core_s": round(hourly["wall_s"] * CORES, 1),
        },
        "per_day_hourly": projected,
        "per_day_ratios": {
            key: round(projected["always_on"][key] / projected["run_once_hourly"][key], 1)
            for key in ("cpu_s", "held_core_s")
        },
        "per_day_ratios_linear": {
            key: round(projected["always_on"][key] / projected["run_once_hourly_linear"][key], 1)
            for key in ("cpu_s", "held_core_s")
        },
        "staleness_samples": samples,
    }


def _stale(figures: dict) -> str:
    return " / ".join(
        "-" if figures[key] is None else f"{figures[key]:g}" for key in ("p50", "p95", "max")
    )


def _percentiles(samples: list[float]) -> dict:
    """p50, p95 and max of the staleness samples (nearest rank)."""
    ordered = sorted(samples)
    if not ordered:
        return {"p50": None, "p95": None, "max": None}

    def rank(share: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(len(ordered) * share) - 1))]

    return {"p50": rank(0.5), "p95": rank(0.95), "max": ordered[-1]}


def markdown(result: dict) -> str:
    m, p, fixed = result["measured"], result["per_day_hourly"], result["fixed_cost_per_run"]
    hour, linear = result["hourly_run"], p["run_once_hourly_linear"]
    minutes = result["duration_s"] / 60
    lines = [
        f"Always-on (10 s trigger) vs run-once every {result['run_once_every_s'] / 60:g} min, "
        f"{result['rate_events_per_s']} events/s for {minutes:g} min ({result['events']:,} "
        "events), side by side",
        "",
        "| | jobs | CPU-s | held core-s | events per CPU-s | staleness s p50 / p95 / max |",
        "|---|---:|---:|---:|---:|---:|",
        *(
            f"| {label} | {m[key]['jobs']} | {m[key]['cpu_s']:,.0f} | {m[key]['held_core_s']:,.0f} "
            f"| {m[key]['events_per_cpu_s']:,} | {_stale(m[key]['staleness_s'])} |"
            for key, label in (("always_on", "always-on"), ("run_once", "run-once"))
        ),
        f"| **ratio** | | **{result['measured_ratios']['cpu_s']}x** | "
        f"**{result['measured_ratios']['held_core_s']}x** | | |",
        "",
        f"{'Records are produced (to one topic both lakes read)' if result.get('source') == 'kafka' else 'Files land'}"  # noqa: E501
        " on their own clock (a thread), also while a run-once job runs. Events per CPU-s is the "
        "paper's records/s/core for a whole job: its start, idle triggers and commits included.",
        "",
        "Per day at hourly runs: 24 x one measured run-once job over an hour of arrivals "
        f"({hour['events']:,} events: {hour['wall_s']:.1f} s, {hour['cpu_s']:.1f} CPU-s), against "
        "the always-on job's measured rate. Beside it, the linear model from the "
        f"{result['run_once_every_s'] / 60:g}-minute runs (fixed cost per run "
        f"{fixed['held_core_s']} held core-s, {fixed['cpu_s']} CPU-s; per 1,000 events "
        f"{result['cost_per_1k_events']['wall_s'] * CORES:.3f} held core-s):",
        "",
        "| | CPU-s/day | held core-s/day |",
        "|---|---:|---:|",
        f"| always-on | {p['always_on']['cpu_s']:,} | {p['always_on']['held_core_s']:,} |",
        f"| run-once hourly (measured hourly run) | {p['run_once_hourly']['cpu_s']:,} "
        f"| {p['run_once_hourly']['held_core_s']:,} |",
        f"| **ratio** | **{result['per_day_ratios']['cpu_s']}x** | "
        f"**{result['per_day_ratios']['held_core_s']}x** (target >= 10x) |",
        f"| run-once hourly (linear model) | {linear['cpu_s']:,} | {linear['held_core_s']:,} |",
        f"| ratio (linear model) | {result['per_day_ratios_linear']['cpu_s']}x "
        f"| {result['per_day_ratios_linear']['held_core_s']}x |",
    ]
    return "\n".join(lines)
