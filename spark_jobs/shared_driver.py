"""The shared driver's Spark side (:mod:`spark_jobs.control.coordination.driver` has the wire and
the loop), above the engine beside the CLI it serves.

``spark-submit .../submit.py serve --address PATH --idle S`` builds the session once, then
serves ``lakehouse`` commands: each runs :func:`spark_jobs.cli.main` in this process, on the
same session, exactly as the CLI would in a driver of its own.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from spark_jobs.control.coordination.driver import serve
from spark_jobs.engine.session import build_session


def run_command(argv: list[str]) -> int:
    """One ``lakehouse`` command; its exit code (a traceback on the client's stderr for a bug)."""
    from pyspark.sql import SparkSession

    from spark_jobs.cli import main

    active = SparkSession.getActiveSession()
    if active is not None:
        # Another process may have changed the tables since the last command (a backfill, a
        # rollback): read every Delta log afresh, as a driver of its own would.
        active._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    try:
        return main(argv)
    except SystemExit as ended:  # argparse's usage errors
        return ended.code if isinstance(ended.code, int) else 2
    except Exception:
        traceback.print_exc()
        return 1


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="submit.py serve")
    parser.add_argument("--address", required=True, help="the address file to write")
    parser.add_argument(
        "--idle", type=float, default=60.0, help="seconds without a command before the driver ends"
    )
    parser.add_argument("--log", default="", help="this driver's log, named in errors")
    args = parser.parse_args(argv)
    build_session("lakehouse-shared-driver")
    serve(Path(args.address), run_command, args.idle, args.log)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
