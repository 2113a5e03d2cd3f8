"""A ``changes`` hop fed whole snapshots (``snapshots: true``): the ``accounts`` pipeline of
testkit/snapshots.py lands one JSON file per snapshot, its time in the file's name, and keeps
the latest rows (type 1) and every version of each account's tier (type 2). A random sequence of
landings, runs, rollbacks of any hop, backfills and SIGKILLed runs leaves both tables equal to
the plain-Python model of the landed snapshots after every run; a snapshot older than one
applied is refused with the fix, and changes nothing."""

from __future__ import annotations

import pytest

from testkit.snapshots import (
    NAME,
    Sequence,
    file_name,
    history,
    latest,
    lines,
    snapshots,
    tables,
    write_pipeline,
)

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

# (seed, steps): the CI budget, and every sequence that ever failed, kept as a regression case.
SEQUENCES = [(2, 12)]


def quiet(_line: str) -> None:
    pass


@pytest.mark.parametrize("seed,steps", SEQUENCES, ids=[f"seed{seed}" for seed, _ in SEQUENCES])
def test_random_snapshot_sequences_keep_both_tables_equal_to_the_model(
    spark, tmp_path, monkeypatch, seed, steps
):
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "lake"))
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(write_pipeline(tmp_path / "pipelines")))
    monkeypatch.delenv("LAKEHOUSE_QUALITY", raising=False)
    sequence = Sequence(spark, tmp_path / "lake", seed, log=print)
    transcript = sequence.play(steps)
    assert any(step.startswith("land") for step in transcript)


def test_snapshots_apply_in_time_order_and_a_late_one_is_refused(spark, tmp_path, monkeypatch):
    """Three snapshots, the second landing after the third: until it lands the tables are the
    model of the first and third; the run that finds it is refused, naming the fix, and leaves
    both tables as they were."""
    from spark_jobs import service

    home = tmp_path / "lake"
    monkeypatch.setenv("LAKEHOUSE_HOME", str(home))
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(write_pipeline(tmp_path / "pipelines")))
    made = snapshots(4, 3)
    landing = home / "landing" / NAME
    landing.mkdir(parents=True)
    for at, rows in (made[0], made[2]):
        (landing / file_name(at)).write_text(lines(rows))
    service.run(NAME, progress=quiet).raise_for_gate()
    applied = [made[0], made[2]]
    assert tables(spark, home) == (latest(applied), history(applied))
    # an account gone from the third snapshot, and one changed: deletes and versions are made
    assert set(made[0][1]) - set(made[2][1]) and len(history(applied)) > len(latest(applied))

    at, rows = made[1]
    (landing / file_name(at)).write_text(lines(rows))
    with pytest.raises(
        Exception, match="arrived after the snapshot of .* was applied.*roll bronze back"
    ):
        service.run(NAME, progress=quiet)
    assert tables(spark, home) == (latest(applied), history(applied))
