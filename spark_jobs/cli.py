"""The ``lakehouse`` command (DESIGN.md section 4): generate, run, backfill, status.

Errors a user can fix print one line and exit 2 (1 for a failed run); ``--json`` prints one
JSON document on stdout, progress goes to stderr.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from contextlib import contextmanager

from spark_jobs.errors import LakehouseError, RunFailed, UsageError
from spark_jobs.lake import Lake
from spark_jobs.records import new_run_id
from spark_jobs.spec import get_spec


def parse_time(text: str, flag: str) -> int:
    """ISO-8601 date or datetime (UTC when it has no offset) as epoch milliseconds."""
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{flag} {text!r} is not an ISO-8601 date or time: use e.g. 2026-01-31 or 2026-01-31T12:00:00")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def _emit(args, document: dict, text: str) -> None:
    print(json.dumps(document, indent=2, default=str) if args.json else text)


def _run_id(args) -> str:
    """The ``--run-id`` given (checked: it names files) or a new one."""
    if args.run_id is None:
        return new_run_id()
    if not re.fullmatch(r"[A-Za-z0-9_.:+-]{1,200}", args.run_id) or args.run_id.startswith("."):
        raise UsageError(f"--run-id {args.run_id!r} has characters other than letters, digits and _.:+-")
    return args.run_id


def _lake(args) -> Lake:
    return Lake.open(get_spec(args.pipeline))


@contextmanager
def _writer(lake: Lake, action: str, run_id: str, wait_s: float, ready=None):
    """Hold the pipeline's lock, refusing while a rollback is unfinished."""
    from spark_jobs.lock import pipeline_lock
    from spark_jobs.rollback import refuse_if_pending

    progress = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    with pipeline_lock(lake, action, run_id, wait_s, ready, progress):
        refuse_if_pending(lake)
        yield


def cmd_generate(args) -> int:
    from spark_jobs.generator import as_dict, generate

    if args.events < 0 or args.files < 1:
        raise UsageError("--events must be >= 0 and --files >= 1")
    for flag, value in (("--bad-fraction", args.bad_fraction), ("--late-fraction", args.late_fraction)):
        if not 0 <= value <= 1:
            raise UsageError(f"{flag} {value} is outside 0..1")
    start = parse_time(args.start, "--start") if args.start else None
    lake = _lake(args)
    result = generate(lake, args.events, args.files, args.seed, start, args.bad_fraction, args.late_fraction)
    _emit(args, as_dict(result), f"wrote {result.events} lines ({result.bad_lines} invalid, {result.late_events} late) "
          f"in {len(result.files)} files to {lake.landing}")
    return 0


def _summary_line(record) -> str:
    return (f"{record.hop:<7} {record.status:<10} batches {record.batch_ids or '-'}  rows in {record.rows_in:,}  "
            f"out {record.rows_out:,}  quarantined {record.rows_quarantined:,}  late dropped {record.rows_dropped_late:,}  "
            f"{record.duration_s} s")


def _runs_document(run_id: str, records) -> dict:
    return {"run_id": run_id, "hops": [record.to_dict() for record in records]}


class QualityGateFailed(RunFailed):
    """A ``fail`` rule of a hop's quality suite failed on the run's increment."""


def _gate(spark, lake: Lake, hop, record, mode: str) -> dict | None:
    """Check the hop's suite on what the run wrote (unless ``--quality off``) and record it."""
    if mode == "off" or record.status not in ("succeeded", "skipped"):
        return None
    from spark_jobs import quality
    from spark_jobs.records import write_record

    summary = quality.check(spark, lake, hop, record.to_dict())
    if summary is None:
        return None
    record.quality = {key: summary.get(key) for key in ("gate", "failed", "warned", "rows", "seconds", "data_docs")}
    write_record(lake, record)
    print(quality.format_summary(summary), file=sys.stderr, flush=True)
    return summary


def _refuse_failed_gate(lake: Lake, hop, run_id: str, summary: dict) -> None:
    from spark_jobs.quality import suite_path

    below = [other.name for other in lake.spec.hops if other.upstream == hop.name]
    raise QualityGateFailed(
        f"quality gate of {hop.name} failed ({', '.join(summary['failed'])})"
        + (f"; {', '.join(below)} did not run. " if below else ". ") +
        f"Undo this run: `lakehouse rollback {lake.spec.name} --hop {hop.name} --to-run {run_id}`, then fix the "
        f"transform or the rule's policy in {suite_path(lake.spec, hop)}")


def _hops_gated(spark, lake: Lake, hops, mode: str, run_hop) -> tuple[list, tuple | None]:
    """Run each hop (``run_hop(hop)`` gives its record) then its gate; stop below a failed gate
    in ``gate`` mode. Returns the records and the (hop, summary) of the failed gate, if any."""
    records = []
    for hop in hops:
        records.append(run_hop(hop))
        summary = _gate(spark, lake, hop, records[-1], mode)
        if summary and summary["gate"] == "failed" and mode == "gate":
            return records, (hop, summary)
    return records, None


def cmd_run(args) -> int:
    from spark_jobs.runner import HopRun, run_continuous
    from spark_jobs.session import build_session

    lake = _lake(args)
    hops = lake.spec.select_hops(args.hop)
    run_id = _run_id(args)
    if args.max_files_per_trigger is not None and args.max_files_per_trigger < 1:
        raise UsageError("--max-files-per-trigger must be >= 1")
    with _writer(lake, "run", run_id, args.wait):
        spark = build_session(f"lakehouse-{lake.spec.name}-run", lake.spec.shuffle_partitions)
        failed_gate = None
        if args.continuous:
            records = run_continuous(spark, lake, hops, run_id, args.trigger_interval)
        else:
            records, failed_gate = _hops_gated(
                spark, lake, hops, args.quality,
                lambda hop: HopRun(spark, lake, hop, run_id, "run-once").run_once(args.max_files_per_trigger))
    _emit(args, _runs_document(run_id, records), f"run {run_id}\n" + "\n".join(map(_summary_line, records)))
    if failed_gate:
        _refuse_failed_gate(lake, failed_gate[0], run_id, failed_gate[1])
    return 0


def cmd_backfill(args) -> int:
    from spark_jobs.runner import HopRun
    from spark_jobs.session import build_session

    lake = _lake(args)
    hops = lake.spec.select_hops(args.hop)
    start, end = parse_time(args.start, "--start"), parse_time(args.end, "--end")
    if start >= end:
        raise UsageError(f"--start {args.start} is not before --end {args.end}: the range is [start, end)")
    run_id = _run_id(args)

    def streams_caught_up() -> str | None:
        from spark_jobs.status import stream_lag

        lagging = {hop.name: lag for hop in hops if (lag := stream_lag(lake, hop))}
        if not lagging:
            return None
        runs = "; ".join(f"`lakehouse run {lake.spec.name} --hop {name}`" for name in lagging)
        return "; ".join(lagging.values()) + f" (the stream's next run reads them: {runs})"

    with _writer(lake, "backfill", run_id, args.wait, streams_caught_up):
        spark = build_session(f"lakehouse-{lake.spec.name}-backfill", lake.spec.shuffle_partitions)
        records, failed_gate = _hops_gated(
            spark, lake, hops, args.quality, lambda hop: HopRun(spark, lake, hop, run_id, "backfill").backfill(start, end))
    _emit(args, _runs_document(run_id, records), f"backfill {run_id}\n" + "\n".join(map(_summary_line, records)))
    if failed_gate:
        _refuse_failed_gate(lake, failed_gate[0], run_id, failed_gate[1])
    return 0


def cmd_status(args) -> int:
    from spark_jobs.status import format_status, pipeline_status

    lake = _lake(args)
    if args.hop and args.hop != "all":
        lake.spec.hop(args.hop)
    status = pipeline_status(lake, args.hop)
    _emit(args, status, format_status(status))
    return 0


def _same_request(journal: dict, request: dict) -> bool:
    keys = ("hop", "to_batch", "to_run", "to_time", "cascade")
    return all(journal["plan"]["request"].get(key) == request.get(key) for key in keys)


def cmd_rollback(args) -> int:
    from spark_jobs import rollback
    from spark_jobs.lock import pipeline_lock

    lake = _lake(args)
    lake.spec.hop(args.hop)
    to_time = parse_time(args.to_time, "--to-time") if args.to_time else None
    request = {"hop": args.hop, "to_batch": args.to_batch, "to_run": args.to_run, "to_time": to_time,
               "cascade": args.cascade}

    def make_plan() -> dict:
        return rollback.plan(lake, args.hop, args.to_batch, args.to_run, to_time, args.cascade, args.to_time)

    journal = rollback.pending(lake)
    if journal and not _same_request(journal, request):
        rollback.refuse_if_pending(lake)
    if args.dry_run:
        plan = journal["plan"] if journal else make_plan()
        _emit(args, {"plan": plan, "executed": False}, rollback.format_plan(plan) + "\ndry run: nothing changed")
        return 2 if plan["refused"] else 0

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    with pipeline_lock(lake, "rollback", wait_s=args.wait):
        journal = rollback.pending(lake)
        if journal and _same_request(journal, request):
            plan = journal["plan"]
            progress(f"[rollback] finishing {plan['rollback_id']} ({len(journal['done'])} steps were done)")
        else:
            journal, plan = None, make_plan()
        if plan["refused"]:
            _emit(args, {"plan": plan, "executed": False}, rollback.format_plan(plan))
            raise rollback.RollbackRefused(f"rollback refused, nothing changed: {'; '.join(plan['refused'])}")
        if plan["nothing_to_do"]:
            _emit(args, {"plan": plan, "executed": False}, rollback.format_plan(plan))
            return 0
        progress(rollback.format_plan(plan))
        from spark_jobs.session import build_session

        def spark():
            return build_session(f"lakehouse-{lake.spec.name}-rollback", lake.spec.shuffle_partitions)

        done = rollback.execute(spark, lake, plan, journal, progress)
    _emit(args, {"plan": plan, "executed": True, "journal": done},
          rollback.format_plan(plan) + f"\nrolled back in {done['duration_s']} s; audit record in {lake.rollbacks}; "
          "the next run replays from the batch after each target")
    return 0


def cmd_quality(args) -> int:
    from spark_jobs import quality
    from spark_jobs.records import read_records
    from spark_jobs.session import build_session

    lake = _lake(args)
    hop = lake.spec.hop(args.hop)
    if quality.load_suite(lake.spec, hop) is None:
        raise UsageError(f"hop {hop.name} has no quality suite: add {quality.suite_path(lake.spec, hop)}")
    runs = [r for r in read_records(lake, hop.name) if r.get("status") == "succeeded" and r.get("mode") != "continuous"]
    if args.run:
        runs = [r for r in runs if r["run_id"] == args.run]
        if not runs:
            raise UsageError(f"no succeeded run {args.run!r} of {hop.name}: see `lakehouse status {lake.spec.name}`")
    elif not runs:
        raise UsageError(f"{hop.name} has no succeeded run to check yet: `lakehouse run {lake.spec.name}` first")
    spark = build_session(f"lakehouse-{lake.spec.name}-quality", lake.spec.shuffle_partitions)
    summary = quality.check(spark, lake, hop, runs[-1])
    _emit(args, summary, quality.format_summary(summary))
    return 1 if summary["gate"] == "failed" else 0


def cmd_checkpoint_validate(args) -> int:
    from spark_jobs.validate import format_findings, validate

    lake = _lake(args)
    if args.hop and args.hop != "all":
        lake.spec.hop(args.hop)
    if args.repair:
        from spark_jobs.lock import pipeline_lock

        with pipeline_lock(lake, "checkpoint repair"):
            findings = validate(lake, args.hop, do_repair=True)
    else:
        findings = validate(lake, args.hop)
    left = [finding for finding in findings if not finding.repaired]
    _emit(args, {"pipeline": lake.spec.name, "consistent": not left, "findings": [f.to_dict() for f in findings]},
          format_findings(findings, lake.spec.name))
    return 1 if left else 0


QUALITY_MODES = ("gate", "report", "off")
QUALITY_HELP = ("after each hop, check its quality suite on the rows the run wrote: gate (default) stops at a "
                "failed gate and exits 1; report records the result and goes on; off skips the check")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakehouse", description="Run lakehouse pipelines: run-once streams, backfills, status."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str, handler) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("pipeline", help="pipeline name (a spec in include/pipelines)")
        sub.add_argument("--json", action="store_true", help="print one JSON document")
        sub.set_defaults(handler=handler)
        return sub

    generate = command("generate", "write sample events to the landing folder", cmd_generate)
    generate.add_argument("--events", type=int, required=True)
    generate.add_argument("--files", type=int, default=1)
    generate.add_argument("--seed", type=int)
    generate.add_argument("--start", help="first event time, ISO-8601 (default: now)")
    generate.add_argument("--bad-fraction", type=float, default=0.0)
    generate.add_argument("--late-fraction", type=float, default=0.0)

    run = command("run", "process new data: run-once (availableNow), or always-on with --continuous", cmd_run)
    run.add_argument("--hop", default="all")
    run.add_argument("--max-files-per-trigger", type=int)
    run.add_argument("--continuous", action="store_true")
    run.add_argument("--trigger-interval", default="10 seconds")
    run.add_argument("--run-id", help="id for the run records (default: generated)")
    run.add_argument("--wait", type=float, default=0.0, help="seconds to wait while another job holds the pipeline")
    run.add_argument("--quality", choices=QUALITY_MODES, default="gate", help=QUALITY_HELP)

    backfill = command("backfill", "recompute [start, end) in batch mode with the same transforms", cmd_backfill)
    backfill.add_argument("--start", required=True)
    backfill.add_argument("--end", required=True)
    backfill.add_argument("--hop", default="all")
    backfill.add_argument("--run-id")
    backfill.add_argument("--wait", type=float, default=0.0, help="seconds to wait while another job holds the pipeline")
    backfill.add_argument("--quality", choices=QUALITY_MODES, default="gate", help=QUALITY_HELP)

    checked = command("quality", "check a hop's quality suite on the rows one run wrote", cmd_quality)
    checked.add_argument("--hop", required=True)
    checked.add_argument("--run", help="run id (default: the hop's last succeeded run)")

    status = command("status", "batches, runs and table versions, read without a JVM", cmd_status)
    status.add_argument("--hop")

    rollback = command("rollback", "undo batches of a hop (and the hops below) so the next run replays them",
                       cmd_rollback)
    rollback.add_argument("--hop", required=True)
    target = rollback.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-batch", type=int, help="the last batch to keep (-1: none)")
    target.add_argument("--to-run", help="undo this run and everything after it")
    target.add_argument("--to-time", help="keep the batches committed by this time (ISO-8601, UTC)")
    rollback.add_argument("--cascade", action=argparse.BooleanOptionalAction, default=True,
                          help="also undo the hops below that read the undone data (default); --no-cascade: leave them")
    rollback.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    rollback.add_argument("--wait", type=float, default=0.0, help="seconds to wait for a running job to end")

    checkpoint = commands.add_parser("checkpoint", help="inspect and repair streaming checkpoints")
    actions = checkpoint.add_subparsers(dest="action", required=True)
    validate = actions.add_parser("validate", help="find damaged or inconsistent checkpoint files and say how to fix them",
                                  description="Exit 0: consistent; 1: problems left (each with its fix).")
    validate.add_argument("pipeline")
    validate.add_argument("--hop")
    validate.add_argument("--repair", action="store_true", help="make the repairs that cannot lose or double data")
    validate.add_argument("--json", action="store_true", help="print one JSON document")
    validate.set_defaults(handler=cmd_checkpoint_validate)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except LakehouseError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code


if __name__ == "__main__":
    sys.exit(main())
