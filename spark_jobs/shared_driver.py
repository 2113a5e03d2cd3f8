"""The shared driver's process, beside the CLI it serves.

``spark-submit .../submit.py serve --address PATH --idle S`` becomes a DAG run's shared driver
(:func:`spark_jobs.service.submission.serve_commands`): one session, then ``lakehouse`` commands,
each run by :func:`spark_jobs.cli.main` in this process on that session, exactly as the CLI would
in a driver of its own.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from spark_jobs.service.submission import serve_commands


def run_command(argv: list[str]) -> int:
    """One ``lakehouse`` command; its exit code (a traceback on the client's stderr for a bug)."""
    from spark_jobs.cli import main

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
    serve_commands(Path(args.address), run_command, args.idle, args.log)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
