"""What the service's calls return (:mod:`spark_jobs.service`): each result prints itself as the
JSON document of the CLI's ``--json`` (``to_dict``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_jobs.control.rollback.plans import Journal, Plan
from spark_jobs.model.errors import QualityGateFailed
from spark_jobs.model.records import MaintenanceRecord, RunRecord


@dataclass
class GateFailure:
    """The hop whose quality gate failed (``gate`` mode stops below it) and the gate's summary."""

    hop: str
    summary: dict


@dataclass
class RunResult:
    """What a run or backfill did: one record per hop that ran, and the gate that
    stopped it, if any.
    """

    run_id: str
    action: str
    records: list[RunRecord]
    failed_gate: GateFailure | None = None
    pipeline: str = ""

    def to_dict(self) -> dict:
        return {"run_id": self.run_id, "hops": [record.to_dict() for record in self.records]}

    def raise_for_gate(self) -> None:
        """A :class:`QualityGateFailed` saying how to undo the run, when a gate failed
        in ``gate`` mode.
        """
        if self.failed_gate is None:
            return
        from spark_jobs.control.suites import suite_path
        from spark_jobs.model.lake import Lake

        lake = Lake.named(self.pipeline)
        hop = lake.spec.hop(self.failed_gate.hop)
        below = [other.name for other in lake.spec.downstream_of(hop.name)]
        raise QualityGateFailed(
            f"quality gate of {hop.name} failed ({', '.join(self.failed_gate.summary['failed'])})"
            + (f"; {', '.join(below)} did not run. " if below else ". ")
            + f"Undo this run: `lakehouse rollback {lake.spec.name} --hop {hop.name} --to-run "
            f"{self.run_id}`, then fix the transform or the rule's policy in "
            f"{suite_path(lake.spec, hop)}"
        )


@dataclass
class RollbackResult:
    """A rollback's plan, whether it was executed, and the journal (the audit
    record) when it was.
    """

    plan: Plan
    executed: bool
    journal: Journal | None = None
    resumed: bool = False

    def to_dict(self) -> dict:
        document = {"plan": self.plan.to_dict(), "executed": self.executed}
        if self.journal is not None:
            document["journal"] = self.journal.to_dict()
        return document


@dataclass
class ValidateResult:
    """Findings of ``checkpoint validate`` (repaired ones marked); consistent when none is left."""

    pipeline: str
    findings: list = field(default_factory=list)

    @property
    def consistent(self) -> bool:
        return not [finding for finding in self.findings if not finding.repaired]

    def to_dict(self) -> dict:
        return {
            "pipeline": self.pipeline,
            "consistent": self.consistent,
            "findings": [finding.to_dict() for finding in self.findings],
        }


@dataclass
class MaintainResult:
    """What ``maintain`` did per table (or would do, with ``dry_run``): its record."""

    record: MaintenanceRecord

    def to_dict(self) -> dict:
        return self.record.to_dict()

    def text(self) -> str:
        from spark_jobs.control.removable.table_files import table_line

        record = self.record
        totals = record.totals()
        lines = [table_line(table) for table in record.tables] + [
            entry["pruned"] for entry in record.landing
        ]
        if any(record.records.values()):
            lines.append(
                f"records {'that would go' if record.dry_run else 'deleted'} (retention.records): "
                + ", ".join(f"{count} {kind}" for kind, count in record.records.items())
            )
        lines.append(
            f"{'dry run: nothing changed; ' if record.dry_run else ''}{len(record.tables)} tables: "
            f"{totals['files_before']} files -> {totals['files_after']}, stored "
            f"{_megabytes(totals['stored_before'])} -> {_megabytes(totals['stored_after'])}, "
            f"{totals['files_vacuumed']} files vacuumed, in {record.duration_s} s"
        )
        return "\n".join(lines)


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"
