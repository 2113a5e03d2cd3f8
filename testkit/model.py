"""A randomized model check of the whole pipeline: random sequences of landings, runs,
rollbacks, backfills and SIGKILLs against a plain-Python model of the landing files.

After every step each table (read by delta-rs, an independent Delta reader) must be a part of what
the landing files say: no row that no line justifies, none twice, every gold count at most its views
in silver and in the files. At settle points (at random, and at the end) the pipeline is brought up
to date the way a user would (``run``, then the backfills the model says are owed) and every table
must equal the landing files exactly, read by Spark and by delta-rs. An operation the platform must
refuse (a target beyond retention, a backfill whose stream lags, ``--no-cascade`` over read data)
exits 2 and must change no table and no checkpoint. Between steps, a ``switch`` (from a generator of
its own) changes bronze's source in the spec (landing files to a topic, a topic to landing files or
to a pattern): every run is then refused, changing nothing, naming ``lakehouse refresh``, until the
spec is put back.

The model owes a backfill where a stream cannot bring rows by design
(docs/concepts/run-and-backfill.md, "backfill and stream over the same days"): a range backfilled
at a hop is owed by the hops below it; after a rollback, the ranges its plan says to backfill again
(``rebackfill``: a hop's own backfills its RESTORE undid, and bronze's backfills for a hop that
starts over from bronze's snapshot) are owed by that hop and the hops below.

Event times all lie within one allowed lateness (the test spec sets an hour), in random order, so
no event is ever dropped as too late whatever the batch boundaries: late lines are within the
lateness. Beyond it, which events are dropped depends on batch boundaries (docs/limitations.md).

The Kafka variant (``kafka``: a broker, :class:`kafka_server.KafkaServer`) feeds bronze from
a topic: a landing produces the lines as records, the model reads the topic back with a plain
consumer, and a step may restart the broker between operations.

``python -m testkit.model --seed S --steps N [--kafka]`` runs one sequence; the benchmark suite's
soak and ``tests/spark/test_model.py`` call :func:`run_sequence`. The lake is a local folder or
an S3 URI (``tests/spark/test_s3_lake.py``): the model reads and writes it through fsspec, as the
platform's plain-file readers do.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import os
import random
import re
import sys
import time
from pathlib import Path

from spark_jobs.control.hop_state import HopState
from spark_jobs.logs.fs import filesystem
from testkit import model_window
from testkit.model_lake import (
    HOPS,
    SPAN_MS,
    T0,
    Lake,
    ModelMismatch,
    Sequence,
    Step,
    check_equal,
    check_part_of,
    stored,
    stored_by_delta_rs,
    write_spec,
)
from testkit.paths import environment_kept, killed_mid_run


def _tree(home: str) -> dict[str, tuple]:
    """Tables and checkpoints (each file's size and time or ETag), to show a refusal
    changed nothing.
    """
    fs = filesystem(home)
    found = {}
    for top in ("tables", "checkpoints"):
        for path, info in sorted(fs.find(f"{home}/{top}", detail=True).items()):
            found[path] = (info["size"], info.get("mtime") or info.get("ETag"))
    return found


def _iso(ms: int) -> str:
    return (
        dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
        .replace(tzinfo=None)
        .isoformat(timespec="milliseconds")
    )


class Runner:
    """Applies random operations to a lake and checks it against the model after each."""

    def __init__(
        self,
        spark,
        home: str,
        seed: int,
        kill_weight: float = 0.05,
        log=print,
        kafka=None,
        maintain: bool = False,
    ):
        self.spark = spark
        # ``maintain`` steps come between the drawn ones, from a generator of their own: a seed's
        # other steps stay the same with them or without.
        self.maintain_rng = random.Random(seed * 7919 + 1) if maintain else None
        # ``switch`` steps likewise, from a generator of their own (a seed's other steps stay the
        # same): bronze's source changes in the spec, every run is refused, and it changes back.
        self.switch_rng = random.Random(seed * 104729 + 2)
        self.switch_due = False
        self.clock_shift_ms = 0  # ``advance`` steps (with maintain) move the platform's clock on
        self.home = home
        self.fs = filesystem(home)
        self.rng = random.Random(seed)
        self.kafka = kafka
        self.lake = Lake(home, self.rng, kafka.connection().client_config() if kafka else None)
        self.sequence = Sequence(seed)
        self.kill_weight = kill_weight
        self.log = log
        self.owed: dict[str, list[tuple[int, int]]] = {hop: [] for hop in HOPS}
        # What the writing commands did, for the event log's check: (argv, exit code, stdout)
        # of each one that ran to its end, and how many were killed.
        self.calls: list[tuple[list[str], int, str]] = []
        self.kills = 0

    # -- running the CLI ------------------------------------------------------------------------

    def cli(self, argv: list[str]) -> tuple[int, str]:
        """``lakehouse ARGV`` in-process; returns the exit code and what it printed on stdout."""
        from spark_jobs.cli import main

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        if code not in (0, 2):
            raise ModelMismatch(
                f"lakehouse {' '.join(argv)} exited {code}: {err.getvalue()[-2000:]}"
            )
        self._last_error = err.getvalue().strip().splitlines()[-1:] if code else []
        if argv[0] in WRITERS:
            self.calls.append((list(argv), code, out.getvalue()))
        return code, out.getvalue()

    def _refusable(self, step: Step, argv: list[str]) -> tuple[int, str]:
        """Run an operation that may be refused; a refusal must change nothing."""
        before = _tree(self.home)
        code, out = self.cli(argv)
        if code == 2:
            after = _tree(self.home)
            if after != before:
                changed = sorted(set(after.items()) ^ set(before.items()))[:3]
                raise ModelMismatch(f"a refused {argv[0]} changed files: {changed}")
            step.outcome = "refused: " + (self._last_error[0][:160] if self._last_error else "")
            self.sequence.refusals[argv[0]] += 1
        return code, out

    # -- operations -----------------------------------------------------------------------------

    def op_land(self, step: Step) -> None:
        names = [self.lake.land() for _ in range(self.rng.randint(1, 3))]
        step.argv = names
        step.outcome = f"{len(names)} {'productions' if self.kafka else 'files'}"

    def op_restart(self, step: Step) -> None:
        """Stop the broker and start it again (same folder: same port, login and records)."""
        self.kafka.stop()
        self.kafka.start()
        step.argv, step.outcome = ["broker"], "restarted"

    def _run_argv(self, hop: str) -> list[str]:
        argv = ["run", "ad_events", "--hop", hop]
        if self.rng.random() < 0.5:
            argv += ["--max-files-per-trigger", str(self.rng.choice((1, 2)))]
        return argv

    def op_run(self, step: Step) -> None:
        hop = self.rng.choice(("all", "all") + HOPS)
        step.argv = self._run_argv(hop)
        idle = self._nothing_new(hop)
        code, out = self.cli([*step.argv, "--json"])
        if code:
            step.outcome = "refused: " + (self._last_error[0][:160] if self._last_error else "")
            return
        written = {
            record["hop"]: record["rows_out"] + record["rows_quarantined"]
            for record in json.loads(out)["hops"]
        }
        if idle and any(written.values()):
            raise ModelMismatch(
                f"the stream DAG's new-data check saw nothing new for {hop}, but "
                f"the run wrote {written}"
            )
        step.outcome = "ok" + (" (nothing new, as the check said)" if idle else "")

    def _nothing_new(self, hop: str) -> bool:
        """What the stream DAG's ``check_new_data`` (no JVM) says of running
        ``hop``: nothing to do.
        """
        from spark_jobs.control.status import pending_work
        from spark_jobs.model.lake import Lake as LakePaths
        from spark_jobs.model.spec import get_spec

        pending = pending_work(LakePaths.open(get_spec("ad_events")))
        return (
            all(reason is None for reason in pending.values())
            if hop == "all"
            else pending[hop] is None
        )

    def _batches(self, hop: str) -> list[int]:
        from spark_jobs.logs import checkpoint_log

        return checkpoint_log.commit_batch_ids(f"{self.home}/checkpoints/ad_events/{hop}")

    def _rollback_target(self, hop: str) -> list[str] | None:
        committed = self._batches(hop)
        if not committed:
            return None
        kind = self.rng.choice(("batch", "batch", "run", "time"))
        if kind == "run":
            records = sorted(self.fs.glob(f"{self.home}/_ops/runs/ad_events/*.{hop}.json"))
            runs = [json.loads(self.fs.cat_file(path)) for path in records]
            runs = [run for run in runs if run.get("batch_ids") and run.get("mode") == "run-once"]
            if runs:
                return ["--to-run", self.rng.choice(runs)["run_id"]]
        if kind == "time":
            commits = f"{self.home}/checkpoints/ad_events/{hop}/commits"
            stamps = [int(self.fs.modified(f"{commits}/{n}").timestamp() * 1000) for n in committed]
            moment = self.rng.randint(min(stamps) - 1000, max(stamps))
            return ["--to-time", _iso(moment)]
        return ["--to-batch", str(self.rng.choice([-1] + committed[:-1] or [-1]))]

    def op_rollback(self, step: Step) -> None:
        hop = self.rng.choice(HOPS)
        target = self._rollback_target(hop)
        if target is None:
            step.argv, step.outcome = [hop], "no batch yet"
            return
        step.argv = ["rollback", "ad_events", "--hop", hop, *target, "--json"]
        if self.rng.random() < 0.3:
            step.argv.append("--no-cascade")
        if self._not_taken(step):
            return
        inside = self._refused_inside(hop, target, "--no-cascade" not in step.argv)
        code, out = self._refusable(step, step.argv)
        if code == 0:
            self._note_resets(json.loads(out)["plan"])
            step.outcome = "ok"
        elif inside:
            raise ModelMismatch(f"a rollback inside the window was refused: {'; '.join(inside)}")

    def _not_taken(self, step: Step) -> bool:
        """Whether the drawn rollback is left out (a variant's rule; here none is)."""
        return False

    def _refused_inside(self, hop: str, target: list[str], cascade: bool) -> list[str]:
        """What the plan of a ``--to-batch`` rollback refuses inside the window
        (maintain runs only).
        """
        if not self.maintain_rng or target[0] != "--to-batch":
            return []
        from spark_jobs.control.rollback import planner
        from spark_jobs.control.rollback.plans import Request
        from spark_jobs.model.lake import Lake as LakePaths
        from spark_jobs.model.spec import get_spec

        plan = planner.plan(
            LakePaths.open(get_spec("ad_events")),
            Request(hop, to_batch=int(target[1]), cascade=cascade),
        )
        return model_window.refused_inside(self.home, plan, self._now_ms())

    def _note_resets(self, plan: dict) -> None:
        """Do what the plan tells a user to do after the next run: backfill again, at a hop and the
        hops below it, each range whose backfilled rows the rollback undid and the stream will
        not write again (a hop's own backfills its RESTORE undoes; bronze's backfills, for a
        hop that starts over from bronze's snapshot). The tables at the next settle say whether
        that was enough."""

        def span(start: str, end: str) -> tuple[int, int]:
            return tuple(
                int(dt.datetime.fromisoformat(t).replace(tzinfo=dt.UTC).timestamp() * 1000)
                for t in (start, end)
            )

        listed = [(each["hop"], span(each["start"], each["end"])) for each in plan["backfills"]]
        # the list covers each step's ranges at its hop and every hop below
        for hop_step in plan["hops"]:
            for start, end in (span(*pair) for pair in hop_step["rebackfill"]):
                for hop in HOPS[HOPS.index(hop_step["hop"]) :]:
                    assert any(
                        name == hop and first <= start and end <= last
                        for name, (first, last) in listed
                    ), plan
        for hop, owed in listed:
            self.owed[hop].append(owed)

    def _backfill_argv(self, hop: str) -> list[str]:
        start = T0 - 60_000 + self.rng.randrange(SPAN_MS + 60_000)
        end = start + self.rng.choice((1, 10, 60, 600, 3600)) * 1000 + self.rng.randrange(5000)
        return ["backfill", "ad_events", "--hop", hop, "--start", _iso(start), "--end", _iso(end)]

    def op_backfill(self, step: Step) -> None:
        hop = self.rng.choice(("all", "all") + HOPS)
        step.argv = self._backfill_argv(hop)
        code, _out = self._refusable(step, step.argv)
        if code == 0:
            self._note_backfill(step.argv)
            step.outcome = "ok"

    def _note_backfill(self, argv: list[str]) -> None:
        hop = argv[argv.index("--hop") + 1]
        span = (argv[argv.index("--start") + 1], argv[argv.index("--end") + 1])
        start, end = (
            int(dt.datetime.fromisoformat(t).replace(tzinfo=dt.UTC).timestamp() * 1000)
            for t in span
        )
        done = HOPS if hop == "all" else (hop,)
        for name in done:  # this hop's own debt over the range is paid
            self.owed[name] = [r for r in self.owed[name] if not (start <= r[0] and r[1] <= end)]
        if hop != "all":
            for name in HOPS[HOPS.index(hop) + 1 :]:
                self.owed[name].append((start, end))

    def op_kill(self, step: Step) -> None:
        """SIGKILL a job at a random moment, then run the same command again to completion."""
        kind = self.rng.choice(("run", "run", "backfill", "rollback"))
        if kind == "run":
            argv = self._run_argv("all")
        elif kind == "backfill":
            argv = self._backfill_argv(self.rng.choice(("all",) + HOPS))
        else:
            hop = self.rng.choice(HOPS)
            target = self._rollback_target(hop)
            if target is None:
                step.argv, step.outcome = ["rollback", hop], "no batch yet"
                return
            argv = ["rollback", "ad_events", "--hop", hop, *target, "--json"]
        step.argv = argv
        delay = self.rng.uniform(3, 25)
        # the job and its JVM, by their process group
        killed, returncode, out = killed_mid_run(argv, delay)
        if killed:
            self.kills += 1
        else:
            self.calls.append((list(argv), returncode, out))
        if not killed and returncode not in (0, 2):
            raise ModelMismatch(f"lakehouse {' '.join(argv)} exited {returncode} before the kill")
        # a killed job's lease lives on until it expires: wait for it, as a user would
        if "://" in self.home:
            argv = [*argv, "--wait", "120"]
        # again, to completion: finishes a crashed rollback, replays a run
        code, out2 = self.cli(argv)
        if code == 0 and kind == "backfill":
            self._note_backfill(argv)
        if code == 0 and kind == "rollback":
            self._note_resets(json.loads(out2)["plan"])
            if not killed and returncode == 0:
                self._note_resets(json.loads(out)["plan"])
        step.outcome = (
            f"{'killed after %.1f s' % delay if killed else 'ended before the kill'}, "
            f"rerun exit {code}"
        )

    def _horizons(self) -> dict[str, int | None]:
        from spark_jobs.control.rollback import lineage
        from spark_jobs.model.lake import Lake as LakePaths
        from spark_jobs.model.spec import get_spec

        lake = LakePaths.open(get_spec("ad_events"))
        return {hop: lineage.horizon(HopState(lake, lake.spec.hop(hop))) for hop in HOPS}

    def _now_ms(self) -> int:
        return int(time.time() * 1000) + self.clock_shift_ms

    def op_advance(self, step: Step) -> None:
        """Move the platform's clock on (``$LAKEHOUSE_CLOCK_SHIFT``): batches age
        out of the window.
        """
        self.clock_shift_ms += self.maintain_rng.choice((2, 5, 10, 20)) * 60_000
        os.environ["LAKEHOUSE_CLOCK_SHIFT"] = f"{self.clock_shift_ms // 1000} seconds"
        step.argv, step.outcome = [os.environ["LAKEHOUSE_CLOCK_SHIFT"]], "clock moved on"

    def op_maintain(self, step: Step) -> None:
        """Compact, vacuum and archive expired landing files (all hops or one): no table's rows
        change (the check after every step; the model reads the archive too)
        and no hop's rollback reaches less far than the declared window's start
        (:func:`testkit.model_window.cut_too_far`)."""
        step.argv = ["maintain", "ad_events", "--hop", self.maintain_rng.choice(("all",) + HOPS)]
        before = self._horizons()
        code, out = self.cli([*step.argv, "--json"])
        if code:
            raise ModelMismatch(f"maintain was refused: {self._last_error}")
        cut = model_window.cut_too_far(self.home, before, self._horizons(), self._now_ms())
        if cut:
            raise ModelMismatch(f"maintain cut a rollback window: {'; '.join(cut)}")
        totals = json.loads(out)["totals"]
        step.outcome = (
            f"files {totals['files_before']} -> {totals['files_after']}, "
            f"{totals['files_vacuumed']} vacuumed, {totals['log_files_deleted']} log files "
            f"deleted, {totals['landing_pruned']} landing files archived"
        )

    def op_switch(self, step: Step) -> None:
        """Switch bronze's source in the spec (landing files to a topic; with Kafka, the topic to
        landing files or to a pattern that matches it): a code change, so a run is refused,
        changing nothing, and names the refresh that starts bronze over; the status still reads.
        A switch drawn before bronze's first batch waits for it (before, nothing would refuse).
        Then the spec as it was: the next steps go on as if nothing had happened."""
        import yaml

        from testkit.model_lake import TOPIC

        spec_file = Path(os.environ["LAKEHOUSE_PIPELINES"]) / "ad_events" / "ad_events.yaml"
        original = spec_file.read_text()
        spec = yaml.safe_load(original)
        bronze = spec["hops"][0]
        if not self.kafka:
            bronze["topic"] = TOPIC
        elif self.switch_rng.random() < 0.5:
            bronze["topic_pattern"] = re.escape(TOPIC) + "$"
            del bronze["topic"]
        else:
            for key in ("topic", "max_offsets_per_trigger"):
                bronze.pop(key, None)
        step.argv = [
            "bronze reads "
            + (
                "a pattern"
                if "topic_pattern" in bronze
                else "a topic"
                if "topic" in bronze
                else "landing files"
            )
        ]
        spec_file.write_text(yaml.safe_dump(spec))
        try:
            argv = ["run", "ad_events"] + (
                ["--hop", "bronze"] if self.switch_rng.random() < 0.5 else []
            )
            code, _out = self._refusable(step, argv)
            if code != 2 or "lakehouse refresh ad_events --hop bronze" not in " ".join(
                self._last_error
            ):
                raise ModelMismatch(
                    f"a run after bronze's source switched ({step.argv[0]}) was not refused naming "
                    f"the refresh: exit {code}, {self._last_error}"
                )
            # The status reads on (with a broker to ask: without one, a topic's hop
            # is a usage error).
            status, _ = self.cli(["status", "ad_events", "--json"]) if self.kafka else (0, "")
            if status != 0:
                raise ModelMismatch(
                    f"status failed after bronze's source switched: {self._last_error}"
                )
        finally:
            spec_file.write_text(original)

    def op_settle(self, step: Step) -> None:
        """Bring every hop up to date as a user would, then every table must equal the files."""
        commands = [["run", "ad_events"]]
        for hop in HOPS[1:]:
            for start, end in sorted(set(self.owed[hop])):
                commands.append(
                    [
                        "backfill",
                        "ad_events",
                        "--hop",
                        hop,
                        "--start",
                        _iso(start),
                        "--end",
                        _iso(end),
                    ]
                )
        for argv in commands:
            code, _out = self.cli(argv)
            if code:
                raise ModelMismatch(
                    f"settling: lakehouse {' '.join(argv)} was refused: {self._last_error}"
                )
        self.owed = {hop: [] for hop in HOPS}
        step.argv = [f"{len(commands)} commands"]
        expected = self.lake.expected()
        check_equal(stored(self.spark, self.home), expected)  # Spark, as the hops below read them
        check_equal(stored_by_delta_rs(self.home), expected)  # and an independent reader
        self.sequence.settles += 1
        step.outcome = "equal to the landing files"

    # -- the loop -------------------------------------------------------------------------------

    def step(self, number: int, operation: str | None = None) -> None:
        weights = {
            "land": 0.22,
            "run": 0.25,
            "rollback": 0.2,
            "backfill": 0.13,
            "kill": self.kill_weight,
            "settle": 0.1,
            "restart": 0.05 if self.kafka else 0.0,
        }
        operation = operation or self.rng.choices(list(weights), list(weights.values()))[0]
        step = Step(number, operation, [])
        self.sequence.steps.append(step)
        began = time.time()
        getattr(self, f"op_{operation}")(step)
        if operation != "settle":
            # delta-rs between settles: milliseconds a check where Spark takes about a second
            check_part_of(stored_by_delta_rs(self.home), self.lake.expected())
        step.seconds = time.time() - began
        self.sequence.counts[operation] += 1
        self.log(str(step))
        if (
            operation not in ("maintain", "advance", "switch")
            and self.maintain_rng
            and self.maintain_rng.random() < 0.3
        ):
            self.step(number, self.maintain_rng.choice(("maintain", "maintain", "advance")))
        if operation != "switch" and (self.switch_due or self.switch_rng.random() < 0.08):
            self.switch_due = not self._batches("bronze")  # a switch waits for bronze's first batch
            if not self.switch_due:
                self.step(number, "switch")


# The commands that write records (and so events).
WRITERS = ("run", "backfill", "rollback", "refresh", "maintain")


def check_event_log(runner: Runner) -> None:
    """The event log against what the sequence's commands did: each event once, numbered 1..n; a
    ``run_finished`` with the rows each finished run reported, a start and an end for each
    rollback that went ahead, a ``refused`` for each refusal (a killed command may have left one
    more)."""
    from spark_jobs.logs.event_log import read
    from spark_jobs.model.lake import Lake as LakePaths
    from spark_jobs.model.spec import get_spec
    from spark_jobs.service import sync_events

    lake = LakePaths.open(get_spec("ad_events"))
    sync_events(lake)  # what a killed command left unsynced
    logged = read(lake.events)
    ids = [event["event_id"] for event in logged]
    if len(ids) != len(set(ids)):
        twice = sorted({key for key in ids if ids.count(key) > 1})[:3]
        raise ModelMismatch(f"the event log holds events twice: {twice}")
    if sorted(event["sequence"] for event in logged) != list(range(1, len(logged) + 1)):
        raise ModelMismatch("the event log's sequence numbers are not 1..n")
    by_id = {event["event_id"]: event for event in logged}
    for argv, code, out in runner.calls:
        if code == 0 and "--json" in argv:
            _check_logged_call(argv[0], json.loads(out), by_id)
    refused = sum(code == 2 for _argv, code, _out in runner.calls)
    logged_refusals = sum(event["event_type"] == "refused" for event in logged)
    if not refused <= logged_refusals <= refused + runner.kills:
        raise ModelMismatch(
            f"{logged_refusals} refusals logged, {refused} seen ({runner.kills} commands killed)"
        )


def _check_logged_call(command: str, document: dict, by_id: dict[str, dict]) -> None:
    """A finished run's rows, an executed rollback's start and end, as the event log holds them."""
    if command == "run":
        for record in document["hops"]:
            event = by_id.get(f"ad_events/run/{document['run_id']}/{record['hop']}/finished")
            told = event and (event["details"]["rows_out"], event["details"]["rows_in"])
            if told != (record["rows_out"], record["rows_in"]):
                raise ModelMismatch(f"run {document['run_id']} {record['hop']}: logged {told}")
    elif command == "rollback" and document.get("executed"):
        key = f"ad_events/rollback/{document['plan']['rollback_id']}"
        if f"{key}/started" not in by_id or f"{key}/finished" not in by_id:
            raise ModelMismatch(f"rollback {key} is not in the event log")


def run_sequence(
    spark,
    home: str,
    seed: int,
    steps: int,
    kill_weight: float = 0.05,
    log=print,
    operations: list[str] | None = None,
    kafka=None,
    maintain: bool = False,
) -> Sequence:
    """Land a first file, then ``steps`` random operations, then settle; raise with the
    transcript on a mismatch.

    The caller points ``LAKEHOUSE_HOME`` at ``home`` and ``LAKEHOUSE_PIPELINES`` at
    :func:`write_spec`'s folder (with ``kafka``, a started broker: its ``write_spec(kafka=True)``,
    the ``LAKEHOUSE_KAFKA_*`` settings, and :data:`~testkit.model_lake.TOPIC` created).
    ``operations``, when given, names each step's operation instead of drawing it (targets, ranges
    and moments are still drawn).
    """
    runner = Runner(spark, home, seed, kill_weight, log, kafka, maintain)
    with environment_kept("LAKEHOUSE_CLOCK_SHIFT"):  # ``advance`` steps set it
        return _steps(runner, seed, steps, operations, kafka, maintain)


def _steps(runner: Runner, seed: int, steps: int, operations, kafka, maintain: bool) -> Sequence:
    number = 0
    try:
        runner.step(number, "land")
        for number in range(1, steps + 1):
            runner.step(number, operations[number - 1] if operations else None)
        runner.step(steps + 1, "settle")
        check_event_log(runner)
    except Exception as error:
        raise ModelMismatch(
            f"{error}\n{runner.sequence.transcript()}\nreplay: python -m testkit.model --seed "
            f"{seed} --steps "
            f"{steps}{' --kafka' if kafka else ''}{' --maintain' if maintain else ''}"
        ) from error
    return runner.sequence


@contextlib.contextmanager
def started_broker(folder: Path):
    """A broker for the Kafka variant: started, its settings in the environment, the model's topic
    created; stopped by PID after, and the environment as it was."""
    from testkit.model_lake import TOPIC
    from testkit.paths import ROOT

    sys.path.insert(0, str(ROOT / "include" / "scripts"))
    from kafka_server import KafkaServer

    server = KafkaServer(folder)
    server.start()
    try:
        with environment_kept(*server.env()):
            os.environ.update(server.env())
            server.create_topic(TOPIC, 2)
            yield server
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(
        description="Run one random model sequence against a fresh lake."
    )
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--kill-weight", type=float, default=0.05)
    parser.add_argument(
        "--kafka", action="store_true", help="bronze reads a topic on a broker started here"
    )
    parser.add_argument(
        "--maintain", action="store_true", help="some steps compact and vacuum (lakehouse maintain)"
    )
    args = parser.parse_args(argv)
    from spark_jobs.engine.session import build_session

    work = Path(tempfile.mkdtemp(prefix="model-"))
    os.environ["LAKEHOUSE_HOME"] = str(work / "lake")
    os.environ["LAKEHOUSE_PIPELINES"] = str(write_spec(work / "pipelines", kafka=args.kafka))
    os.environ["LAKEHOUSE_QUALITY"] = str(work / "no-suites")
    with contextlib.ExitStack() as stack:
        kafka = stack.enter_context(started_broker(work / "kafka")) if args.kafka else None
        spark = build_session("lakehouse-model", 4)
        sequence = run_sequence(
            spark,
            str(work / "lake"),
            args.seed,
            args.steps,
            args.kill_weight,
            kafka=kafka,
            maintain=args.maintain,
        )
    print(
        f"seed {args.seed}: {dict(sequence.counts)}, refusals {dict(sequence.refusals)}, "
        f"settles {sequence.settles}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())


# Failed sequences too long for make test's budget: the benchmark suite's soak runs them first
# (each also has a short test of its own, named here).
SOAK_REGRESSIONS = [
    # rollback --to-run of a run under an earlier query id read batch files a later rollback removed
    (2, 24),
    # (test_rollback: test_to_run_of_a_run_whose_batch_ids_a_replay_used_again) gold rolled back
    # past backfills it had received lost them (test_rollback: ..._undoes_backfills_...)
    (1003, 50),
    # gold's recount read silver's latest, past the batch's end (test_rollback:
    # ..._counts_only_what_silver_keeps)
    (1005, 50),
    # a silver --to-run target beyond retention crashed the planner (test_rollback:
    # test_refusals_...)
    (1008, 50),
    # a rollback after a hop started over restored past the emptying (test_rollback:
    # ..._started_over_...)
    (1004, 50),
    # with log clean-up: a restore onto a version holding undone batches' rows; then the
    # checkpoint's txn
    (11, 60),
    # counted batches an emptying had undone (test_maintenance: ..._went_with_the_log_...,
    # ..._emptied_...)
]
