"""A randomized model check of the ``crm`` example's change feed: random sequences of landings
(the next slice of a feed drawn by :func:`testkit.changes_model.feed`, written as the seed's
Debezium connector writes it, truncates, tombstones and unavailable values included), runs,
rollbacks of any hop to any batch it holds, backfills of a random range and SIGKILLed runs and
rollbacks, against the plain-Python SCD 1 and SCD 2 model of every change landed so far, and the
live customers per tier (the summary hop below the type 1 table) against the model's count of
its rows.

The tables are checked after every run that completes: a run reads every landed file, so both
tables must then equal the model of all landed changes. A refused rollback or backfill must
change no table and no checkpoint; a rollback whose plan asks to backfill a range again is
followed, after the next run, by that backfill (as a user would), before the check.

``python -m testkit.changes_run --seed S --steps N`` runs one sequence; the benchmark suite's
soak calls :func:`run_sequence`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from spark_jobs.model.settings import CHANGES_FROM_TABLE_ROWS as FROM_TABLE
from testkit.changes_model import T0_MS, connector_of, feed, scd1, scd2, tiers
from testkit.paths import environment_kept
from testkit.sequences import RandomSequence, main

NAME = "crm"
HOPS = ("bronze_customers", "customers", "customers_history", "customers_per_tier")
SPAN_MS = 400_000  # every change's time lies in [T0_MS, T0_MS + SPAN_MS)
COLUMNS = ("customer_id", "name", "email", "tier", "position", "changed_at")


def tables(spark, home: Path) -> tuple[list[dict], list[dict]]:
    """Both tables' rows, in the model's order and columns."""

    def rows(relative: str, columns: tuple[str, ...], order: tuple[str, ...]) -> list[dict]:
        frame = spark.read.format("delta").load(str(home / relative))
        selected = frame.select(*columns).orderBy(*order)
        return [row.asDict(recursive=True) for row in selected.collect()]

    return (
        rows("tables/silver/crm_customers", COLUMNS, ("customer_id",)),
        rows(
            "tables/silver/crm_customers_history",
            (*COLUMNS, "valid_from", "valid_to"),
            ("customer_id", "valid_from"),
        ),
    )


def per_tier(spark, home: Path) -> list[dict]:
    """The summary hop's rows, in the model's order and columns."""
    frame = spark.read.format("delta").load(str(home / "tables/gold/crm_customers_per_tier"))
    selected = frame.select("tier", "customers", "last_change").orderBy("tier")
    return [row.asDict() for row in selected.collect()]


class Sequence(RandomSequence):
    """One random sequence of crm's lake: slices of a feed landed, the model of what landed."""

    name, hops, kill_within = NAME, HOPS, 15.0

    def __init__(self, spark, home: Path, seed: int, log=print):
        super().__init__(spark, home, seed, log)
        self.feed = feed(seed, keys=12, changes=300)
        self.landed = 0
        self.files = 0

    @property
    def landed_any(self) -> bool:
        return self.landed > 0

    def check(self) -> None:
        """Both tables against the model of every landed change (a run reads every landed file)."""
        if not (self.home / "tables/silver/crm_customers").exists():
            return
        changes = self.feed[: self.landed]
        assert tables(self.spark, self.home) == (scd1(changes), scd2(changes)), (
            f"seed {self.seed} ({connector_of(self.seed)}): the tables differ from the model "
            "after: " + "; ".join(self.transcript)
        )
        assert per_tier(self.spark, self.home) == tiers(scd1(changes)), (
            f"seed {self.seed}: the live customers per tier differ from the model after: "
            + "; ".join(self.transcript)
        )
        # Every landed line is a valid event or a tombstone: none is quarantined.
        quarantine = self.home / "tables/quarantine/crm_customers"
        if quarantine.exists():
            assert self.spark.read.format("delta").load(str(quarantine)).count() == 0

    def land(self) -> None:
        count = min(self.rng.randrange(4, 30), len(self.feed) - self.landed)
        lines = [
            line
            for change in self.feed[self.landed : self.landed + count]
            for line in change.lines()
        ]
        landing = self.home / "landing/crm/customers"
        landing.mkdir(parents=True, exist_ok=True)
        (landing / f"changes-{self.files:04d}.json").write_text("\n".join(lines) + "\n")
        self.landed, self.files = self.landed + count, self.files + 1
        self.note(f"land {count} changes")

    def backfill(self) -> None:
        """Every hop over a random range of the changes' times; a refusal changes nothing."""
        start = T0_MS + self.rng.randrange(0, SPAN_MS, 1000)
        end = start + self.rng.randrange(1000, SPAN_MS, 1000)
        texts = [_iso(ms) for ms in (start, end)]
        self.refused_changes_nothing(
            ["backfill", NAME, "--start", texts[0], "--end", texts[1]],
            f"backfill {texts[0]} .. {texts[1]}",
        )


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def run_sequence(spark, home: Path, seed: int, steps: int, log=print) -> list[str]:
    """``steps`` random operations on the lake at ``home`` (``$LAKEHOUSE_HOME``, the example's
    pipeline in ``$LAKEHOUSE_PIPELINES``), checked after each run, and a final run;
    the transcript. Every batch of newer changes applies from the tables, as it does on a feed
    long enough (``$LAKEHOUSE_CHANGES_FROM_TABLE_ROWS``); the others read the feed."""
    with environment_kept(FROM_TABLE.name):
        os.environ[FROM_TABLE.name] = "0"
        return Sequence(spark, home, seed, log).play(steps)


if __name__ == "__main__":
    sys.exit(main(run_sequence, __doc__.splitlines()[0]))
