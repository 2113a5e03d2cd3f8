"""The shared driver's process, beside the CLI it stands in for.

``spark-submit .../submit.py serve --address PATH --idle S`` becomes a DAG run's shared driver
(:func:`spark_jobs.service.submission.serve_commands`): one session, then the calls the run's
tasks send (:class:`spark_jobs.model.calls.Call`), each performed by
:func:`spark_jobs.perform.perform` in this process on that session: the service function the
CLI would call, with the lines, JSON and exit code the CLI would print.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from spark_jobs.model.calls import Call
from spark_jobs.model.origin import given
from spark_jobs.perform import answered, perform
from spark_jobs.service.submission import serve_commands


def perform_call(wire: dict) -> int:
    """One call as a task sent it, under the origin the task sent with it (its DAG run and task);
    its exit code (a traceback on the client's stderr for a bug)."""
    values = dict(wire)
    sent_from = values.pop("origin", None)
    try:
        with given(sent_from):
            return answered(lambda: perform(Call.from_wire(values)))
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
    serve_commands(Path(args.address), perform_call, args.idle, args.log)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
