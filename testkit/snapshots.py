"""A table fed as whole snapshots: the ``accounts`` pipeline (JSON files, one snapshot each, its
time in the file name) whose ``changes`` hops (``snapshots: true``) keep the latest rows and the
history, and what both must hold, computed from the snapshots in plain Python; a random model
sequence of it (landings in time order, runs, rollbacks, backfills, SIGKILLs) checked after every
run.

The rules: snapshots apply in time order; a key a snapshot holds is inserted or updated at its
time; a key a snapshot no longer holds is deleted then. Type 1 is the latest snapshot's rows;
type 2 starts a version where a key appears, or its tier changes, holds the version's last
snapshot's values, and ends it at the snapshot that drops the key or changes its tier.

``python -m testkit.snapshots --seed S --steps N`` runs one sequence.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import sys
from pathlib import Path

from testkit.sequences import RandomSequence, main

NAME = "accounts"
HOPS = ("bronze", "accounts", "accounts_history")
T0 = dt.datetime(2026, 6, 1)
STEP = dt.timedelta(hours=6)  # between two snapshots
TIERS = ("bronze", "silver", "gold")
NAMES = ("Ada", "Bo", "Cy", "Di")
COLUMNS = ("account_id", "name", "tier", "snapshot_at")
SPEC = f"""name: {NAME}
landing: landing/{NAME}
hops:
  - name: bronze
    kind: ingest
    format: json
    columns: {{account_id: string, name: string, tier: string}}
    table: tables/bronze/{NAME}
    quarantine: tables/quarantine/{NAME}
    time_column: snapshot_at
  - name: accounts
    kind: changes
    upstream: bronze
    table: tables/silver/{NAME}
    time_column: snapshot_at
    keys: [account_id]
    sequence_by: snapshot_at
    snapshots: true
    except_columns: [_source_file, _rescued]
  - name: accounts_history
    kind: changes
    upstream: bronze
    table: tables/silver/{NAME}_history
    time_column: snapshot_at
    keys: [account_id]
    sequence_by: snapshot_at
    snapshots: true
    except_columns: [_source_file, _rescued]
    scd: 2
    track_history: [tier]
"""
MODULE = '''"""Accounts exported whole now and then: each file a snapshot, its time in its name."""

from pyspark.sql import functions as F

from spark_jobs.authoring import time_in_file_name


def snapshot_time(parsed):
    """Each row's snapshot time, from its file's name; a file without one is quarantined."""
    at = time_in_file_name(r"(\\d{8}T\\d{6})", "yyyyMMdd'T'HHmmss")
    missing = F.col("reason").isNull() & at.isNull()
    reason = F.when(missing, F.lit("no snapshot time in the file name")).otherwise(F.col("reason"))
    return parsed.withColumn("snapshot_at", at).withColumn("reason", reason)


TRANSFORMS = {"bronze": lambda frame, spec, inputs: snapshot_time(frame)}
'''


def write_pipeline(folder: Path) -> Path:
    """The pipeline's folder in the pipelines folder ``folder``; returns ``folder``."""
    (folder / NAME).mkdir(parents=True, exist_ok=True)
    (folder / NAME / f"{NAME}.yaml").write_text(SPEC)
    (folder / NAME / f"{NAME}.py").write_text(MODULE)
    return folder


def snapshots(seed: int, count: int, keys: int = 12) -> list[tuple[dt.datetime, dict]]:
    """``count`` snapshots in time order: each ``{account_id: (name, tier)}``; between two, some
    accounts go, come (back) or change their name or tier."""
    rng = random.Random(seed)
    rows: dict[str, tuple[str, str]] = {}
    made = []
    for index in range(count):
        for key in [f"acct-{number:02d}" for number in range(keys)]:
            draw = rng.random()
            if key in rows and draw < 0.15:
                del rows[key]
            elif key not in rows and draw < 0.4:
                rows[key] = (rng.choice(NAMES), rng.choice(TIERS))
            elif key in rows and draw < 0.45:
                rows[key] = (rng.choice(NAMES), rows[key][1])
            elif key in rows and draw < 0.55:
                rows[key] = (rows[key][0], rng.choice(TIERS))
        made.append((T0 + index * STEP, dict(rows)))
    return made


def file_name(at: dt.datetime) -> str:
    return f"accounts-{at:%Y%m%dT%H%M%S}.json"


def lines(rows: dict) -> str:
    return "".join(
        json.dumps({"account_id": key, "name": name, "tier": tier}) + "\n"
        for key, (name, tier) in sorted(rows.items())
    )


def latest(landed: list[tuple[dt.datetime, dict]]) -> list[dict]:
    """Type 1: the latest snapshot's rows."""
    if not landed:
        return []
    at, rows = max(landed, key=lambda snapshot: snapshot[0])
    return [
        {"account_id": key, "name": name, "tier": tier, "snapshot_at": at}
        for key, (name, tier) in sorted(rows.items())
    ]


def history(landed: list[tuple[dt.datetime, dict]]) -> list[dict]:
    """Type 2: every version of each account, from the snapshots in time order."""
    current: dict[str, dict] = {}
    versions = []
    for at, rows in sorted(landed, key=lambda snapshot: snapshot[0]):
        for key in sorted(set(current) | set(rows)):
            version = current.get(key)
            if version is not None and (key not in rows or rows[key][1] != version["tier"]):
                version["valid_to"] = at
                versions.append(current.pop(key))
            if key in rows:
                name, tier = rows[key]
                start = current[key]["valid_from"] if key in current else at
                current[key] = {
                    "account_id": key,
                    "name": name,
                    "tier": tier,
                    "snapshot_at": at,
                    "valid_from": start,
                    "valid_to": None,
                }
    versions += current.values()
    return sorted(versions, key=lambda row: (row["account_id"], row["valid_from"]))


def tables(spark, home: Path) -> tuple[list[dict], list[dict]]:
    def rows(relative: str, columns: tuple[str, ...], order: tuple[str, ...]) -> list[dict]:
        frame = spark.read.format("delta").load(str(home / relative))
        return [row.asDict() for row in frame.select(*columns).orderBy(*order).collect()]

    return (
        rows(f"tables/silver/{NAME}", COLUMNS, ("account_id",)),
        rows(
            f"tables/silver/{NAME}_history",
            (*COLUMNS, "valid_from", "valid_to"),
            ("account_id", "valid_from"),
        ),
    )


class Sequence(RandomSequence):
    """One random sequence of the accounts lake: the next snapshot landed, or a run, a rollback,
    a backfill, a SIGKILL; both tables checked against the model after every run."""

    name, hops, kill_within = NAME, HOPS, 15.0

    def __init__(self, spark, home: Path, seed: int, log=print):
        super().__init__(spark, home, seed, log)
        self.snapshots = snapshots(seed, 24)
        self.landed = 0

    @property
    def landed_any(self) -> bool:
        return self.landed > 0

    def land(self) -> None:
        if self.landed == len(self.snapshots):
            return
        at, rows = self.snapshots[self.landed]
        landing = self.home / "landing" / NAME
        landing.mkdir(parents=True, exist_ok=True)
        (landing / file_name(at)).write_text(lines(rows))
        self.landed += 1
        self.note(f"land the snapshot of {at:%Y-%m-%d %H:%M} ({len(rows)} accounts)")

    def check(self) -> None:
        if not (self.home / f"tables/silver/{NAME}").exists():
            return
        landed = self.snapshots[: self.landed]
        assert tables(self.spark, self.home) == (latest(landed), history(landed)), (
            f"seed {self.seed}: the tables differ from the model after: "
            + "; ".join(self.transcript)
        )

    def backfill(self) -> None:
        start = T0 + self.rng.randrange(0, 24) * STEP
        end = start + self.rng.randrange(1, 12) * STEP
        texts = [f"{at:%Y-%m-%dT%H:%M:%S}" for at in (start, end)]
        self.refused_changes_nothing(
            ["backfill", NAME, "--start", texts[0], "--end", texts[1]],
            f"backfill {texts[0]} .. {texts[1]}",
        )


def run_sequence(spark, home: Path, seed: int, steps: int, log=print) -> list[str]:
    """``steps`` random operations on the lake at ``home`` (the pipeline written beside it, in
    the ``$LAKEHOUSE_PIPELINES`` it sets), checked after each run, and a final run."""
    import os

    pipelines = home.parent / "pipelines"
    write_pipeline(pipelines)
    os.environ["LAKEHOUSE_PIPELINES"] = str(pipelines)
    return Sequence(spark, home, seed, log).play(steps)


if __name__ == "__main__":
    sys.exit(main(run_sequence, __doc__.splitlines()[0]))
