"""The randomized model check with events beyond the allowed lateness (:mod:`testkit.model`'s
variant): random landings, runs, rollbacks and SIGKILLs, and after every rollback's replay each
table equals a twin lake that never rolled back, late drops included.

Gold (ad_events' windowed count under a one-minute watermark) drops a view that is later than
the watermark its batch's predecessors left, so which views it keeps depends on how the stream
cut its batches: no plain-Python model of the files alone says it. A second lake, the twin, is
given the same landings (the same files, written in the same order) and the same runs (the same
hops and ``--max-files-per-trigger``), but none of the rollbacks and none of the kills. A
rollback's replay must re-execute the undone batches exactly as they were logged (their source
offsets, watermark and timestamp) and only then plan what arrived since, so that at every settle
(both lakes brought up to date by ``run``) each table of the lake equals the twin's, row for row,
read by delta-rs. Bronze and silver (no watermark) must also equal the files, and gold must be
at most silver's views; the settle says how many views the twin's gold dropped as late, so a
sequence that never dropped one shows.

A rollback draws a target that keeps a batch (``--to-batch`` 0 or later, a run or a moment after
the first batch). Its dry run's plan says whether it replays exactly; one that would plan afresh
(the cases docs/limitations.md lists, such as a batch that read part of an upstream version) is
not taken, and counted (``refusals["afresh"]``); one that is taken must then say ``exact`` for
every hop it undoes batches of. (A rollback to nothing starts the hop over, planned afresh:
:mod:`testkit.model` covers it.) No backfill: a backfill writes late rows the stream drops, and
:mod:`testkit.model` covers backfills within the lateness.

``python -m testkit.model_late --seed S --steps N`` runs one sequence; the soak and
``tests/spark/test_model_late.py`` call :func:`run_sequence`.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path

from spark_jobs.logs.fs import write_text
from testkit.model import Runner
from testkit.model_lake import (
    ADS,
    BAD_LINES,
    HOPS,
    T0,
    Lake,
    ModelMismatch,
    Sequence,
    Step,
    stored_by_delta_rs,
)
from testkit.paths import environment_kept

# Each landing's events follow the one before by STEP_MS, spread over SPREAD_MS; LATE_SHARE of them
# are LATE_MS older, beyond the allowed lateness (LATENESS) of gold's watermark.
STEP_MS, SPREAD_MS, LATE_MS = 90_000, 60_000, 5 * 60_000
LATE_SHARE = 0.15
LATENESS = "1 minute"
SPEC_CHANGES = {
    "allowed_lateness": LATENESS,
    "min_batches_to_retain": 20,
    "source_log_compact_interval": 3,
}


def write_spec(folder: Path) -> Path:
    """The test's copy of the ad_events spec: a one-minute watermark, 20 batches retained."""
    from testkit.lakes import spec_copy

    return spec_copy(folder, **SPEC_CHANGES)


def not_exact(plan: dict) -> list[str]:
    """Why a rollback's plan (its --json ``plan``) does not replay exactly: per hop that undoes
    batches afresh or drops an earlier rollback's kept replay; empty when every hop is exact."""
    return [
        f"{each['hop']}: "
        + (
            f"drops the kept replay of {each['dropped_replay']}"
            if each.get("dropped_replay")
            else each.get("afresh_because") or f"re-reads {each.get('reread')}"
        )
        for each in plan["hops"]
        if each.get("undone") and each.get("replay") != "exact" or each.get("dropped_replay")
    ]


class LateLake(Lake):
    """Landing files whose events move on in time, some of them beyond the allowed lateness,
    each written to the lake's landing folder and to the twin's."""

    def __init__(self, home: str, twin: str, rng: random.Random):
        super().__init__(home, rng)
        self.twin = Lake(twin, random.Random(0))
        self.stamp_ms = 0

    def land(self) -> str:
        base = T0 + self.files * STEP_MS
        lines = []
        for _ in range(self.rng.randint(20, 60)):
            if self.rng.random() < 0.04:
                lines.append(self.rng.choice(BAD_LINES))
                continue
            moment = (
                base
                + self.rng.randrange(SPREAD_MS)
                - (LATE_MS if self.rng.random() < LATE_SHARE else 0)
            )
            lines.append(
                json.dumps(
                    {
                        "user_id": f"u{self.rng.randrange(10**6)}",
                        "page_id": "p",
                        "ad_id": self.rng.choice(ADS)[0],
                        "ad_type": "banner",
                        "event_type": self.rng.choice(("view", "view", "click")),
                        "event_time": moment,
                        "ip_address": "1.2.3.4",
                    }
                )
            )
        name = f"events-{self.files:05d}.json"
        self.files += 1
        text = "".join(line + "\n" for line in lines)
        # One modification time for both copies, later than the file before's: the file source
        # takes new files in that order, and files of the same millisecond in listing order,
        # which two folders need not share (the twin's batches would read other files).
        self.stamp_ms = max(self.stamp_ms + 10, int(time.time() * 1000))
        for landing in (self.landing, self.twin.landing):
            write_text(f"{landing}/{name}", text)
            os.utime(f"{landing}/{name}", ns=(self.stamp_ms * 1_000_000,) * 2)
        return name


class TwinRunner(Runner):
    """:class:`testkit.model.Runner`'s operations on the lake, each run repeated on the twin."""

    def __init__(self, spark, home: str, twin: str, seed: int, log=print):
        super().__init__(spark, home, seed, kill_weight=0.08, log=log)
        self.twin = twin
        self.lake = LateLake(home, twin, self.rng)
        self.dropped_late = 0

    def on_twin(self, argv: list[str]) -> None:
        with environment_kept("LAKEHOUSE_HOME"):
            os.environ["LAKEHOUSE_HOME"] = self.twin
            code, _out = self.cli(argv)
        if code:
            raise ModelMismatch(f"the twin refused lakehouse {' '.join(argv)}: {self._last_error}")

    def op_run(self, step: Step) -> None:
        super().op_run(step)
        if not step.outcome.startswith("refused"):
            self.on_twin(step.argv)

    def _rollback_target(self, hop: str) -> list[str] | None:
        """A target that keeps at least the hop's first batch (a rollback to
        nothing plans afresh).
        """
        committed = self._batches(hop)
        if len(committed) < 2:
            return None
        kind = self.rng.choice(("batch", "batch", "run", "time"))
        if kind == "run":
            records = sorted(self.fs.glob(f"{self.home}/_ops/runs/ad_events/*.{hop}.json"))
            runs = [json.loads(self.fs.cat_file(path)) for path in records]
            runs = [
                run
                for run in runs
                if run.get("batch_ids")
                and run.get("mode") == "run-once"
                and min(run["batch_ids"]) > committed[0]
            ]
            if runs:
                return ["--to-run", self.rng.choice(runs)["run_id"]]
        if kind == "time":
            from testkit.model import _iso

            commits = f"{self.home}/checkpoints/ad_events/{hop}/commits"
            stamps = [int(self.fs.modified(f"{commits}/{n}").timestamp() * 1000) for n in committed]
            return ["--to-time", _iso(self.rng.randint(stamps[0], stamps[-1]))]
        return ["--to-batch", str(self.rng.choice(committed[:-1]))]

    def _note_resets(self, plan: dict) -> None:
        """A rollback taken replays exactly (:meth:`_exact`), with nothing to backfill."""
        if not_exact(plan):
            raise ModelMismatch(
                f"a rollback whose dry run replayed exactly does not: {not_exact(plan)}"
            )
        if plan["backfills"]:
            raise ModelMismatch(
                f"a rollback with no backfill to undo owes backfills: {plan['backfills']}"
            )

    def _exact(self, argv: list[str]) -> str | None:
        """Why the rollback ``argv`` would plan afresh (its dry run's plan), or None: it replays
        exactly. One that plans afresh is not taken: the twin could not follow it (the
        limitations the docs list: a batch that read part of a version, or a snapshot)."""
        code, out = self.cli([*argv, "--dry-run"])
        if code:
            return None  # refused: the rollback itself is refused too, changing nothing
        afresh = not_exact(json.loads(out)["plan"])
        return "; ".join(afresh) if afresh else None

    def _not_taken(self, step: Step) -> bool:
        afresh = self._exact(step.argv)
        if afresh:
            step.outcome = f"not taken: would plan afresh ({afresh[:120]})"
            self.sequence.refusals["afresh"] += 1
        return bool(afresh)

    def op_kill(self, step: Step) -> None:
        """SIGKILL a run or a rollback at a random moment, then run the same command again to
        completion; a run is run on the twin, whole."""
        from testkit.paths import killed_mid_run

        if self.rng.random() < 0.6:
            argv = self._run_argv("all")
        else:
            hop = self.rng.choice(HOPS)
            target = self._rollback_target(hop)
            if target is None:
                step.argv, step.outcome = ["rollback", hop], "no batch to keep yet"
                return
            argv = ["rollback", "ad_events", "--hop", hop, *target, "--json"]
            afresh = self._exact(argv)
            if afresh:
                step.argv, step.outcome = argv, f"not taken: would plan afresh ({afresh[:120]})"
                return
        step.argv = argv
        delay = self.rng.uniform(3, 25)
        killed, returncode, _out = killed_mid_run(argv, delay)
        if not killed and returncode not in (0, 2):
            raise ModelMismatch(f"lakehouse {' '.join(argv)} exited {returncode} before the kill")
        # again, to completion: finishes a crashed rollback, replays a run
        code, out = self.cli(argv)
        if code == 0 and argv[0] == "rollback":
            self._note_resets(json.loads(out)["plan"])
        if argv[0] == "run":
            self.on_twin(argv)
        step.outcome = (
            f"{'killed after %.1f s' % delay if killed else 'ended before the kill'}, "
            f"rerun exit {code}"
        )

    def op_settle(self, step: Step) -> None:
        """Both lakes up to date: each table equal to the twin's, bronze and silver to the files."""
        self.cli(["run", "ad_events"])
        self.on_twin(["run", "ad_events"])
        step.argv = ["run", "ad_events"]
        mine, twins, expected = (
            stored_by_delta_rs(self.home),
            stored_by_delta_rs(self.twin),
            self.lake.expected(),
        )
        for table in ("bronze", "quarantine", "silver", "gold"):
            if mine[table] != twins[table]:
                missing, extra = twins[table] - mine[table], mine[table] - twins[table]
                raise ModelMismatch(
                    f"{table} differs from the twin that never rolled back: "
                    f"{sum(missing.values())} rows missing ({list(missing.items())[:3]}), "
                    f"{sum(extra.values())} extra ({list(extra.items())[:3]})"
                )
            if table != "gold" and mine[table] != expected[table]:
                raise ModelMismatch(f"{table} differs from the landing files")
        self.dropped_late = sum(expected["gold"].values()) - sum(twins["gold"].values())
        self.sequence.settles += 1
        step.outcome = f"equal to the twin ({self.dropped_late} views dropped as late)"

    def step(self, number: int, operation: str | None = None) -> None:
        weights = {
            "land": 0.3,
            "run": 0.3,
            "rollback": 0.22,
            "kill": self.kill_weight,
            "settle": 0.1,
        }
        super().step(
            number, operation or self.rng.choices(list(weights), list(weights.values()))[0]
        )


def run_sequence(
    spark, home: str, twin: str, seed: int, steps: int, log=print
) -> tuple[Sequence, int]:
    """Land a first file, then ``steps`` random operations, then settle; the sequence and the views
    the last settle's gold dropped as late. The caller points ``LAKEHOUSE_HOME`` at ``home`` and
    ``LAKEHOUSE_PIPELINES`` at :func:`write_spec`'s folder."""
    runner = TwinRunner(spark, home, twin, seed, log)
    number = 0
    try:
        runner.step(number, "land")
        for number in range(1, steps + 1):
            runner.step(number)
        runner.step(steps + 1, "settle")
    except Exception as error:
        raise ModelMismatch(
            f"{error}\n{runner.sequence.transcript()}\nreplay: python -m testkit.model_late --seed "
            f"{seed} --steps {steps}"
        ) from error
    return runner.sequence, runner.dropped_late


def main(argv: list[str] | None = None) -> int:
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(
        description="Run one random sequence with late events against a fresh lake and its twin."
    )
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args(argv)
    from spark_jobs.engine.session import build_session

    work = Path(tempfile.mkdtemp(prefix="model-late-"))
    os.environ["LAKEHOUSE_HOME"] = str(work / "lake")
    os.environ["LAKEHOUSE_PIPELINES"] = str(write_spec(work / "pipelines"))
    os.environ["LAKEHOUSE_QUALITY"] = str(work / "no-suites")
    spark = build_session("lakehouse-model", 4)
    sequence, dropped = run_sequence(
        spark, str(work / "lake"), str(work / "twin"), args.seed, args.steps
    )
    print(
        f"seed {args.seed}: {dict(sequence.counts)}, refusals {dict(sequence.refusals)}, settles "
        f"{sequence.settles}, {dropped} views dropped as late"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
