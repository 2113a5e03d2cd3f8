"""A randomized model check of the ``crm`` example's change feed: random sequences of landings
(the next slice of a feed drawn by :func:`testkit.changes_model.feed`), runs, rollbacks of any
hop to any batch it holds, backfills of a random range and SIGKILLed runs and rollbacks, against
the plain-Python SCD 1 and SCD 2 model of every change landed so far.

The tables are checked after every run that completes: a run reads every landed file, so both
tables must then equal the model of all landed changes. A refused rollback or backfill must
change no table and no checkpoint; a rollback whose plan asks to backfill a range again is
followed, after the next run, by that backfill (as a user would), before the check.

``python -m testkit.changes_run --seed S --steps N`` runs one sequence; the benchmark suite's
soak calls :func:`run_sequence`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

from testkit.changes_model import T0_MS, feed, scd1, scd2
from testkit.paths import killed_mid_run
from testkit.shop_model import _cli, _tree

NAME = "crm"
HOPS = ("bronze_customers", "customers", "customers_history")
SPAN_MS = 400_000  # every change's time lies in [T0_MS, T0_MS + SPAN_MS)
COLUMNS = ("customer_id", "name", "email", "tier", "lsn", "changed_at")


def tables(spark, home: Path) -> tuple[list[dict], list[dict]]:
    """Both tables' rows, in the model's order and columns."""
    def rows(relative: str, columns: tuple[str, ...], order: tuple[str, ...]) -> list[dict]:
        frame = spark.read.format("delta").load(str(home / relative))
        return [row.asDict() for row in frame.select(*columns).orderBy(*order).collect()]

    return (rows("tables/silver/crm_customers", COLUMNS, ("customer_id",)),
            rows("tables/silver/crm_customers_history", (*COLUMNS, "valid_from", "valid_to"),
                 ("customer_id", "valid_from")))


class Sequence:
    """One random sequence's lake, feed, random source and transcript."""

    def __init__(self, spark, home: Path, seed: int, log=print):
        self.spark, self.home, self.seed, self.log = spark, home, seed, log
        self.rng = random.Random(seed)
        self.feed = feed(seed, keys=12, changes=300)
        self.landed = 0
        self.files = 0
        self.transcript: list[str] = []
        self.owed: set[tuple[str, str, str]] = set()  # (hop, start, end) to backfill again after the next run

    def note(self, text: str) -> None:
        self.transcript.append(text)
        self.log(f"[crm seed {self.seed}] {len(self.transcript)}. {text}")

    def check(self) -> None:
        changes = self.feed[:self.landed]
        actual = tables(self.spark, self.home)
        assert actual == (scd1(changes), scd2(changes)), (
            f"seed {self.seed}: the tables differ from the model after: " + "; ".join(self.transcript))

    def land(self) -> None:
        count = min(self.rng.randrange(4, 30), len(self.feed) - self.landed)
        lines = [change.line() for change in self.feed[self.landed:self.landed + count]]
        landing = self.home / "landing/crm/customers"
        landing.mkdir(parents=True, exist_ok=True)
        (landing / f"changes-{self.files:04d}.json").write_text("\n".join(lines) + "\n")
        self.landed, self.files = self.landed + count, self.files + 1
        self.note(f"land {count} changes")

    def run(self) -> None:
        code, _out, err = _cli(["run", NAME])
        assert code == 0, err[-2000:]
        self.pay_debts()
        if (self.home / "tables/silver/crm_customers").exists():
            self.check()

    def pay_debts(self) -> None:
        """The backfills the rollbacks' plans asked for, the upper hop's first."""
        for hop, start, end in sorted(self.owed, key=lambda debt: (HOPS.index(debt[0]), debt[1:])):
            code, _out, err = _cli(["backfill", NAME, "--hop", hop, "--start", start, "--end", end])
            assert code == 0, f"the backfill a rollback's plan asked for was refused: {err[-1000:]}"
            self.note(f"backfill again {hop} {start} .. {end}")
        self.owed.clear()

    def note_plan(self, out: str) -> None:
        plan = json.loads(out)["plan"]
        self.owed.update((each["hop"], each["start"], each["end"]) for each in plan["backfills"])

    def backfill(self) -> None:
        """Every hop over a random range of the changes' times; a refusal changes nothing."""
        start = T0_MS + self.rng.randrange(0, SPAN_MS, 1000)
        end = start + self.rng.randrange(1000, SPAN_MS, 1000)
        texts = [_iso(ms) for ms in (start, end)]
        before = _tree(self.home)
        code, _out, err = _cli(["backfill", NAME, "--start", texts[0], "--end", texts[1]])
        self.note(f"backfill {texts[0]} .. {texts[1]}" + (" (refused)" if code else ""))
        if code:
            assert _tree(self.home) == before, f"a refused backfill changed files: {err[-500:]}"

    def kill(self, argv: list[str]) -> None:
        """``argv`` SIGKILLed at a random moment, then again to completion."""
        delay = self.rng.uniform(2, 15)
        killed, code, first_out = killed_mid_run(argv, delay)
        again, out, err = _cli(argv)
        self.note(f"{' '.join(argv[:4])} {'killed after %.1f s' % delay if killed else f'ended (exit {code})'}, "
                  f"again: exit {again}")
        if argv[0] == "rollback":
            for done, text in ((not killed and code == 0, first_out), (again == 0, out)):
                if done:
                    self.note_plan(text)
        else:
            assert again == 0, err[-2000:]
            self.pay_debts()
            self.check()

    def rollback(self, hop: str, batches: list[int], killing: bool) -> None:
        target = self.rng.choice([-1, *batches[:-1]]) if len(batches) > 1 else -1
        argv = ["rollback", NAME, "--hop", hop, "--to-batch", str(target), "--json"]
        if killing:
            self.kill(argv)
            return
        before = _tree(self.home)
        code, out, err = _cli(argv)
        self.note(f"rollback {hop} --to-batch {target}" + (" (refused)" if code else ""))
        if code:
            assert _tree(self.home) == before, f"a refused rollback changed files: {err[-500:]}"
        else:
            self.note_plan(out)

    def step(self) -> None:
        from spark_jobs.logs import checkpoint_log

        operation = self.rng.choices(("land", "run", "rollback", "kill", "backfill"), (0.35, 0.25, 0.2, 0.1, 0.1))[0]
        if operation == "land" or self.landed == 0:
            self.land()
        elif operation == "backfill":
            self.backfill()
        elif operation == "run":
            self.note("run")
            self.run()
        else:
            hop = self.rng.choice(HOPS)
            batches = checkpoint_log.commit_batch_ids(str(self.home / f"checkpoints/{NAME}/{hop}"))
            if operation == "kill" and (not batches or self.rng.random() < 0.7):
                self.kill(["run", NAME])
            elif batches:
                self.rollback(hop, batches, killing=operation == "kill")


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def run_sequence(spark, home: Path, seed: int, steps: int, log=print) -> list[str]:
    """``steps`` random operations on the lake at ``home`` (``$LAKEHOUSE_HOME``, the example's
    pipeline in ``$LAKEHOUSE_PIPELINES``), checked after each run, and a final run; the transcript."""
    sequence = Sequence(spark, home, seed, log)
    for _ in range(steps):
        sequence.step()
    sequence.note("final run")
    sequence.run()
    return sequence.transcript


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)
    import os

    from spark_jobs.engine.session import build_session
    from testkit.paths import EXAMPLES

    home = Path(tempfile.mkdtemp(prefix="crm-model-")) / "lake"
    os.environ["LAKEHOUSE_HOME"] = str(home)
    os.environ["LAKEHOUSE_PIPELINES"] = str(EXAMPLES)
    os.environ.pop("LAKEHOUSE_QUALITY", None)
    run_sequence(build_session("crm-model"), home, args.seed, args.steps)
    print(f"seed {args.seed}: {args.steps} steps, both tables equal to the model after every run ({home})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
