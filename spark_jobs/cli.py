"""The ``lakehouse`` command (docs/concepts/run-and-backfill.md): argv ->
:mod:`spark_jobs.service` -> print.

Errors a user can fix print one line and exit 2 (1 for a failed run); ``--json`` prints one
JSON document on stdout and no progress; without it, progress lines go to stderr, each with the
seconds since the command began.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import sys

from spark_jobs import service
from spark_jobs.model.calls import CALLS, QUALITY_MODES, Call, build
from spark_jobs.model.errors import UsageError
from spark_jobs.model.times import parse_time
from spark_jobs.perform import answered, emit, perform


def _emit(args, document: dict, text: str) -> None:
    emit(args.json, document, text)


def call_of(args) -> Call:
    """The :class:`~spark_jobs.model.calls.Call` of a writing command's parsed options."""
    options = {
        each.name: getattr(args, each.name) for each in dataclasses.fields(CALLS[args.command])
    }
    return build(args.command, **options)


def _call(args) -> int:
    """Perform the command's call (the shared driver performs the calls tasks send it the same
    way)."""
    return perform(call_of(args), args.json)


def cmd_generate(args) -> int:
    start = parse_time(args.start, "--start") if args.start else None
    result = service.generate(
        args.pipeline,
        args.events,
        args.files,
        args.seed,
        start,
        args.bad_fraction,
        args.late_fraction,
    )
    folders = sorted({path.rsplit("/", 1)[0] for path in result.files})
    _emit(
        args,
        dataclasses.asdict(result),
        f"wrote {result.events} events ({result.bad_lines} invalid lines, "
        f"{result.late_events} late) in {len(result.files)} files to {', '.join(folders)}",
    )
    return 0


def cmd_setup(args) -> int:
    result = service.setup()
    archive = result["jvm_archive"] or "none (drivers start without one)"
    _emit(
        args,
        result,
        f"{len(result['jars'])} jars in {result['jars_dir']}\nclass-data "
        f"sharing archive: {archive}",
    )
    return 0


def cmd_new(args) -> int:
    result = service.new(args.pipeline, args.format)
    name = result.name
    _emit(
        args,
        {"pipeline": name, "files": result.files},
        f"wrote pipeline {name}:\n"
        + "".join(f"  {path}\n" for path in result.files)
        + (
            f"try: lakehouse generate {name} --events 1000 --bad-fraction 0.02 && "
            f"lakehouse run {name}"
        ),
    )
    return 0


def cmd_status(args) -> int:
    status = service.status(args.pipeline, args.hop)
    _emit(args, status, service.status_text(status))
    return 0


def cmd_quality(args) -> int:
    summary = service.quality(args.pipeline, args.hop, args.run)
    _emit(args, summary, service.quality_text(summary))
    return 1 if summary["gate"] == "failed" else 0


def cmd_quarantine(args) -> int:
    document = service.quarantine(args.pipeline, args.hop, args.run)
    _emit(args, document, service.quarantine_text(document))
    return 0


def cmd_events(args) -> int:
    filters = {
        "hop": args.hop,
        "event_types": tuple(args.type or ()),
        "level": args.level,
        "since_s": parse_time(args.since, "--since") / 1000 if args.since else None,
        "until_s": parse_time(args.until, "--until") / 1000 if args.until else None,
        "run_id": args.run,
    }
    if args.limit is not None and args.limit < 0:
        raise UsageError(f"--limit {args.limit} is negative: give how many of the last events")
    if args.follow:
        try:
            for found in service.follow_events(args.pipeline, args.interval, **filters):
                for event in found:
                    line = json.dumps(event, default=str) if args.json else None
                    print(line or service.events_text([event]))
                sys.stdout.flush()
        except KeyboardInterrupt:
            return 0
    found = service.events(args.pipeline, **filters)
    if args.limit is not None:
        found = found[-args.limit :] if args.limit else []
    _emit(args, {"events": found}, service.events_text(found))
    return 0


def cmd_checkpoint_validate(args) -> int:
    result = service.validate(args.pipeline, args.hop, args.repair)
    _emit(args, result.to_dict(), service.findings_text(result.findings, result.pipeline))
    return 0 if result.consistent else 1


QUALITY_HELP = (
    "after each hop, check its quality suite on the rows the run wrote: gate (default) stops at a "
    "failed gate and exits 1; report records the result and goes on; off skips the check"
)


WAIT_HOLDS = "seconds to wait while another job holds the pipeline"
WAIT_RUNNING = "seconds to wait for a running job to end"


def _add_wait(sub: argparse.ArgumentParser, help_text: str) -> None:
    """``--wait SECONDS``: a writing call's ``wait_s``."""
    sub.add_argument(
        "--wait", dest="wait_s", metavar="SECONDS", type=float, default=0.0, help=help_text
    )


def _command(commands, name: str, help_text: str, handler) -> argparse.ArgumentParser:
    """A sub-command taking a pipeline name and ``--json``, run by ``handler``."""
    sub = commands.add_parser(name, help=help_text, description=help_text)
    sub.add_argument("pipeline", help="pipeline name (a spec in $LAKEHOUSE_PIPELINES)")
    sub.add_argument("--json", action="store_true", help="print one JSON document")
    sub.set_defaults(handler=handler)
    return sub


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakehouse",
        description="Run lakehouse pipelines: run-once streams, backfills, status.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    _add_setup(commands)
    _add_writers(commands)
    _add_readers(commands)
    _add_undoers(commands)
    _add_maintain(commands)
    _add_checkpoint(commands)
    return parser


def _add_setup(commands) -> None:
    """``setup``: the caches."""
    setup_help = (
        "resolve the JVM jars into the cache (once, with Maven) and build the Spark drivers' "
        "class-data archive; a no-op when done"
    )
    setup = commands.add_parser("setup", help=setup_help, description=setup_help)
    setup.add_argument("--json", action="store_true", help="print one JSON document")
    setup.set_defaults(handler=cmd_setup)


def _add_writers(commands) -> None:
    """The commands that write data: generate, new, run, backfill."""
    command = functools.partial(_command, commands)

    generate = command("generate", "write sample events to the landing folder", cmd_generate)
    generate.add_argument("--events", type=int, required=True, help="how many events (per source)")
    generate.add_argument(
        "--files", type=int, default=1, help="spread over this many new files (per source)"
    )
    generate.add_argument(
        "--seed", type=int, help="the random generator's seed: the same files every time"
    )
    generate.add_argument("--start", help="first event time, ISO-8601 (default: now)")
    generate.add_argument(
        "--bad-fraction", type=float, default=0.0, help="this fraction of lines invalid (0..1)"
    )
    generate.add_argument(
        "--late-fraction",
        type=float,
        default=0.0,
        help="this fraction of events 5 minutes older than their place (0..1)",
    )

    new = command(
        "new",
        "write a runnable skeleton pipeline (spec, code, sample data, suites, "
        "a test) to make yours",
        cmd_new,
    )
    new.add_argument(
        "--format",
        choices=("json", "csv"),
        default="json",
        help=(
            "its sample lands as JSON lines its code parses (default), or as "
            "CSV files with a header "
            "the platform parses by the spec's columns"
        ),
    )

    run = command(
        "run", "process new data: run-once (availableNow), or always-on with --continuous", _call
    )
    run.add_argument("--hop", default="all", help="one hop, or all (in the spec's order)")
    run.add_argument(
        "--max-files-per-trigger", type=int, help="at most this many landing files per micro-batch"
    )
    run.add_argument(
        "--continuous", action="store_true", help="always-on: run until stopped (Ctrl-C)"
    )
    run.add_argument(
        "--trigger-interval",
        help="with --continuous, how often a batch starts (default: 10 seconds)",
    )
    run.add_argument("--run-id", help="id for the run records (default: generated)")
    _add_wait(run, WAIT_HOLDS)
    run.add_argument("--quality", choices=QUALITY_MODES, default="gate", help=QUALITY_HELP)

    backfill = command(
        "backfill", "recompute [start, end) in batch mode with the same transforms", _call
    )
    backfill.add_argument(
        "--start", required=True, help="first event time of the range, ISO-8601 (UTC)"
    )
    backfill.add_argument(
        "--end", required=True, help="end of the range (excluded), ISO-8601 (UTC)"
    )
    backfill.add_argument("--hop", default="all", help="one hop, or all (in the spec's order)")
    backfill.add_argument("--run-id", help="id for the run records (default: generated)")
    _add_wait(backfill, WAIT_HOLDS)
    backfill.add_argument("--quality", choices=QUALITY_MODES, default="gate", help=QUALITY_HELP)


def _add_readers(commands) -> None:
    """The commands that read: quality, quarantine, status."""
    command = functools.partial(_command, commands)

    checked = command(
        "quality", "check a hop's quality suite on the rows one run wrote", cmd_quality
    )
    checked.add_argument("--hop", required=True, help="the hop whose suite to check")
    checked.add_argument("--run", help="run id (default: the hop's last succeeded run)")

    held = command(
        "quarantine",
        "what the quarantine tables hold: rows by reason and by file, samples, and the "
        "backfill that ingests a fixed file again",
        cmd_quarantine,
    )
    held.add_argument("--hop", help="one hop with a quarantine table (default: all of them)")
    held.add_argument("--run", help="only the rows this run quarantined")

    status = command("status", "batches, runs and table versions, read without a JVM", cmd_status)
    status.add_argument("--hop", help="one hop, with every batch its checkpoint holds")
    _add_events(commands)


def _add_events(commands) -> None:
    """``events``: the event log."""
    events_help = (
        "what happened, from the lake's event log (a Delta table): runs and their batches, gates, "
        "rollbacks, maintenance, alerts and refused commands, oldest first; read without a JVM"
    )
    events = commands.add_parser("events", help=events_help, description=events_help)
    events.add_argument("pipeline", nargs="?", help="one pipeline (default: every pipeline)")
    events.add_argument("--hop", help="one hop's events")
    events.add_argument(
        "--type",
        action="append",
        choices=service.EVENT_TYPES,
        help="only events of this type (repeat for several)",
    )
    events.add_argument(
        "--level", type=str.upper, choices=("INFO", "WARN", "ERROR"), help="this level and above"
    )
    events.add_argument("--since", help="events at or after this ISO-8601 time (UTC)")
    events.add_argument("--until", help="events before this ISO-8601 time (UTC)")
    events.add_argument("--run", help="one run id's events")
    events.add_argument("--limit", type=int, help="only the last N events")
    events.add_argument(
        "--follow", action="store_true", help="keep printing events as they happen (Ctrl-C ends)"
    )
    events.add_argument(
        "--interval", type=float, default=2.0, help="with --follow: seconds between reads"
    )
    events.add_argument(
        "--json", action="store_true", help="print JSON (one line per event with --follow)"
    )
    events.set_defaults(handler=cmd_events)


def _add_undoers(commands) -> None:
    """The commands that undo: rollback, refresh."""
    command = functools.partial(_command, commands)

    rollback = command(
        "rollback",
        "undo batches of a hop (and the hops below) so the next run replays them",
        _call,
    )
    rollback.add_argument("--hop", required=True, help="the hop to roll back")
    target = rollback.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-batch", type=int, help="the last batch to keep (-1: none)")
    target.add_argument("--to-run", help="undo this run and everything after it")
    target.add_argument("--to-time", help="keep the batches committed by this time (ISO-8601, UTC)")
    rollback.add_argument(
        "--cascade",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=(
            "also undo the hops below that read the undone data (default); --no-cascade: leave them"
        ),
    )
    rollback.add_argument(
        "--replan",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="the next run plans the undone data afresh, with what arrived since, instead of "
        "replaying each undone batch as it was logged (where the plan can); --no-replan: "
        "replay (default)",
    )
    rollback.add_argument(
        "--exact",
        action=argparse.BooleanOptionalAction,
        default=False,
        help=(
            "refuse (exit 2, nothing changed) unless every hop replays its "
            "undone batches as logged; "
            "the plan says why one cannot"
        ),
    )
    rollback.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    _add_wait(rollback, WAIT_RUNNING)

    refresh = command(
        "refresh",
        "recompute a hop (and the hops below) with the code as it is now: a rollback "
        "to the start (or --from a time) and a run",
        _call,
    )
    refresh.add_argument(
        "--hop", required=True, help="the hop to recompute (the hops below follow)"
    )
    refresh.add_argument(
        "--from",
        dest="from_time",
        help="keep the batches committed by this time (ISO-8601, UTC); a hop whose state the "
        "change cannot follow has its state rebuilt there with the new code (default, or "
        "empty: from the start)",
    )
    refresh.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    refresh.add_argument("--quality", choices=QUALITY_MODES, default="gate", help=QUALITY_HELP)
    _add_wait(refresh, WAIT_RUNNING)


def _add_maintain(commands) -> None:
    """``maintain``."""
    maintain = _command(
        commands,
        "maintain",
        "compact small files, vacuum what no rollback in the window and no "
        "stream reading a table still needs, prune expired landing files and "
        "records",
        _call,
    )
    maintain.add_argument("--hop", default="all", help="one hop's tables, or all")
    maintain.add_argument(
        "--dry-run",
        action="store_true",
        help="say what it would do (from the logs, no JVM), change nothing",
    )
    _add_wait(maintain, WAIT_HOLDS)


def _add_checkpoint(commands) -> None:
    """``checkpoint validate``."""
    checkpoint = commands.add_parser("checkpoint", help="inspect and repair streaming checkpoints")
    actions = checkpoint.add_subparsers(dest="action", required=True)
    validate = actions.add_parser(
        "validate",
        help="find damaged or inconsistent checkpoint files and say how to fix them",
        description="Exit 0: consistent; 1: problems left (each with its fix).",
    )
    validate.add_argument("pipeline", help="pipeline name (a spec in $LAKEHOUSE_PIPELINES)")
    validate.add_argument("--hop", help="one hop (default: all)")
    validate.add_argument(
        "--repair", action="store_true", help="make the repairs that cannot lose or double data"
    )
    validate.add_argument("--json", action="store_true", help="print one JSON document")
    validate.set_defaults(handler=cmd_checkpoint_validate)


# The status of a command whose reader closed the pipe (``lakehouse status X | head -1``): what a
# shell shows for a process ended by SIGPIPE (128 + 13).
CLOSED_PIPE = 141


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def handled() -> int:
        code = args.handler(args)
        sys.stdout.flush()  # here, not at exit: a closed pipe is then this command's to end quietly
        return code

    try:
        return answered(handled)
    except BrokenPipeError:
        # Nothing more reaches the reader; point stdout at /dev/null so the interpreter's last
        # flush does not complain either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return CLOSED_PIPE


if __name__ == "__main__":
    sys.exit(main())
