"""``spark_jobs/control/rollback/planner.py``: the rollback planner's rules on plain files, no JVM
(docs/concepts/rollback.md).

The lakes in ``tests/fixtures/lakes/`` were written by real Spark and Delta runs of the
ad_events example (``tests/fixtures/make_lakes.py`` says each one's history; the code of an
earlier commit wrote them, so they are also lakes an upgrade must keep reading). Each test
states what that history leads to, the expected values read from the lake's own run records
and journals, never from the planner.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from spark_jobs.control.hop_state import HopState
from spark_jobs.control.removable.table_files import TablePlan
from spark_jobs.control.rollback import execute, planner, replays
from spark_jobs.control.rollback.journals import read_rollbacks
from spark_jobs.control.rollback.plans import Backfill, HopStep, Journal, Plan, Request, TableStep
from spark_jobs.logs import checkpoint_log, delta_log
from spark_jobs.model.errors import UsageError
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import get_spec
from testkit.lakes import fixture_lake

pytestmark = pytest.mark.unit


def record(lake: Lake, run_id: str, hop: str) -> dict:
    return json.loads(Path(lake.runs, f"{run_id}.{hop}.json").read_text())


def version_after(lake: Lake, run_id: str, hop: str, table: str | None = None) -> int:
    return record(lake, run_id, hop)["tables"][table or lake.table(lake.spec.hop(hop))][
        "version_after"
    ]


def targets(plan: Plan) -> dict[str, int]:
    return {step.hop: step.target_batch for step in plan.hops}


def test_a_cascade_takes_each_hop_back_to_the_last_batch_that_read_nothing_undone(tmp_path):
    """history: runs r0, r1, r2 of every hop (one batch per run at bronze and silver, two at
    gold), gold backfilled (b1) between r1 and r2. Bronze back to batch 0 (r0's): silver keeps
    its r0 batch, gold its r0 batches; each table returns to the version r0 left it at."""
    lake = fixture_lake("history", tmp_path)
    plan = planner.plan(lake, Request("bronze", to_batch=0))
    gold = lake.spec.hop("gold")
    assert targets(plan) == {
        "bronze": 0,
        "silver": 0,
        "gold": max(record(lake, "r0", "gold")["batch_ids"]),
    }
    for step in plan.hops:
        later = (
            record(lake, "r1", step.hop)["batch_ids"] + record(lake, "r2", step.hop)["batch_ids"]
        )
        assert step.undone == later
        assert {table.table: table.restore_to for table in step.tables} == {
            table: version_after(lake, "r0", step.hop, table)
            for table in lake.tables_of(lake.spec.hop(step.hop))
        }
        assert all(table.action == "restore" for table in step.tables)
        metadata = json.loads(Path(step.checkpoint, "metadata").read_text())
        assert step.old_query_id == metadata["id"] != step.new_query_id
    bronze, silver, gold_step = plan.hops
    # r1's and r2's two files each
    assert bronze.source_log_cut == 0 and len(bronze.reread_files) == 4
    assert bronze.state_version is None and silver.state_version is None
    assert gold_step.state_version == gold_step.target_batch + 1
    assert silver.restored_upstreams == ["bronze"] and gold_step.restored_upstreams == ["silver"]
    # b1 wrote gold's table after r0: the restore undoes it, and the stream will not write it again
    b1 = record(lake, "b1", "gold")
    assert gold_step.tables[0].other_writers_undone == [
        f"{version_after(lake, 'b1', 'gold')} WRITE"
    ]
    assert plan.backfills == [Backfill("gold", b1["range_start"], b1["range_end"])]
    assert plan.refused == [] and not plan.nothing_to_do
    assert (
        planner.plan(lake, Request("gold", to_run="r1", cascade=False)).hops[0].target_batch
        == min(record(lake, "r1", gold.name)["batch_ids"]) - 1
    )


def test_undoing_a_first_batch_empties_the_tables_and_the_hop_below_starts_from_the_snapshot(
    tmp_path,
):
    lake = fixture_lake("history", tmp_path)
    plan = planner.plan(lake, Request("bronze", to_batch=-1))
    assert targets(plan) == {"bronze": -1, "silver": -1, "gold": -1}
    assert {table.action for step in plan.hops for table in step.tables} == {"empty"}
    assert plan.hops[0].source_log_cut == -1 and len(plan.hops[0].reread_files) == 6
    assert plan.hops[1].reread == "bronze's restored table from its snapshot"
    assert plan.hops[2].state_version == 0 and plan.hops[1].restored_upstreams == []


def test_a_target_by_run_is_the_batch_before_the_runs_first_and_an_unknown_run_names_recent_ones(
    tmp_path,
):
    lake = fixture_lake("history", tmp_path)
    plan = planner.plan(lake, Request("gold", to_run="r1", cascade=False))
    [step] = plan.hops
    assert step.target_batch == min(record(lake, "r1", "gold")["batch_ids"]) - 1
    assert step.reread == f"silver table from version {version_after(lake, 'r0', 'silver') + 1}"
    with pytest.raises(
        UsageError,
        match="unknown run id 'nope' for pipeline ad_events: recent runs are b1, r0, r1, r2",
    ):
        planner.plan(lake, Request("gold", to_run="nope"))


def test_without_cascade_a_hop_below_that_read_undone_data_refuses_the_plan(tmp_path):
    lake = fixture_lake("history", tmp_path)
    plan = planner.plan(lake, Request("bronze", to_batch=0, cascade=False))
    assert targets(plan) == {"bronze": 0}
    assert plan.refused == [
        "--no-cascade: silver batches 1..2 read bronze data being undone; roll back with cascade"
    ]


def test_a_straddling_batch_takes_the_upper_hop_back_to_a_boundary_both_share(tmp_path):
    """straddle: bronze batches 0..3 (s0, then bronze alone three times), silver batch 0 read
    bronze's batch 0 and batch 1 read bronze's batches 1..3 at once. Bronze back to batch 2 would
    cut silver's batch 1 in the middle: bronze goes back to batch 0, where silver's batches end."""
    lake = fixture_lake("straddle", tmp_path)
    plan = planner.plan(lake, Request("bronze", to_batch=2))
    assert (
        plan.requested_batch == 2 and targets(plan)["bronze"] == 0 and targets(plan)["silver"] == 0
    )
    assert (
        "bronze: back to batch 0 instead of 2, because silver batch 1 read bronze's "
        "table across that point" in plan.notes
    )
    assert plan.hops[0].undone == [1, 2, 3]


def test_a_hop_kept_from_before_an_earlier_restore_moves_past_that_restore(tmp_path):
    """replayed: history, then bronze rolled back to batch 0 (cascade) and r3. Gold's batch 0
    read silver's table before that rollback RESTOREd it: gold back to batch 0 goes on after the
    RESTORE commit the journal recorded, skipping the appends it undid."""
    lake = fixture_lake("replayed", tmp_path)
    [journal] = read_rollbacks(lake)
    silver_table = lake.table(lake.spec.hop("silver"))
    plan = planner.plan(lake, Request("gold", to_batch=0))
    assert targets(plan) == {"gold": 0}
    assert plan.hops[0].skip_versions == {"silver": journal.restored[silver_table]}
    assert (
        f"gold: goes on after silver's version {journal.restored[silver_table]} (a RESTORE), "
        "skipping appends it undid" in plan.notes
    )


def test_what_lies_beyond_retention_is_refused_with_its_reason(tmp_path):
    lake = fixture_lake("history", tmp_path)
    bronze = lake.spec.hop("bronze")
    Path(lake.checkpoint(bronze), "offsets", "0").unlink()
    plan = planner.plan(lake, Request("bronze", to_batch=0))
    assert plan.refused[:-1] == [
        "bronze offsets/0 is gone (minBatchesToRetain keeps the last "
        f"{lake.spec.min_batches_to_retain} batches)"
    ]
    # and how far back it does reach (offsets/1 needs offsets/0 beside it: batch 2 is the oldest)
    assert plan.refused[-1].startswith("bronze's rollback reaches back to batch 2, committed at ")
    assert plan.refused[-1].endswith("(`lakehouse status ad_events --hop bronze`)")
    assert plan.hops[0].refused == plan.refused[:-1] and plan.hops[0].tables == []

    # gold's backfill replaced files of version 0: VACUUM deleting one makes version 0 unreachable
    gold = lake.table(lake.spec.hop("gold"))

    def actions(version: int, kind: str) -> set[str]:
        lines = Path(gold, "_delta_log", f"{version:020d}.json").read_text().splitlines()
        return {action[kind]["path"] for action in map(json.loads, lines) if kind in action}

    replaced = sorted(actions(0, "add") & actions(version_after(lake, "b1", "gold"), "remove"))
    Path(gold, replaced[0]).unlink()
    plan = planner.plan(lake, Request("gold", to_batch=1, cascade=False))
    assert plan.refused[:-1] == [
        f"data file {replaced[0]} of version 0 is gone (vacuumed: deleted-file retention)"
    ]


def test_a_landing_file_gone_refuses_a_rollback_whose_replay_would_read_it(tmp_path):
    from spark_jobs.control.rollback import lineage
    from spark_jobs.logs import file_source_log

    lake = fixture_lake("history", tmp_path)
    bronze = lake.spec.hop("bronze")
    entries = file_source_log.file_source_entries(lake.checkpoint(bronze))
    last = max(int(entry["batchId"]) for entry in entries)
    read_by_last = sorted(
        file_source_log.listed_path(entry["path"])
        for entry in entries
        if int(entry["batchId"]) == last
    )
    assert not planner.plan(lake, Request("bronze", to_batch=last - 1)).refused
    # removed by hand, or by a retention that forgot the rollback window
    Path(read_by_last[0]).unlink()

    plan = planner.plan(lake, Request("bronze", to_batch=last - 1))
    assert plan.refused[-1].startswith(
        f"bronze's rollback reaches back to batch {last}, committed at "
    )
    assert plan.refused[:-1] == [
        f"bronze batch {last} read landing file {read_by_last[0]}, which is gone: a replay "
        "would not find it; put it back in the landing folder (retention.landing moves expired "
        "files to the lake's _archive/)"
    ]
    assert (
        lineage.horizon(HopState(lake, bronze)) == last
    )  # what status shows as the rollback window
    assert not planner.plan(lake, Request("bronze", to_batch=last)).refused


def test_a_rollback_plan_widens_a_joins_rebackfill_and_lists_each_hops_backfills_once(tmp_path):
    """Shop's model, seed 42: a join that starts over owes an ingest upstream's backfilled range
    widened by its ``within`` (payments of 06:00..08:00 pair with orders from 05:00), and the
    plan's list then named silver_paid twice over overlapping ranges. Plain files, no JVM."""
    lake = Lake(str(tmp_path), get_spec("shop"))
    runs = Path(lake.runs)
    runs.mkdir(parents=True)
    for hop, start, end in (
        ("bronze_payments", "06:00", "08:00"),
        ("bronze_orders", "22:00", "23:00"),
    ):
        record = {
            "run_id": f"bf-{hop}",
            "hop": hop,
            "mode": "backfill",
            "status": "succeeded",
            "started_at": 1,
            "range_start": f"2026-03-01T{start}:00.000",
            "range_end": f"2026-03-01T{end}:00.000",
        }
        (runs / f"bf-{hop}.{hop}.json").write_text(json.dumps(record))
    starts_over = HopStep("silver_paid", -1, [0, 1])
    # within is 1 hour in shop.yaml: the payments' range one hour wider each side; bronze_orders
    # feeds the join through silver_orders, whose own step owes that range as it was
    assert planner._rebackfill(HopState(lake, lake.spec.hop("silver_paid")), starts_over) == [
        ["2026-03-01T05:00:00.000", "2026-03-01T09:00:00.000"]
    ]
    assert planner._rebackfill(HopState(lake, lake.spec.hop("silver_orders")), starts_over) == [
        ["2026-03-01T22:00:00.000", "2026-03-01T23:00:00.000"]
    ]
    assert (
        planner._rebackfill(
            HopState(lake, lake.spec.hop("silver_paid")),
            dataclasses.replace(starts_over, target_batch=0),
        )
        == []
    )

    steps = [
        HopStep(
            "silver_orders",
            0,
            rebackfill=[
                ["2026-03-01T06:00:00.000", "2026-03-01T08:00:00.000"],
                ["2026-03-01T10:00:00.000", "2026-03-01T11:00:00.000"],
            ],
        ),
        HopStep(
            "silver_paid",
            0,
            rebackfill=[
                ["2026-03-01T05:00:00.000", "2026-03-01T09:00:00.000"],
                ["2026-03-01T09:00:00.000", "2026-03-01T09:30:00.000"],
            ],
        ),
    ]
    listed = [
        (each.hop, each.start[11:16], each.end[11:16]) for each in planner._backfills(lake, steps)
    ]
    assert listed == [
        ("silver_orders", "06:00", "08:00"),
        ("silver_orders", "10:00", "11:00"),
        ("silver_paid", "05:00", "09:30"),
        ("silver_paid", "10:00", "11:00"),
        ("gold_merchant_revenue", "05:00", "09:30"),
        ("gold_merchant_revenue", "10:00", "11:00"),
    ]


def test_a_rollback_plan_to_a_run_says_which_of_its_repairs_it_leaves(tmp_path):
    """The stream DAG's undo rolls back to before the run; a repair the run made at a hop whose
    stream wrote no batch in it is not undone (it would be backfilled again from the same rows),
    and the plan says so with the command that redoes it. Plain files, no JVM."""
    lake = Lake(str(tmp_path), get_spec("shop"))
    gold = lake.spec.hop("gold_merchant_revenue")
    runs = Path(lake.runs)
    runs.mkdir(parents=True)
    for run_id in ("R.repair-1", "S.repair-1"):
        record = {
            "run_id": run_id,
            "hop": gold.name,
            "mode": "backfill",
            "status": "succeeded",
            "repair": True,
            "started_at": 1,
            "range_start": "2026-03-01T05:00:00.000",
            "range_end": "2026-03-01T09:00:00.000",
            "tables": {lake.table(gold): {"version_after": 5}},
        }
        (runs / f"{run_id}.{gold.name}.json").write_text(json.dumps(record))

    def restoring(version: int) -> list[HopStep]:
        return [
            HopStep(
                gold.name, 0, tables=[TableStep(lake.table(gold), "gold", 9, version, "restore")]
            )
        ]

    [note] = planner._repairs_kept(lake, [gold], "R", [])  # the plan does nothing at gold
    assert note.startswith(
        "gold_merchant_revenue: the run's repair R.repair-1 (2026-03-01T05:00:00.000 .. "
    )
    assert note.endswith(
        "`lakehouse backfill shop --hop gold_merchant_revenue --start 2026-03-01T05:00:00.000 "
        "--end 2026-03-01T09:00:00.000`"
    )
    # the restore keeps its commit
    assert planner._repairs_kept(lake, [gold], "R", restoring(5)) == [note]
    assert planner._repairs_kept(lake, [gold], "R", restoring(4)) == []  # the restore undoes it
    # another run's repairs are not this run's
    assert planner._repairs_kept(lake, [gold], "T", []) == []


def _adds(table: str, version: int) -> int:
    lines = Path(table, "_delta_log", f"{version:020d}.json").read_text().splitlines()
    return sum("add" in json.loads(line) for line in lines)


def test_a_no_data_batch_read_below_does_not_make_the_hops_below_undo_more(tmp_path):
    """nodata (the shop pipeline): silver_orders de-duplicates under a watermark, so each run's
    batch of rows is followed by a no-data batch that commits no rows, and silver_paid's batches
    read up to that empty commit. Rolling silver_orders back to its first batch undoes the empty
    commit too, but the rows silver_paid and gold read are all still there: they keep the first
    run's batches, and undo only the second's."""
    lake = fixture_lake("nodata", tmp_path)
    orders = lake.table(lake.spec.hop("silver_orders"))
    first, empty = record(lake, "n0", "silver_orders")["batch_ids"]
    assert empty == first + 1
    assert _adds(orders, version_after(lake, "n0", "silver_orders") - 1) > 0
    # the no-data batch's commit
    assert _adds(orders, version_after(lake, "n0", "silver_orders")) == 0
    plan = planner.plan(lake, Request("silver_orders", to_batch=first))
    kept = {
        hop: max(record(lake, "n0", hop)["batch_ids"])
        for hop in ("silver_paid", "gold_merchant_revenue")
    }
    assert targets(plan) == {"silver_orders": first, **kept}
    for step in plan.hops[1:]:
        assert step.undone == record(lake, "n1", step.hop)["batch_ids"]
        assert [table.restore_to for table in step.tables] == [version_after(lake, "n0", step.hop)]
    assert plan.notes == [] and plan.refused == []
    # Undoing only the second run's no-data batch undoes no row: the hops below keep every batch.
    second = record(lake, "n1", "silver_orders")["batch_ids"][0]
    plan = planner.plan(lake, Request("silver_orders", to_batch=second))
    assert targets(plan) == {
        "silver_orders": second,
        "silver_paid": max(record(lake, "n1", "silver_paid")["batch_ids"]),
    }
    assert plan.step("silver_paid").undone == [] and plan.step("silver_paid").tables == []


def test_a_second_rollback_before_the_replay_carries_the_first_ones_kept_batches_or_drops_them(
    tmp_path,
):
    """history: gold back to r1's last batch keeps r2's batches for the next run (the first
    rollback's checkpoint part, on plain files); before that run, gold further back to r0's last
    batch undoes r1's batches and carries r2's after them: one replay of both, as logged; so does
    a rollback of silver, whose replay writes again what they read. A ``--replan`` drops them; so
    does a rollback of gold alone when its kept batches follow silver's replay."""
    lake = fixture_lake("history", tmp_path)
    gold = lake.spec.hop("gold")
    checkpoint = lake.checkpoint(gold)
    r0, r1, r2 = (record(lake, run, "gold")["batch_ids"] for run in ("r0", "r1", "r2"))
    logged = {
        batch: Path(checkpoint_log.batch_file(checkpoint, "offsets", batch)).read_text()
        for batch in r1 + r2
    }
    first = planner.plan(lake, Request("gold", to_batch=r1[-1]))
    assert first.step("gold").replay == "exact" and first.step("gold").undone == r2
    replays.keep(HopState(lake, gold), first.step("gold"), first.rollback_id)
    checkpoint_log.drop_batches_after(checkpoint, r1[-1])
    checkpoint_log.set_query_id(checkpoint, first.step("gold").new_query_id)

    second = planner.plan(lake, Request("gold", to_batch=r0[-1]))
    step = second.step("gold")
    assert (step.undone, step.carried_replay, step.replay, step.dropped_replay) == (
        r1,
        r2,
        "exact",
        [],
    )
    assert (
        f"next run replays batches {r1[0]}..{r2[-1]} ({r2[0]}..{r2[-1]} kept "
        "by an earlier rollback)" in second.text()
    )
    assert HopStep.from_dict(json.loads(json.dumps(step.to_dict()))) == step
    # silver replays what they read
    below = planner.plan(lake, Request("silver", to_batch=0)).step("gold")
    assert (below.undone, below.carried_replay, below.replay, below.restored_upstreams) == (
        r1,
        r2,
        "exact",
        ["silver"],
    )
    replan = planner.plan(lake, Request("silver", to_batch=0, replan=True)).step("gold")
    assert (replan.dropped_replay, replan.carried_replay, replan.replay) == (r2, [], "afresh")

    replays.keep(HopState(lake, gold), step, second.rollback_id)
    kept = json.loads(Path(lake.replays, "gold.json").read_text())
    assert kept["batches"] == {str(batch): text for batch, text in logged.items()}
    assert kept["query_id"] == step.new_query_id and kept["target"] == r0[-1]
    # the commits replayed
    assert kept["writer"] == first.step("gold").old_query_id == step.writer_query_id

    checkpoint_log.drop_batches_after(checkpoint, r0[-1])
    checkpoint_log.set_query_id(checkpoint, step.new_query_id)
    third = planner.plan(lake, Request("gold", to_batch=r0[0])).step("gold")
    assert (third.undone, third.carried_replay, third.replay) == (r0[1:], r1 + r2, "exact")
    following = {"silver": {"old": "q-old", "new": "q-new", "target": 0}}
    Path(lake.replays, "gold.json").write_text(json.dumps({**kept, "follows": following}))
    third = planner.plan(lake, Request("gold", to_batch=r0[0])).step("gold")
    assert (third.dropped_replay, third.carried_replay, third.replay) == (r1 + r2, [], "afresh")


def test_a_kept_replay_below_still_follows_an_upstream_whose_kept_batches_a_later_rollback_carries(
    tmp_path,
):
    """history, each rollback's checkpoint part done for real (no table restored: no JVM): gold
    back to r1's last batch, silver back to batch 0 (it carries gold's kept batches, which now
    follow silver's replay), then bronze back to batch 0. Silver goes no further back: it carries
    its own kept batches on under the same query id, and gold is not in that plan. Once silver has
    replayed, gold's kept batches still follow it (the late-events soak, seed 3, found them
    planned afresh: they named the earlier rollback, not the replay they follow)."""
    lake = fixture_lake("history", tmp_path)
    r0, r1, r2 = (record(lake, run, "gold")["batch_ids"] for run in ("r0", "r1", "r2"))
    plans = []
    for request in (
        Request("gold", to_batch=r1[-1]),
        Request("silver", to_batch=0),
        Request("bronze", to_batch=0),
    ):
        plans.append(plan := planner.plan(lake, request))
        for step in plan.hops:
            execute._rewind_checkpoint(lake, Journal(plan), step.hop)
    assert (plans[1].step("gold").carried_replay, plans[1].step("gold").restored_upstreams) == (
        r2,
        ["silver"],
    )
    silver = plans[2].step("silver")
    assert (silver.undone, silver.replay, silver.new_query_id) == ([], "exact", silver.old_query_id)
    assert silver.carried_replay == plans[1].step("silver").undone and "gold" not in [
        s.hop for s in plans[2].hops
    ]
    replays.done(HopState(lake, lake.spec.hop("silver")))
    assert [batch for batch, _text in replays.to_replay(HopState(lake, lake.spec.hop("gold")))] == [
        *r1,
        *r2,
    ]


def test_a_plan_says_why_a_hop_cannot_replay_its_batches_as_logged(tmp_path):
    """A hop taken back to before its first batch starts over, and one kept from before an earlier
    RESTORE above goes on past it: neither can run its undone batches as logged, and the plan
    (text and JSON) says why; ``--replan`` is asked for, not explained."""
    plan = planner.plan(fixture_lake("history", tmp_path / "a"), Request("silver", to_batch=-1))
    assert [(step.hop, step.replay, step.afresh_because) for step in plan.hops] == [
        (hop, "afresh", "it starts over (back to before its first batch)")
        for hop in ("silver", "gold")
    ]
    assert (
        "re-reads" in plan.text()
        and "(not as logged: it starts over (back to before its first batch))" in plan.text()
    )
    assert Plan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
    replayed = planner.plan(fixture_lake("replayed", tmp_path / "b"), Request("gold", to_batch=0))
    assert replayed.step("gold").afresh_because == "it goes on past an earlier RESTORE above"
    asked = planner.plan(
        fixture_lake("history", tmp_path / "c"), Request("gold", to_batch=0, replan=True)
    )
    assert asked.step("gold").afresh_because == "--replan" and "not as logged" not in asked.text()
    exact = planner.plan(fixture_lake("history", tmp_path / "d"), Request("gold", to_batch=0))
    assert (exact.step("gold").replay, "afresh_because" in exact.step("gold").to_dict()) == (
        "exact",
        False,
    )


def test_a_hop_whose_log_was_cleaned_starts_over_and_its_backfills_are_listed_again(tmp_path):
    """replayed: gold's table was RESTOREd by an earlier rollback (version 4, to a version before
    it) and gold ran again (5). Its log cleaned up to version 4, the versions that RESTORE went back
    to are gone: a rollback of gold to before its first batch must not restore version 4, which
    still holds the rows of gold's batches from before that rollback; it empties the table (gold
    starts over from silver's table) and lists every backfill of gold whose commit went with the
    log to be run again. Back to batch 0, which needs a version gone, is refused."""
    from spark_jobs.control.removable.table_files import clean_log
    from spark_jobs.control.rollback import planner
    from spark_jobs.control.rollback.plans import Request
    from spark_jobs.logs.ops import read_records
    from spark_jobs.model.times import iso, parse_time
    from testkit.lakes import fixture_lake

    lake = fixture_lake("replayed", tmp_path)
    table = lake.table(lake.spec.hop("gold"))
    operations = [
        delta_log.commit_info(table, version)["operation"] for version in delta_log.versions(table)
    ]
    restored_to = int(
        delta_log.commit_info(table, operations.index("RESTORE"))["operationParameters"]["version"]
    )
    latest = delta_log.versions(table)[-1]
    clean_log(TablePlan("gold", table, latest, latest, "test", None), dry_run=False)
    start = delta_log.versions(table)[0]
    assert start > restored_to  # the version the RESTORE went back to is gone

    refused = planner.plan(lake, Request("gold", to_batch=0))
    assert any(f"log starts at version {start}, not" in problem for problem in refused.refused), (
        refused.refused
    )

    refresh = planner.plan(lake, Request("gold", to_batch=-1))
    assert not refresh.refused, refresh.refused
    [step] = [
        table_step for hop in refresh.hops for table_step in hop.tables if table_step.table == table
    ]
    assert step.action == "empty"
    backfilled = [
        record
        for record in read_records(lake, "gold")
        if record.get("mode") == "backfill"
        and ((record.get("tables") or {}).get(table) or {}).get("version_after", start) < start
    ]
    [gold] = [hop for hop in refresh.hops if hop.hop == "gold"]
    spans = [
        [iso(parse_time(record[key], key)) for key in ("range_start", "range_end")]
        for record in backfilled
    ]
    # the one backfill, written at version 2, now gone
    assert len(spans) == 1 and gold.rebackfill == spans
