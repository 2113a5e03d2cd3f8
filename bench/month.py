"""Benchmark: a simulated month of run-once runs with daily maintenance, through the platform's
clock (``$LAKEHOUSE_CLOCK_SHIFT``).

The ad_events pipeline runs ``--month-runs`` times a simulated day (its schedule says so, and
``retention: {rollback: 2 days, landing: 4 days, records: 4 days}``) for ``--month-days`` days,
each run over a new landing of ``--month-events`` events, and ``lakehouse maintain`` runs after
each day's last run. Time is simulated: before each run the clock is moved to the simulated
moment, the new landing files and the checkpoints' new commit files get that moment as their
modification time (what Spark and the rollback window read a batch's and a file's time from),
and records carry it (:func:`spark_jobs.model.times.now_s`). Commit times inside Delta's log stay
real; nothing here reads them.

Checked every day: every table equals the landing files (archive included), in plain Python.
Recorded every day: data files and log files per table, checkpoint files, ``_ops`` files,
landing and archive files. Checked at the end: each of those is flat once retention holds (its
most over the last third of the month at most 5% above its most over the middle third; data files
per partition, since a table gains a partition a day), each checkpoint folder within what its
settings let Spark keep (``min_batches_to_retain`` batches, the source log's compaction interval,
the state store's snapshot interval), no landing file is
older than the landing retention allows, a gold stream paused for two days reads on, a rollback
inside the window replays to equal tables, one outside it is refused with no file changed.

    python -m bench.month [--days 12] [--runs 4] [--events 200]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

DAY_S = 86_400
RETENTION = {"rollback": "2 days", "landing": "4 days", "records": "4 days"}
# checkpoint batches: what the 2-day window needs (8 runs of up to 2 batches; Spark
# purges past them)
RETAINED = 16


def _count(folder: Path, pattern: str = "*") -> int:
    return sum(1 for path in folder.rglob(pattern) if path.is_file()) if folder.exists() else 0


def _most_per_partition(table: Path) -> int:
    """The most data files in one partition folder of ``table`` (the table's folder
    if unpartitioned).
    """
    counts: dict[Path, int] = {}
    for path in table.rglob("*.parquet"):
        if "_delta_log" not in path.parts:
            counts[path.parent] = counts.get(path.parent, 0) + 1
    return max(counts.values(), default=0)


def _figures(home: Path) -> dict:
    tables = sorted(path.parent for path in home.glob("tables/*/*/_delta_log"))
    return {
        "data_files": {
            f"{t.parent.name}/{t.name}": _count(t, "*.parquet")
            - _count(t / "_delta_log", "*.parquet")
            for t in tables
        },
        "most_per_partition": {f"{t.parent.name}/{t.name}": _most_per_partition(t) for t in tables},
        "log_files": {f"{t.parent.name}/{t.name}": _count(t / "_delta_log") for t in tables},
        "checkpoint_files": _count(home / "checkpoints"),
        "ops_files": _count(home / "_ops"),
        "landing_files": _count(home / "landing" / "ad_events"),
        "archived_files": _count(home / "_archive" / "landing" / "ad_events"),
    }


class Month:
    """The simulated lake and its clock."""

    def __init__(self, work: Path, runs_per_day: int, events: int):
        from spark_jobs.engine.session import build_session
        from testkit.lakes import spec_copy

        # Spark deletes a file source log's compacted-away files once they are 10 minutes old by
        # the real clock (for readers still listing them); a month simulated in minutes never gets
        # there, so here they go at once.
        build_session("lakehouse-bench").conf.set(
            "spark.sql.streaming.fileSource.log.cleanupDelay", "0"
        )
        self.home, self.runs_per_day, self.events = work / "lake", runs_per_day, events
        schedule = f"0 */{24 // runs_per_day} * * *"
        os.environ["LAKEHOUSE_HOME"] = str(self.home)
        os.environ["LAKEHOUSE_PIPELINES"] = str(
            spec_copy(
                work / "pipelines",
                schedule=schedule,
                retention=RETENTION,
                min_batches_to_retain=RETAINED,
            )
        )
        os.environ["LAKEHOUSE_QUALITY"] = str(work / "no-suites")
        self.start = time.time() + 3600  # the simulated clock is always ahead of the real one
        self.now = self.start
        self.stamped: set[Path] = set()
        self.landing = self.home / "landing" / "ad_events"

    def at(self, moment: float) -> None:
        """Move the platform's clock to ``moment`` (epoch seconds)."""
        self.now = moment
        os.environ["LAKEHOUSE_CLOCK_SHIFT"] = f"{int(moment - time.time())} seconds"

    def land(self, seed: int) -> None:
        from spark_jobs import service

        before = set(self.landing.iterdir()) if self.landing.exists() else set()
        service.generate(
            "ad_events",
            self.events,
            files=2,
            seed=seed,
            start_ms=int(self.now * 1000) - 300_000,
            bad_fraction=0.03,
        )
        for path in set(self.landing.iterdir()) - before:
            os.utime(path, (self.now, self.now))

    def run(self, hop: str = "all") -> None:
        from spark_jobs import service

        service.run("ad_events", hop, progress=lambda line: None).raise_for_gate()
        for commit in self.home.glob("checkpoints/ad_events/*/commits/*"):
            if commit not in self.stamped:
                os.utime(commit, (self.now, self.now))
                self.stamped.add(commit)


def _check_bounded(days: list[dict]) -> list[str]:
    """Each figure flat once retention holds: its most over the month's last third at most 5% (and
    2) above its most over the middle third. A figure that grows by a file a day fails it."""
    third = max(len(days) // 3, 1)
    middle, last = days[-2 * third : -third] or days[:1], days[-third:]

    def most(span: list[dict], key: str, table: str | None = None) -> int:
        return max(
            day["figures"][key] if table is None else day["figures"][key].get(table, 0)
            for day in span
        )

    grown = []
    # checkpoints: against their settings (_check_checkpoints)
    for key in ("ops_files", "landing_files"):
        if most(last, key) > 1.05 * most(middle, key) + 2:
            grown.append(f"{key}: {most(middle, key)} -> {most(last, key)}")
    # a table's files grow with its partitions, one a day
    for key in ("most_per_partition", "log_files"):
        for table in last[-1]["figures"][key]:
            if most(last, key, table) > 1.05 * most(middle, key, table) + 2:
                grown.append(
                    f"{key} of {table}: {most(middle, key, table)} -> {most(last, key, table)}"
                )
    return grown


def _check_checkpoints(home: Path, retained: int, compact_interval: int) -> list[str]:
    """Each checkpoint within what its settings let Spark keep (it purges as it commits): the
    last ``retained`` batches' offsets and commits; the file source log's files from the
    compaction before those on; per state store, the deltas from the snapshot before them on
    (Spark snapshots every 10 deltas) and a few snapshots."""
    over = []
    for checkpoint in sorted(home.glob("checkpoints/ad_events/*")):
        bounds = {
            "offsets": retained + 2,
            "commits": retained + 2,
            "sources/0": retained + compact_interval + 2,
        }
        for folder, bound in bounds.items():
            kept = sum(1 for path in (checkpoint / folder).glob("*") if path.name[:1].isdigit())
            if kept > bound:
                over.append(f"{checkpoint.name}/{folder} keeps {kept} files, more than {bound}")
        for store in sorted({path.parent for path in checkpoint.glob("state/*/*/*.delta")}):
            kept = sum(1 for path in store.iterdir() if path.suffix in (".delta", ".snapshot"))
            if kept > retained + 10 + 5:
                over.append(
                    f"{checkpoint.name}'s state store {store.parent.name}/{store.name} keeps "
                    f"{kept} files, more than {retained + 10 + 5}"
                )
    return over


def _end_checks(month: Month) -> dict:
    """A paused gold reads on; a rollback inside the window replays to equal tables; one outside
    is refused and changes nothing."""
    from spark_jobs import service
    from spark_jobs.model.errors import RollbackRefused
    from testkit.expected import assert_tables_match_landing
    from testkit.paths import file_tree

    checks = {}
    for day in range(2):  # gold paused for two days, maintenance going on
        for run in range(month.runs_per_day):
            month.at(month.now + DAY_S / month.runs_per_day)
            month.land(10_000 + day * 100 + run)
            month.run("bronze")
            month.run("silver")
        service.maintain("ad_events", progress=lambda line: None)
    month.run("gold")
    assert_tables_match_landing(month.home)
    checks["paused_gold_read_on"] = True
    tree = file_tree(month.home)
    try:
        service.rollback(
            "ad_events",
            "silver",
            to_time_ms=int((month.now - 4 * DAY_S) * 1000),
            progress=lambda line: None,
        )
        raise RuntimeError("a rollback four days back, outside the 2-day window, was not refused")
    except RollbackRefused as refused:
        checks["outside_refused"] = str(refused)[:300]
    if file_tree(month.home) != tree:
        raise RuntimeError("a refused rollback changed files")
    began = time.perf_counter()
    service.rollback(
        "ad_events",
        "silver",
        to_time_ms=int((month.now - DAY_S) * 1000),
        progress=lambda line: None,
    )
    month.run()
    checks["inside_rollback_and_replay_s"] = round(time.perf_counter() - began, 1)
    assert_tables_match_landing(month.home)
    return checks


def run(days: int, runs_per_day: int, events: int) -> dict:
    from spark_jobs import service
    from testkit.expected import assert_tables_match_landing

    work = Path(tempfile.mkdtemp(prefix="lakehouse-bench-month-"))
    kept = {
        name: os.environ.get(name)
        for name in (
            "LAKEHOUSE_HOME",
            "LAKEHOUSE_PIPELINES",
            "LAKEHOUSE_QUALITY",
            "LAKEHOUSE_CLOCK_SHIFT",
        )
    }
    try:
        month = Month(work, runs_per_day, events)
        series = []
        for day in range(days):
            began = time.perf_counter()
            for run in range(runs_per_day):
                month.at(month.start + day * DAY_S + run * DAY_S / runs_per_day)
                month.land(day * 100 + run)
                month.run()
            runs_s = time.perf_counter() - began
            began = time.perf_counter()
            service.maintain("ad_events", progress=lambda line: None)
            maintain_s = time.perf_counter() - began
            assert_tables_match_landing(month.home)
            oldest = min(
                (path.stat().st_mtime for path in month.landing.iterdir()), default=month.now
            )
            series.append(
                {
                    "day": day + 1,
                    "runs_s": round(runs_s, 1),
                    "maintain_s": round(maintain_s, 1),
                    "oldest_landing_days": round((month.now - oldest) / DAY_S, 2),
                    "figures": _figures(month.home),
                }
            )
            print(
                json.dumps({key: value for key, value in series[-1].items() if key != "figures"}),
                flush=True,
            )
        from spark_jobs.model.spec import get_spec

        spec = get_spec("ad_events")
        grown = _check_bounded(series) + _check_checkpoints(
            month.home, spec.min_batches_to_retain, spec.source_log_compact_interval
        )
        if grown:
            raise RuntimeError(f"grew without bound over the month: {'; '.join(grown)}")
        # Landing 4 days, rollback window 2 days, maintenance daily: no file older
        # than 5 days stays.
        if max(day["oldest_landing_days"] for day in series) > 5:
            raise RuntimeError(
                "landing files older than the retention stayed: "
                f"{[d['oldest_landing_days'] for d in series]}"
            )
        checks = _end_checks(month)
    finally:
        for name, value in kept.items():
            os.environ.pop(name, None) if value is None else os.environ.__setitem__(name, value)
        shutil.rmtree(work, ignore_errors=True)
    return {
        "days": days,
        "runs_per_day": runs_per_day,
        "events_per_run": events,
        "retention": RETENTION,
        "series": series,
        "checks": checks,
    }


def markdown(result: dict) -> str:
    lines = [
        f"{result['days']} simulated days, {result['runs_per_day']} runs a day of "
        f"{result['events_per_run']} events, retention {result['retention']}; maintenance "
        "after each day's last run",
        "",
        "| day | runs s | maintain s | data files (all tables) | most in a partition | log files "
        "(all tables) | checkpoint files | _ops files | landing files | archived |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for day in result["series"]:
        figures = day["figures"]
        lines.append(
            f"| {day['day']} | {day['runs_s']} | {day['maintain_s']} | "
            f"{sum(figures['data_files'].values())} | "
            f"{max(figures.get('most_per_partition', {}).values(), default='-')} | "
            f"{sum(figures['log_files'].values())} | {figures['checkpoint_files']} | "
            f"{figures['ops_files']} | {figures['landing_files']} | {figures['archived_files']} |"
        )
    checks = result["checks"]
    lines.append(
        "\nEvery day every table equalled the landing files. Then gold, paused two days, read on; "
        "a rollback of silver one day back and its replay took "
        f"{checks['inside_rollback_and_replay_s']} s and left equal tables; one four days back was "
        "refused with no file changed."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.month", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--days", type=int, default=12)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--events", type=int, default=200)
    args = parser.parse_args(argv)
    from spark_jobs.engine.session import build_session

    build_session("lakehouse-bench")
    result = run(args.days, args.runs, args.events)
    print(json.dumps(result["checks"], indent=2))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
