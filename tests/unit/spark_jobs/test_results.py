"""``spark_jobs/results.py``: what the service's calls return, as the JSON documents of the CLI's
``--json`` and the lines ``maintain`` prints, against records built here and those real runs and a
real rollback wrote (``tests/fixtures/lakes``), read as plain JSON; and the message a failed
quality gate raises, against the example's spec (no JVM)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_jobs.control.rollback.plans import Journal
from spark_jobs.control.validate import Finding
from spark_jobs.model.errors import QualityGateFailed
from spark_jobs.model.records import MaintenanceRecord, RunRecord, TableChange
from spark_jobs.results import (
    GateFailure,
    MaintainResult,
    RollbackResult,
    RunResult,
    ValidateResult,
)
from testkit.lakes import fixture_lake, spec_copy

pytestmark = pytest.mark.unit

ORIGIN = {"user": "ana", "interface": "cli"}


def _record(hop: str, **fields) -> RunRecord:
    return RunRecord("ad_events", hop, "r9", "run-once", origin=ORIGIN, **fields)


def test_a_runs_document_is_its_id_and_each_hops_record_in_the_order_they_ran():
    bronze = _record(
        "bronze",
        status="succeeded",
        started_at=100.0,
        batch_ids=[3],
        tables={"/lake/tables/bronze/ad_events": TableChange(2, 3)},
        rows_in=240,
        rows_out=233,
        rows_quarantined=7,
    )
    silver = _record(
        "silver",
        status="failed",
        started_at=104.5,
        error="quality gate failed",
        quality={"gate": "failed", "failed": ["known_campaign"]},
    )
    result = RunResult(
        "r9",
        "run",
        [bronze, silver],
        failed_gate=GateFailure("silver", {"failed": ["known_campaign"]}),
        pipeline="ad_events",
    )
    document = result.to_dict()
    # the action, the gate and the pipeline are the caller's: the records say what happened
    assert set(document) == {"run_id", "hops"} and document["run_id"] == "r9"
    assert [(hop["hop"], hop["status"]) for hop in document["hops"]] == [
        ("bronze", "succeeded"),
        ("silver", "failed"),
    ]
    first, second = document["hops"]
    assert first["tables"] == {
        "/lake/tables/bronze/ad_events": {"version_before": 2, "version_after": 3}
    }
    assert (first["batch_ids"], first["rows_in"], first["rows_out"], first["rows_quarantined"]) == (
        [3],
        240,
        233,
        7,
    )
    assert (second["error"], second["quality"]["failed"]) == (
        "quality gate failed",
        ["known_campaign"],
    )
    assert first["origin"] == second["origin"] == ORIGIN
    assert json.loads(json.dumps(document)) == document  # plain JSON, nothing made a str
    assert RunResult("r10", "run", []).to_dict() == {"run_id": "r10", "hops": []}


def test_a_runs_document_holds_each_hops_record_as_the_runs_records_file_holds_it(tmp_path):
    lake = fixture_lake("history", tmp_path)
    files = [
        json.loads((Path(lake.runs) / f"r1.{hop}.json").read_text())
        for hop in ("bronze", "silver", "gold")
    ]
    records = [
        RunRecord(
            **{
                **file,
                "tables": {
                    table: TableChange(**change) for table, change in file["tables"].items()
                },
            }
        )
        for file in files
    ]
    hops = RunResult("r1", "run", records, pipeline="ad_events").to_dict()["hops"]
    assert len(hops) == 3
    for hop, file in zip(hops, files, strict=True):
        assert {key: hop[key] for key in file} == file, file["hop"]


def test_a_run_whose_gates_passed_raises_nothing_and_looks_up_no_pipeline():
    assert RunResult("r9", "run", [], pipeline="no-such-pipeline").raise_for_gate() is None


@pytest.fixture
def suites(tmp_path, lake_home, monkeypatch) -> Path:
    """The example pipelines in a folder of the test's, their suites in another."""
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(spec_copy(tmp_path / "pipelines")))
    monkeypatch.setenv("LAKEHOUSE_QUALITY", str(tmp_path / "suites"))
    return (tmp_path / "suites").resolve()


@pytest.mark.parametrize(
    "hop,below",
    [
        ("bronze", "; silver, gold did not run. "),
        ("silver", "; gold did not run. "),
        ("gold", ". "),
    ],
)
def test_a_failed_gate_names_its_rules_the_hops_that_did_not_run_and_how_to_undo_the_run(
    suites, hop, below
):
    failed = GateFailure(hop, {"failed": ["views_not_null", "known_campaign"], "warned": []})
    result = RunResult("r9", "run", [], failed_gate=failed, pipeline="ad_events")
    with pytest.raises(QualityGateFailed) as raised:
        result.raise_for_gate()
    assert str(raised.value) == (
        f"quality gate of {hop} failed (views_not_null, known_campaign){below}"
        f"Undo this run: `lakehouse rollback ad_events --hop {hop} --to-run r9`, then fix the "
        f"transform or the rule's policy in {suites / 'ad_events' / f'{hop}.json'}"
    )


def test_a_failed_gate_names_the_suite_in_the_pipelines_folder_when_suites_are_not_shared(
    tmp_path, lake_home, monkeypatch
):
    pipelines = spec_copy(tmp_path / "pipelines")
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(pipelines))
    monkeypatch.delenv("LAKEHOUSE_QUALITY", raising=False)
    failed = GateFailure("gold", {"failed": ["views_positive"]})
    with pytest.raises(QualityGateFailed) as raised:
        RunResult("r9", "run", [], failed_gate=failed, pipeline="ad_events").raise_for_gate()
    suite = pipelines.resolve() / "ad_events" / "quality" / "gold.json"
    assert str(raised.value).endswith(f"the rule's policy in {suite}")
    assert str(raised.value).startswith("quality gate of gold failed (views_positive). Undo")


def _fixture_journal(tmp_path) -> dict:
    """The journal the rollback of the ``replayed`` fixture lake wrote, as it is on disk."""
    lake = fixture_lake("replayed", tmp_path)
    [path] = Path(lake.rollbacks).glob("*.json")
    return json.loads(path.read_text())


def test_an_executed_rollbacks_document_is_its_plan_and_its_journal_as_written(tmp_path):
    written = _fixture_journal(tmp_path)
    journal = Journal.from_dict(written)
    document = RollbackResult(journal.plan, executed=True, journal=journal, resumed=True).to_dict()
    assert document == {"plan": written["plan"], "executed": True, "journal": written}


def test_a_dry_runs_document_is_its_plan_only(tmp_path):
    written = _fixture_journal(tmp_path)
    plan = Journal.from_dict(written).plan
    assert RollbackResult(plan, executed=False).to_dict() == {
        "plan": written["plan"],
        "executed": False,
    }


def _finding(hop: str, repaired: bool) -> Finding:
    return Finding(
        hop=hop,
        kind="orphan_commit",
        path=f"/lake/checkpoints/ad_events/{hop}/commits/3",
        problem="commit 3 has no offsets",
        fix="lakehouse checkpoint validate ad_events --repair",
        repair="delete commits/3",
        repaired=repaired,
    )


def test_a_checkpoint_is_consistent_when_every_finding_was_repaired():
    assert ValidateResult("ad_events").consistent
    assert ValidateResult(
        "ad_events", [_finding("silver", True), _finding("gold", True)]
    ).consistent
    assert not ValidateResult(
        "ad_events", [_finding("silver", True), _finding("gold", False)]
    ).consistent
    assert not ValidateResult("ad_events", [_finding("gold", False)]).consistent


def test_a_validations_document_says_whether_it_is_consistent_and_lists_every_finding():
    document = ValidateResult(
        "ad_events", [_finding("silver", True), _finding("gold", False)]
    ).to_dict()
    assert document == {
        "pipeline": "ad_events",
        "consistent": False,
        "findings": [
            {
                "hop": hop,
                "kind": "orphan_commit",
                "path": f"/lake/checkpoints/ad_events/{hop}/commits/3",
                "problem": "commit 3 has no offsets",
                "fix": "lakehouse checkpoint validate ad_events --repair",
                "repair": "delete commits/3",
                "repaired": repaired,
            }
            for hop, repaired in (("silver", True), ("gold", False))
        ],
    }
    assert ValidateResult("crm").to_dict() == {
        "pipeline": "crm",
        "consistent": True,
        "findings": [],
    }


TABLES = [
    {
        "hop": "bronze",
        "table": "/lake/tables/bronze/ad_events",
        "files_before": 12,
        "files_after": 3,
        "compacted": "12 files into 3",
        "vacuumed": "9 files (2000000 bytes)",
        "log": "2 old log files",
        "keep_from": 4,
        "keep_from_ms": 1_775_001_600_000,  # 2026-04-01 00:00 UTC: 20544 days after 1970-01-01
        "held_by": "silver's stream (offsets of batch 5)",
        "stored_before": 3_000_000,
        "stored_after": 1_000_000,
        "files_vacuumed": 9,
    },
    {
        # nothing to compact or vacuum, no log step, no commit time for the version kept
        "hop": "gold",
        "table": "/lake/tables/gold/campaign_views_10s",
        "files_before": 2,
        "files_after": 2,
        "compacted": None,
        "vacuumed": None,
        "keep_from": 7,
        "held_by": "the retention window",
        "stored_before": 1_300_000,
        "stored_after": 1_300_000,
        "files_vacuumed": 0,
    },
]
TABLE_LINES = [
    "bronze bronze/ad_events: 12 files -> 3; compaction: 12 files into 3; vacuum: 9 files "
    "(2000000 bytes); log: 2 old log files; keeps version 4, committed 2026-04-01T00:00:00.000 "
    "and later: held by silver's stream (offsets of batch 5)",
    "gold gold/campaign_views_10s: 2 files -> 2; compaction: None; vacuum: None; log: -; keeps "
    "version 7 and later: held by the retention window",
]
LANDING = [{"hop": "bronze", "files": 6, "pruned": "archived 6 landing files (600 bytes)"}]


def _maintenance(dry_run: bool, records: dict) -> MaintenanceRecord:
    record = MaintenanceRecord(
        "ad_events",
        maintenance_id="maintain-20260401T000000Z-abcdef",
        dry_run=dry_run,
        started_at=100.0,
        tables=TABLES,
        landing=LANDING,
        records=records,
        origin=ORIGIN,
    )
    record.duration_s = 1.25
    return record


def test_maintain_prints_a_line_per_table_and_landing_folder_the_records_deleted_and_totals():
    text = MaintainResult(_maintenance(False, {"runs": 3, "alerts": 0})).text()
    assert text.split("\n") == [
        *TABLE_LINES,
        "archived 6 landing files (600 bytes)",
        "records deleted (retention.records): 3 runs, 0 alerts",
        "2 tables: 14 files -> 5, stored 4.3 MB -> 2.3 MB, 9 files vacuumed, in 1.25 s",
    ]


def test_a_dry_run_of_maintain_says_nothing_changed_and_which_records_would_go():
    text = MaintainResult(_maintenance(True, {"runs": 3})).text()
    assert text.split("\n")[-2:] == [
        "records that would go (retention.records): 3 runs",
        "dry run: nothing changed; 2 tables: 14 files -> 5, stored 4.3 MB -> 2.3 MB, 9 files "
        "vacuumed, in 1.25 s",
    ]


@pytest.mark.parametrize("records", [{}, {"runs": 0, "alerts": 0}])
def test_maintain_prints_no_records_line_when_no_record_went(records):
    lines = MaintainResult(_maintenance(False, records)).text().split("\n")
    assert len(lines) == len(TABLE_LINES) + len(LANDING) + 1
    assert not [line for line in lines if line.startswith("records")]


def test_maintains_document_is_its_record_with_the_totals():
    document = MaintainResult(_maintenance(False, {"runs": 3})).to_dict()
    assert (document["pipeline"], document["maintenance_id"]) == (
        "ad_events",
        "maintain-20260401T000000Z-abcdef",
    )
    assert document["tables"] == TABLES and document["landing"] == LANDING
    totals = document["totals"]
    assert (totals["files_before"], totals["files_after"], totals["files_vacuumed"]) == (14, 5, 9)
    assert (totals["landing_pruned"], totals["records_pruned"]) == (6, 3)
    assert json.loads(json.dumps(document)) == document
