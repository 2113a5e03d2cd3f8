"""What the random model sequences of an example pipeline share (``testkit/shop_model.py``,
``testkit/changes_run.py``): the CLI in this process, runs checked against a model, rollbacks of
any hop to a batch it holds, SIGKILLed commands run again, the backfills a rollback's plan asks
for, and the transcript that names a failing sequence."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import tempfile
from pathlib import Path

from spark_jobs.control.hop_state import HopState
from testkit.paths import killed_mid_run


def cli(argv: list[str]) -> tuple[int, str, str]:
    """``lakehouse ARGV`` in this process: its exit code (0, or 2 for a refusal),
    stdout and stderr.
    """
    from spark_jobs.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    if code not in (0, 2):
        raise AssertionError(f"lakehouse {' '.join(argv)} exited {code}: {err.getvalue()[-2000:]}")
    return code, out.getvalue(), err.getvalue()


def tree(home: Path) -> dict[str, tuple]:
    """Every file under the tables and checkpoints with its size: what a refused operation
    must not change.
    """
    return {
        str(path.relative_to(home)): (path.stat().st_size,)
        for folder in ("tables", "checkpoints")
        for path in sorted((home / folder).rglob("*"))
        if path.is_file()
    }


class RandomSequence:
    """One random sequence of a pipeline's lake: its random source, transcript and debts. A
    subclass lands data (:meth:`land`), checks the tables (:meth:`check`), backfills
    (:meth:`backfill`) and says whether anything landed yet (:attr:`landed_any`)."""

    name = ""
    hops: tuple[str, ...] = ()
    kill_within = 20.0  # a SIGKILL comes 2 s to this many seconds after the command starts

    def __init__(self, spark, home: Path, seed: int, log):
        self.spark, self.home, self.seed, self.log = spark, home, seed, log
        self.rng = random.Random(seed)
        # ``maintain`` between steps, from a generator of its own: the other steps stay the same.
        self.maintain_rng = random.Random(seed * 7919 + 1)
        self.transcript: list[str] = []
        # (hop, start, end) to backfill again after the next run
        self.owed: set[tuple[str, str, str]] = set()

    @property
    def landed_any(self) -> bool:
        raise NotImplementedError

    def land(self) -> None:
        raise NotImplementedError

    def check(self) -> None:
        raise NotImplementedError

    def backfill(self) -> None:
        raise NotImplementedError

    def note(self, text: str) -> None:
        self.transcript.append(text)
        self.log(f"[{self.name} seed {self.seed}] {len(self.transcript)}. {text}")

    def run(self) -> None:
        code, _out, err = cli(["run", self.name])
        assert code == 0, err[-2000:]
        self.pay_debts()
        self.check()

    def pay_debts(self) -> None:
        """The backfills the rollbacks' plans asked for, each hop's before those of
        the hops below.
        """
        for hop, start, end in sorted(
            self.owed, key=lambda debt: (self.hops.index(debt[0]), debt[1:])
        ):
            code, _out, err = cli(
                ["backfill", self.name, "--hop", hop, "--start", start, "--end", end]
            )
            assert code == 0, f"the backfill a rollback's plan asked for was refused: {err[-1000:]}"
            self.note(f"backfill again {hop} {start} .. {end}")
        self.owed.clear()

    def note_plan(self, out: str) -> None:
        """What a rollback's plan (its --json output) says to backfill again after the next run."""
        plan = json.loads(out)["plan"]
        self.owed.update((each["hop"], each["start"], each["end"]) for each in plan["backfills"])

    def refused_changes_nothing(self, argv: list[str], label: str) -> tuple[int, str]:
        """``argv`` run once: a refusal (exit 2) must leave every table and checkpoint as it was."""
        before = tree(self.home)
        code, out, err = cli(argv)
        self.note(label + (" (refused)" if code else ""))
        if code:
            assert tree(self.home) == before, f"a refused {argv[0]} changed files: {err[-500:]}"
        return code, out

    def kill(self, argv: list[str]) -> None:
        """``argv`` SIGKILLed at a random moment (its process group: the CLI and its JVM), then
        the same command again to completion (a crashed rollback finishes, a run replays)."""
        delay = self.rng.uniform(2, self.kill_within)
        killed, code, first_out = killed_mid_run(argv, delay)
        again, out, err = cli(argv)
        self.note(
            f"{' '.join(argv[:4])} "
            f"{'killed after %.1f s' % delay if killed else f'ended (exit {code})'}, "
            f"again: exit {again}"
        )
        if argv[0] == "rollback":
            for done, text in ((not killed and code == 0, first_out), (again == 0, out)):
                if done:
                    self.note_plan(text)
        if argv[0] == "run":
            assert again == 0, err[-2000:]
            self.pay_debts()
            self.check()

    def rollback(self, hop: str, batches: list[int], killing: bool) -> None:
        """Back to a random batch the hop still holds (or its start); a refusal changes nothing."""
        target = (
            self.rng.choice([-1, *batches[:-1]])
            if len(batches) > 1 or self.rng.random() < 0.5
            else -1
        )
        argv = ["rollback", self.name, "--hop", hop, "--to-batch", str(target), "--json"]
        if killing:
            self.kill(argv)
            return
        code, out = self.refused_changes_nothing(argv, f"rollback {hop} --to-batch {target}")
        if not code:
            self.note_plan(out)

    def _horizons(self) -> dict[str, int | None]:
        from spark_jobs.control.rollback import lineage
        from spark_jobs.model.lake import Lake

        lake = Lake.named(self.name)
        return {hop: lineage.horizon(HopState(lake, lake.spec.hop(hop))) for hop in self.hops}

    def maintain(self) -> None:
        """``lakehouse maintain``: compaction and vacuum change no row (the next run's check) and
        cut no hop's rollback window (the spec declares none: the checkpoints' batches are it)."""
        before = self._horizons()
        code, out, err = cli(["maintain", self.name, "--json"])
        assert code == 0, err[-2000:]
        totals = json.loads(out)["totals"]
        self.note(
            f"maintain: files {totals['files_before']} -> {totals['files_after']}, "
            f"{totals['files_vacuumed']} vacuumed"
        )
        assert self._horizons() == before, (
            f"maintain cut a rollback window: {before} -> {self._horizons()}"
        )

    def before_final_run(self) -> None:
        """What lands before the final run (nothing, unless a subclass holds something back)."""

    def play(self, steps: int) -> list[str]:
        """``steps`` random operations, checked after each run, and a final run; the transcript
        (to keep a failing sequence as a regression case)."""
        for _ in range(steps):
            self.step()
            if self.maintain_rng.random() < 0.25:
                self.maintain()
        self.before_final_run()
        self.note("final run")
        self.run()
        return self.transcript

    def step(self) -> None:
        from spark_jobs.logs import checkpoint_log

        operation = self.rng.choices(
            ("land", "run", "rollback", "kill", "backfill"), (0.35, 0.25, 0.2, 0.1, 0.1)
        )[0]
        if operation == "land" or not self.landed_any:
            self.land()
        elif operation == "backfill":
            self.backfill()
        elif operation == "run":
            self.note("run")
            self.run()
        else:
            hop = self.rng.choice(self.hops)
            batches = checkpoint_log.commit_batch_ids(
                str(self.home / f"checkpoints/{self.name}/{hop}")
            )
            if operation == "kill" and (not batches or self.rng.random() < 0.7):
                self.kill(["run", self.name])
            elif batches:
                self.rollback(hop, batches, killing=operation == "kill")


def main(run_sequence, description: str, argv: list[str] | None = None) -> int:
    """``python -m testkit.<model> --seed S --steps N``: one sequence on a new lake, the examples'
    pipelines unless ``$LAKEHOUSE_PIPELINES`` names others, their suites on."""
    from spark_jobs.engine.session import build_session
    from testkit.paths import EXAMPLES

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="model-")) / "lake"
    os.environ["LAKEHOUSE_HOME"] = str(home)
    os.environ.setdefault("LAKEHOUSE_PIPELINES", str(EXAMPLES))
    os.environ.pop("LAKEHOUSE_QUALITY", None)
    run_sequence(build_session("model"), home, args.seed, args.steps)
    print(
        f"seed {args.seed}: {args.steps} steps, every table equal to the model "
        f"after every run ({home})"
    )
    return 0
