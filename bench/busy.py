"""Busy fraction at the default cadence.

``make run``'s platform as a user starts it (Airflow's scheduler, API server and DAG processor,
the embedded PostgreSQL, the stream DAG on the spec's schedule, the launcher's trickle
of a sample file every minute) against always-on streaming (``lakehouse run --continuous``) fed
the same trickle, each alone on the machine for the same wall time. Busy fraction: CPU seconds
of every process each started, per wall second (2.0 would be both cores all the time). The
target: the platform's at most a third of always-on's.

    python -m bench --only busy --busy-minutes 30
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, metered

LAUNCHER = ROOT / "include" / "scripts" / "lakehouse_platform.py"
TRICKLE_EVERY_S = 60.0  # the launcher's defaults: one sample file a minute
TRICKLE_EVENTS = 200


def _lakehouse(*args: str) -> list[str]:
    return [sys.executable, "-m", "spark_jobs.cli", *args]


def always_on(seconds: float, trickle_every: float, trickle_events: int) -> int:
    """``--continuous`` with the launcher's trickle (a sample file now, then one every
    ``trickle_every``), for ``seconds``.
    """
    generate = _lakehouse("generate", "ad_events", "--events", str(trickle_events))
    subprocess.run(generate, check=True, stdout=subprocess.DEVNULL)
    stream = subprocess.Popen(
        _lakehouse("run", "ad_events", "--continuous"), stdout=subprocess.DEVNULL
    )
    began = time.time()
    next_file = began + trickle_every
    while time.time() - began < seconds:
        if stream.poll() is not None:
            print(f"the always-on stream exited {stream.returncode}", file=sys.stderr)
            return 1
        if time.time() >= next_file:
            subprocess.run(generate, check=False, stdout=subprocess.DEVNULL)
            next_file = time.time() + trickle_every
        time.sleep(1)
    stream.send_signal(signal.SIGTERM)  # the always-on mode stops at the end of its batch
    return 0 if stream.wait(timeout=300) == 0 else 1


def _stream_runs(lake: Path) -> int:
    """Stream DAG runs that ran bronze (its run records), and runs that found nothing
    new are not there.
    """
    return len(list((lake / "_ops" / "runs" / "ad_events").glob("*__*.bronze.json")))


def run(minutes: float, log_dir: Path) -> dict:
    seconds = minutes * 60
    work = Path(tempfile.mkdtemp(prefix="lakehouse-busy-"))
    base = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AIRFLOW__", "LAKEHOUSE_"))
    }
    try:
        # The example pipeline alone on both sides (always-on streams ad_events only).
        shutil.copytree(ROOT / "examples" / "ad_events", work / "pipelines" / "ad_events")
        platform_env = {
            **base,
            "AIRFLOW_HOME": str(work / "airflow"),
            "LAKEHOUSE_HOME": str(work / "platform-lake"),
            "LAKEHOUSE_PIPELINES": str(work / "pipelines"),
        }
        from testkit.paths import free_port

        platform_env["AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"] = str(free_port())
        platform = metered(
            [
                sys.executable,
                str(LAUNCHER),
                "run",
                "--port",
                str(free_port()),
                "--duration",
                str(seconds),
                "--trickle-every",
                str(TRICKLE_EVERY_S),
                "--trickle-events",
                str(TRICKLE_EVENTS),
            ],
            platform_env,
            log=log_dir / "busy-platform.log",
        )
        runs = _stream_runs(work / "platform-lake")
        stream_env = {
            **base,
            "LAKEHOUSE_HOME": str(work / "always-on-lake"),
            "LAKEHOUSE_PIPELINES": str(work / "pipelines"),
        }
        always = metered(
            [sys.executable, "-m", "bench.busy", "--always-on", str(seconds)],
            stream_env,
            log=log_dir / "busy-always-on.log",
        )
    finally:
        sys.path.insert(0, str(ROOT / "include" / "scripts"))
        import metadata_db

        if (work / "airflow" / "postgres").exists():
            # as root its data is outside work
            metadata_db.Postgres(work / "airflow" / "postgres").remove()
        shutil.rmtree(work, ignore_errors=True)
    busy = {
        "platform": platform["cpu_s"] / platform["wall_s"],
        "always_on": always["cpu_s"] / always["wall_s"],
    }
    from spark_jobs.model.spec import load_spec

    return {
        "minutes": minutes,
        "trickle": f"{TRICKLE_EVENTS} events every {TRICKLE_EVERY_S:g} s",
        "schedule": load_spec(ROOT / "examples" / "ad_events" / "ad_events.yaml").schedule,
        "platform": {
            **platform,
            "busy": round(busy["platform"], 3),
            "stream_runs_with_new_data": runs,
        },
        "always_on": {**always, "busy": round(busy["always_on"], 3)},
        "ratio": round(busy["platform"] / busy["always_on"], 3),
        "target": "platform busy <= 1/3 of always-on's",
        "met": busy["platform"] <= busy["always_on"] / 3,
    }


def markdown(result: dict) -> str:
    platform, always = result["platform"], result["always_on"]
    return "\n".join(
        [
            f"{result['minutes']:g} minutes each, alone, trickle {result['trickle']}:",
            "",
            "| | wall s | CPU s | busy (cores) |",
            "|---|---:|---:|---:|",
            f"| `make run`'s platform (stream DAG on `{result.get('schedule')}`; "
            f"{platform['stream_runs_with_new_data']} runs with new data)"
            f" | {platform['wall_s']:.0f} | {platform['cpu_s']:.0f} | {platform['busy']:.3f} |",
            f"| always-on `--continuous` | {always['wall_s']:.0f} | {always['cpu_s']:.0f} | "
            f"{always['busy']:.3f} |",
            "",
            f"Platform / always-on: **{result['ratio']:.2f}** (target at most 0.33: "
            f"{'met' if result['met'] else 'not met'}).",
            "",
            *[
                f"{label} CPU s by process (as last sampled): "
                + ", ".join(
                    f"{name} {seconds:g}"
                    for name, seconds in side.get("cpu_s_by_process", {}).items()
                )
                + "\n"
                for label, side in (("Platform's", platform), ("Always-on's", always))
                if side.get("cpu_s_by_process")
            ],
        ]
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--always-on", type=float, required=True, help="seconds")
    args = parser.parse_args()
    sys.exit(always_on(args.always_on, TRICKLE_EVERY_S, TRICKLE_EVENTS))
