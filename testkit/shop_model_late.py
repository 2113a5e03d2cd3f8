"""The shop model with events beyond the allowed lateness (:mod:`testkit.shop_model`'s variant):
random landings, runs, rollbacks and SIGKILLs, and after every run each table equals a twin lake
that never rolled back, late drops included.

Some orders are 45 minutes older than their hour (beyond shop's ten minutes of allowed
lateness), and payments held back for a later landing are paid up to 80 minutes after their
order: silver_orders' de-duplication and silver_paid's join drop a row older than the watermark
its batch's predecessors left, so which rows they keep depends on how the stream cut its batches,
which no plain-Python model of the files says. A second lake, the twin, is given the same
landing files (same names, content and modification times) and the same runs, but none of the
rollbacks and none of the kills. After every run (both lakes run; a SIGKILLed run is run again
to completion first) every table equals the twin's, and the bronze tables the files.

A rollback keeps a batch (``--to-batch`` 0 or later) and is taken only when its dry run's plan
replays exactly (the others are counted as ``afresh``); one taken must then say ``exact`` for every
hop it undoes batches of and owe no backfill. No backfill: a backfill writes late rows the stream
drops (:mod:`testkit.shop_model` covers backfills within the lateness).

``python -m testkit.shop_model_late --seed S --steps N`` runs one sequence; the soak and
``tests/spark/test_shop.py`` call :func:`run_sequence`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

from testkit.model_late import not_exact
from testkit.paths import environment_kept
from testkit.sequences import cli, main
from testkit.shop_model import NAME, Landing, _Sequence, actual


class TwinLanding(Landing):
    """:class:`Landing`'s files with a ``late_share`` of orders 45 minutes before their hour and
    payments held back for a later landing paid up to 80 minutes after their order (beyond the
    watermark of a run that read a later hour), each file written to the lake's landing folder and
    to the twin's with one modification time, later than the file before's (the file source takes
    new files in that order)."""

    late_share, held_paid = 0.3, (0, 80)

    def __init__(self, home: Path, twin: Path, seed: int):
        super().__init__(home, seed)
        self.twin = twin
        self.stamp_ms = 0

    def _write(self, source: str, suffix: str, text: str) -> None:
        super()._write(source, suffix, text)
        name = f"landing/{NAME}/{source}/{self.files:04d}{suffix}"
        (self.twin / name).parent.mkdir(parents=True, exist_ok=True)
        (self.twin / name).write_text(text)
        self.stamp_ms = max(self.stamp_ms + 10, int(time.time() * 1000))
        for home in (self.home, self.twin):
            os.utime(home / name, ns=(self.stamp_ms * 1_000_000,) * 2)


class _TwinSequence(_Sequence):
    """One random sequence of shop's lake and its twin: no backfill, rollbacks that
    replay exactly.
    """

    def __init__(self, spark, home: Path, twin: Path, seed: int, log):
        super().__init__(spark, home, seed, log)
        self.twin = twin
        self.landing = TwinLanding(home, twin, seed)
        self.refusals: Counter = Counter()
        self.compared = self.dropped_late = 0

    @property
    def figures(self) -> dict:
        """What the soak adds up: runs compared, rows the twin dropped as late,
        rollbacks not taken.
        """
        return {
            "compared": self.compared,
            "dropped_late": self.dropped_late,
            "afresh": self.refusals["afresh"],
        }

    def check(self) -> None:
        """The twin runs too; every table equals the twin's, the bronze tables the files."""
        with environment_kept("LAKEHOUSE_HOME"):
            os.environ["LAKEHOUSE_HOME"] = str(self.twin)
            code, _out, err = cli(["run", NAME])
        assert code == 0, f"the twin's run was refused: {err[-1000:]}"
        mine, twins = actual(self.home), actual(self.twin)
        for table, rows in twins.items():
            assert mine[table] == rows, (
                f"{table} differs from the twin that never rolled back: missing "
                f"{_diff(rows, mine[table])}, extra "
                f"{_diff(mine[table], rows)}; after: " + "; ".join(self.transcript)
            )
        expected = self.landing.expected()
        assert (mine["orders"], mine["payments"]) == (expected["orders"], expected["payments"]), (
            "bronze differs from the files"
        )
        self.compared += 1
        # What the twin's silver dropped as late (orders, and paid orders of the kept ones).
        self.dropped_late = sum(
            len(expected[table]) - len(twins[table]) for table in ("latest", "paid")
        )
        self.log(
            f"[{self.name} seed {self.seed}] equal to the twin ({self.dropped_late} silver "
            "rows dropped as late)"
        )

    def backfill(self) -> None:
        """No backfill in this variant (it writes late rows the stream drops): a run instead."""
        self.note("run")
        self.run()

    def rollback(self, hop: str, batches: list[int], killing: bool) -> None:
        """Back to a batch the hop holds, taken only when its dry run's plan replays exactly."""
        if len(batches) < 2:
            self.note(f"rollback {hop}: no batch to keep yet")
            return
        target = self.rng.choice(batches[:-1])
        argv, label = (
            ["rollback", NAME, "--hop", hop, "--to-batch", str(target), "--json"],
            f"rollback {hop} --to-batch {target}",
        )
        code, out, _err = cli([*argv, "--dry-run"])
        afresh = [] if code else not_exact(json.loads(out)["plan"])
        if afresh:
            self.refusals["afresh"] += 1
            self.note(f"{label} not taken: would plan afresh ({'; '.join(afresh)[:120]})")
            return
        if killing:
            self.kill(argv)
            return
        code, out = self.refused_changes_nothing(argv, label)
        if not code:
            self.note_plan(out)

    def note_plan(self, out: str) -> None:
        plan = json.loads(out)["plan"]
        assert not not_exact(plan), (
            f"a rollback whose dry run replayed exactly does not: {plan['hops']}"
        )
        assert not plan["backfills"], (
            f"a rollback with no backfill to undo owes backfills: {plan['backfills']}"
        )


def _diff(rows, others) -> list:
    if isinstance(rows, dict):
        return [(key, value) for key, value in rows.items() if others.get(key) != value][:3]
    return sorted(set(rows) - set(others))[:3]


def run_sequence(spark, home: Path, twin: Path, seed: int, steps: int, log=print) -> _TwinSequence:
    """``steps`` random operations on the lake at ``home`` (``$LAKEHOUSE_HOME``) and its twin at
    ``twin``, compared after each run, and a final run; the sequence (its ``transcript``,
    ``refusals``, how many runs it ``compared`` and the rows the twin's silver ``dropped_late``
    at the last)."""
    sequence = _TwinSequence(spark, home, twin, seed, log)
    sequence.play(steps)
    return sequence


if __name__ == "__main__":
    sys.exit(
        main(
            lambda spark, home, seed, steps, log=print: (
                run_sequence(spark, home, home.parent / "twin", seed, steps, log).transcript
            ),
            __doc__.splitlines()[0],
        )
    )
