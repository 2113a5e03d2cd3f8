"""What the benchmarks share: summary statistics, the machine, fresh lakes, metered subprocesses."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
CORES = 2  # local[2], the default master: a job holds two cores while it runs


def stats(values: list[float], digits: int = 3) -> dict:
    """Median, min and max of repeated measurements."""
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
        "n": len(values),
    }


def spread(summary: dict, fmt: str = "{:.1f}") -> str:
    """``median (min-max)`` of a :func:`stats` summary, for tables."""
    if summary["n"] == 1:
        return fmt.format(summary["median"])
    return (
        f"{fmt.format(summary['median'])} "
        f"({fmt.format(summary['min'])}-{fmt.format(summary['max'])})"
    )


def machine() -> dict:
    cpu = ""
    try:
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu or platform.processor(),
        "python": platform.python_version(),
        "system": platform.platform(),
        "spark_master": os.environ.get("LAKEHOUSE_SPARK_MASTER", "local[2]"),
    }


def link_landing(source_home: Path, home: Path) -> None:
    """Give a fresh lake the same landing files (hard links: no copy, same bytes)."""
    for path in sorted(source_home.joinpath("landing").rglob("*")):
        target = home / path.relative_to(source_home)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(path, target)


def timed_lakehouse(source_home: Path, home: Path, argv: list[str]) -> float:
    """``lakehouse ARGV`` in this process on the fresh lake ``home`` given ``source_home``'s
    landing files: its seconds."""
    link_landing(source_home, home)
    return lakehouse_seconds(home, argv)


def lakehouse_seconds(home: Path, argv: list[str]) -> float:
    """``lakehouse ARGV`` in this process on the lake ``home``: its seconds (an exit code other
    than 0 raises)."""
    from spark_jobs.cli import main

    os.environ["LAKEHOUSE_HOME"] = str(home)
    began = time.perf_counter()
    code = main(argv)
    elapsed = time.perf_counter() - began
    if code != 0:
        raise RuntimeError(f"lakehouse {' '.join(argv)} exited {code}")
    return elapsed


def lakehouse_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "spark_jobs.cli", *args]


def metered(
    command: list[str],
    env: dict[str, str],
    *,
    stop_after: float | None = None,
    log: Path | None = None,
) -> dict:
    """Run ``command`` under :mod:`bench.meter`: wall seconds, CPU seconds of it and every
    process it started (the JVM included), and the names of those processes."""
    meter = [sys.executable, "-m", "bench.meter"]
    if stop_after is not None:
        meter += ["--stop-after", str(stop_after)]
    began = time.time()
    with open(log or os.devnull, "ab") as sink:
        done = subprocess.run(
            [*meter, "--", *command],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=sink,
            check=False,
        )
    lines = done.stdout.decode().strip().splitlines()
    if not lines:
        raise RuntimeError(
            f"the meter printed nothing for {command} (exit {done.returncode}; log: {log})"
        )
    result = json.loads(lines[-1])
    result["started"] = began
    if result["exit_code"] != 0:
        raise RuntimeError(f"{' '.join(command)} exited {result['exit_code']} (log: {log})")
    return result


def write_json(name: str, document: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / name
    path.write_text(json.dumps(document, indent=2))
    return path
