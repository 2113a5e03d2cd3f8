"""Benchmark: the lake on S3 against the local lake, side by side in one process.

The S3 lake is on the embedded S3 server (SeaweedFS on loopback, ``include/scripts/s3_server.py``),
so the figures are an S3 protocol's overhead on this machine, not a network's. Both lakes get the
same landing files (one seed); after a warm-up run, each repeat runs all three hops once into an
empty lake (tables, checkpoints and records removed, landing kept), local then S3. Then what the
plain-file readers and the lock cost on S3, in requests (counted at s3fs's client) and seconds: one
``status``, one new-data check (the stream DAG's first task), and the lease taken and let go.

    python -m bench.s3 [--events 200000] [--repeats 3]
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.common import ROOT, spread, stats
from testkit.paths import environment_kept

sys.path.insert(0, str(ROOT / "include" / "scripts"))


def _empty(home: str) -> None:
    """Remove everything but the landing files."""
    from spark_jobs.logs.fs import filesystem, remove_tree

    fs = filesystem(home)
    for top in ("tables", "checkpoints", "_ops"):
        if "://" in home:
            remove_tree(fs, f"{home}/{top}")
        else:
            shutil.rmtree(f"{home}/{top}", ignore_errors=True)


def _run_all(home: str) -> tuple[float, int]:
    """Seconds to run every hop once over the landing files; rows written to bronze."""
    from spark_jobs import service

    os.environ["LAKEHOUSE_HOME"] = home
    began = time.perf_counter()
    result = service.run("ad_events", quality="off", progress=lambda line: None)
    return time.perf_counter() - began, result.records[0].rows_out


class _Requests:
    """Counts the S3 requests s3fs's client sends (botocore's ``before-send``
    event), by operation.
    """

    def __init__(self, home: str):
        from fsspec.asyn import sync

        from spark_jobs.logs.fs import filesystem

        fs = filesystem(home)
        client = sync(fs.loop, fs.set_session)
        self.counts: Counter = Counter()
        client.meta.events.register("before-send.s3", self._count)

    def _count(self, request=None, **kwargs) -> None:
        self.counts[kwargs.get("event_name", "before-send.s3.?").rsplit(".", 1)[-1]] += 1

    def measure(self, action) -> dict:
        self.counts.clear()
        began = time.perf_counter()
        action()
        seconds = time.perf_counter() - began
        return {
            "requests": sum(self.counts.values()),
            "by_operation": dict(self.counts),
            "seconds": round(seconds, 3),
        }


def _readers(home: str) -> dict:
    from spark_jobs import service
    from spark_jobs.control.coordination.lock import pipeline_lock
    from spark_jobs.control.status import pending_work

    os.environ["LAKEHOUSE_HOME"] = home
    lake = service.open_lake("ad_events")
    requests = _Requests(home)

    def lock() -> None:
        with pipeline_lock(lake, "bench"):
            pass

    return {
        "status": requests.measure(lambda: service.status("ad_events")),
        "new_data_check": requests.measure(lambda: pending_work(lake)),
        "lock": requests.measure(lock),
    }


def run(events: int, repeats: int) -> dict:
    from s3_server import BUCKET, S3Server

    from spark_jobs.cli import main
    from spark_jobs.engine.session import build_session

    work = Path(tempfile.mkdtemp(prefix="bench-s3-"))
    server = S3Server(work / "s3")
    server.start()
    with environment_kept(*server.env(), "LAKEHOUSE_HOME"):
        try:
            os.environ.update(server.env())
            lakes = {"local": str(work / "lake"), "s3": f"s3a://{BUCKET}/bench"}
            for home in lakes.values():
                os.environ["LAKEHOUSE_HOME"] = home
                assert (
                    main(
                        [
                            "generate",
                            "ad_events",
                            "--events",
                            str(events),
                            "--files",
                            "8",
                            "--seed",
                            "5",
                            "--start",
                            "2026-05-01T00:00:00",
                        ]
                    )
                    == 0
                )
            build_session("lakehouse-bench")
            # warm-up, not counted: the JVM's first run loads and compiles most of its classes
            _run_all(lakes["local"])
            seconds: dict[str, list[float]] = {way: [] for way in lakes}
            rows: dict[str, int] = {}
            for _ in range(repeats):
                for way, home in lakes.items():
                    _empty(home)
                    took, rows[way] = _run_all(home)
                    seconds[way].append(took)
            assert rows["local"] == rows["s3"], f"the two lakes wrote different rows: {rows}"
            readers = _readers(lakes["s3"])
        finally:
            server.stop()
            shutil.rmtree(work, ignore_errors=True)
    summary = {way: stats(values) for way, values in seconds.items()}
    return {
        "events": events,
        "bronze_rows": rows["local"],
        "seconds": summary,
        "records_per_s": {way: round(events / summary[way]["median"]) for way in summary},
        "s3_over_local": round(summary["local"]["median"] / summary["s3"]["median"], 2),
        "readers": readers,
    }


def markdown(result: dict) -> str:
    lines = [
        f"All three hops run once over {result['events']:,} events into an empty lake, the local "
        "lake and the embedded S3 server's, interleaved, median of "
        f"{result['seconds']['local']['n']} (min-max)",
        "",
        "| lake | seconds | records/s |",
        "|---|---:|---:|",
    ]
    for way in ("local", "s3"):
        lines.append(
            f"| {way} | {spread(result['seconds'][way])} | {result['records_per_s'][way]:,} |"
        )
    lines.append(
        f"\nS3/local throughput = {result['s3_over_local']} (the S3 server "
        "runs on the same 2 cores)"
    )
    lines += [
        "",
        "What the plain-file readers and the lock cost on the S3 lake (after those runs):",
        "",
        "| action | S3 requests | seconds | requests by operation |",
        "|---|---:|---:|---|",
    ]
    for action, figures in result["readers"].items():
        ops = ", ".join(
            f"{name} {count}" for name, count in sorted(figures["by_operation"].items())
        )
        lines.append(
            f"| {action.replace('_', ' ')} | {figures['requests']} | "
            f"{figures['seconds']:.2f} | {ops} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(markdown(run(args.events, args.repeats)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
