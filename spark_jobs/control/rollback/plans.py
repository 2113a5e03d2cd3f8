"""Rollback plans and journals as typed records (docs/concepts/rollback.md).

A :class:`Plan` is what ``lakehouse rollback --dry-run --json`` prints under ``plan`` and what
the rollback DAG pushes to XCom; a :class:`Journal` is the plan being carried out, kept as
``_ops/rollbacks/<pipeline>/<rollback id>.json`` (also the audit record). Each type reads and
writes its own JSON: ``to_dict`` gives the document, ``from_dict`` reads one, including the
journals of lakes written before a field existed (a missing field takes its default).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, TypeVar

from spark_jobs.model.errors import UsageError

T = TypeVar("T")


class TableAction(StrEnum):
    """What a table step does: RESTORE to a version, or empty the table (its first batch undone)."""

    RESTORE = "restore"
    EMPTY = "empty"


class Replay(StrEnum):
    """How a hop's next run runs its undone batches: ``exact`` as their offsets logged them (the
    same source range, watermark and timestamp) before new data; ``afresh`` planned again."""

    EXACT = "exact"
    AFRESH = "afresh"


class JournalStatus(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"


@dataclass(frozen=True)
class JournalStep:
    """One step of a rollback journal: a table's restore, or a hop's checkpoint rewind. Written
    in the journal as its text (``restore <hop> <table>``, ``checkpoint <hop>``)."""

    action: Literal["restore", "checkpoint"]
    hop: str
    table: str | None = None

    def __str__(self) -> str:
        return (
            f"restore {self.hop} {self.table}"
            if self.action == "restore"
            else f"checkpoint {self.hop}"
        )

    @classmethod
    def parse(cls, text: str) -> JournalStep:
        action, _, rest = text.partition(" ")
        if action == "restore":
            hop, _, table = rest.partition(" ")
            return cls("restore", hop, table)
        return cls("checkpoint", rest)


def _known(cls: type[T], document: dict, **nested: Any) -> T:
    """``cls`` from the fields of ``document`` it declares (others ignored), ``nested``
    replacing some.
    """
    names = {each.name for each in dataclasses.fields(cls)}
    return cls(
        **{key: value for key, value in document.items() if key in names and key not in nested},
        **nested,
    )


@dataclass
class TableStep:
    """One table a hop's rollback restores or empties (a first batch undone)."""

    table: str
    label: str
    version_now: int
    restore_to: int
    action: TableAction
    # Commits after ``restore_to`` by other writers (a backfill) that the restore undoes too, as
    # "<version> <operation>".
    other_writers_undone: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.action = TableAction(self.action)

    @classmethod
    def from_dict(cls, document: dict) -> TableStep:
        return _known(cls, document)


@dataclass
class HopStep:
    """One hop's part of a plan: the batches it undoes, its tables, and its checkpoint's rewind."""

    hop: str
    target_batch: int
    undone: list[int] = field(default_factory=list)
    tables: list[TableStep] = field(default_factory=list)
    # Why the hop cannot go back (beyond retention): a refused step plans nothing else.
    refused: list[str] = field(default_factory=list)
    kind: str | None = None
    checkpoint: str | None = None
    last_batch: int | None = None
    old_query_id: str | None = None
    new_query_id: str | None = None
    # The hop keeps batches that read an upstream table up to the version that table returns to:
    # its next batch starts after that table's restore commit (``restored_upstreams``).
    skip_upstream_restore: bool = False
    restored_upstreams: list[str] = field(default_factory=list)
    state_version: int | None = None
    source_log_cut: int | None = None
    reread: str = ""
    # a hop reading landing files: those the next run reads again
    reread_files: list[str] | None = None
    # {upstream: version}: the source offset moves past an earlier RESTORE of that upstream's table.
    skip_versions: dict[str, int] = field(default_factory=dict)
    # [start, end] ranges (ISO) to backfill again at this hop after the replay.
    rebackfill: list[list[str]] = field(default_factory=list)
    skip_to_version: int | None = None  # journals written before joins: the only upstream's skip
    # ``exact``: the next run re-runs each undone batch as its offsets logged it (the same
    # source range, watermark and timestamp) before new data; ``afresh``: it plans them
    # again with new data.
    replay: Replay = Replay.AFRESH
    afresh_because: str = ""  # why the undone batches cannot run as logged (``--replan``: asked to)
    # Batches an earlier rollback kept for the hop's next run to replay, which this one drops (that
    # run plans them afresh): this rollback rewinds the hop or restores what they read.
    dropped_replay: list[int] = field(default_factory=list)
    # Batches an earlier rollback kept for the hop's next run, which this one replays after its own
    # undone batches: it rewinds the hop further back and changes nothing they read.
    carried_replay: list[int] = field(default_factory=list)
    # The query id whose commits the replay writes again when it carries them (the one the earlier
    # rollback replaced); otherwise ``old_query_id``.
    writer_query_id: str | None = None

    def __post_init__(self):
        self.replay = Replay(self.replay)

    def not_as_logged(self) -> str | None:
        """Why the next run will not replay the hop's undone (or kept) batches as
        logged, or None.
        """
        if self.dropped_replay:
            return (
                f"{self.hop}: drops the replay of batches "
                f"{self.dropped_replay[0]}..{self.dropped_replay[-1]} an earlier rollback kept: "
                "run the pipeline first, or roll back with --replan"
            )
        if self.undone and self.replay != Replay.EXACT:
            return (
                f"{self.hop}: cannot replay batches {self.undone[0]}..{self.undone[-1]} as logged "
                f"({self.afresh_because}): roll back with --replan to plan them "
                "afresh, or to another point"
            )
        return None

    @classmethod
    def from_dict(cls, document: dict) -> HopStep:
        return _known(
            cls, document, tables=[TableStep.from_dict(each) for each in document.get("tables", [])]
        )

    def to_dict(self) -> dict:
        document = dataclasses.asdict(self)  # the enums as their plain text, for JSON and XCom
        document["replay"] = str(self.replay)
        for table in document["tables"]:
            table["action"] = str(table["action"])
        for key, empty in (
            ("refused", []),
            ("reread_files", None),
            ("skip_to_version", None),
            ("replay", Replay.AFRESH),
            ("dropped_replay", []),
            ("carried_replay", []),
            ("writer_query_id", None),
            ("afresh_because", ""),
        ):
            if document[key] == empty:
                del document[key]
        return document


@dataclass
class Request:
    """The rollback as asked for: one target (a batch, a run, or a time) and whether it cascades."""

    hop: str
    to_batch: int | None = None
    to_run: str | None = None
    to_time: int | None = None  # epoch milliseconds
    to_time_iso: str | None = None  # the time as the person gave it
    cascade: bool = True
    replan: bool = False  # plan the undone batches afresh rather than replay them as logged
    exact: bool = False  # refuse unless every hop replays its undone batches as logged

    def __post_init__(self):
        given = [
            name
            for name, value in (
                ("to_batch", self.to_batch),
                ("to_run", self.to_run),
                ("to_time", self.to_time),
            )
            if value is not None
        ]
        if len(given) != 1:
            raise UsageError(
                "give exactly one of --to-batch, --to-run, --to-time (got "
                f"{', '.join(given) or 'none'})"
            )
        if self.replan and self.exact:
            raise UsageError("--replan and --exact contradict each other: give one of them")

    @classmethod
    def from_dict(cls, document: dict) -> Request:
        return _known(cls, document)

    def to_dict(self) -> dict:
        document = dataclasses.asdict(self)
        for key in ("replan", "exact"):
            if not document[key]:
                del document[key]
        return document

    def same_target(self, other: Request) -> bool:
        return (self.hop, self.to_batch, self.to_run, self.to_time, self.cascade, self.replan) == (
            other.hop,
            other.to_batch,
            other.to_run,
            other.to_time,
            other.cascade,
            other.replan,
        )

    def command_line(self, pipeline: str) -> str:
        """The CLI command that makes (or finishes) a rollback with this request."""
        target = (
            f"--to-batch {self.to_batch}"
            if self.to_batch is not None
            else f"--to-run {self.to_run}"
            if self.to_run
            else f"--to-time {self.to_time_iso}"
        )
        return (
            f"lakehouse rollback {pipeline} --hop {self.hop} {target}"
            + ("" if self.cascade else " --no-cascade")
            + (" --replan" if self.replan else "")
        )


@dataclass
class Backfill:
    """A backfill to run after the replay: what the rollback undoes and the stream will
    not write again.
    """

    hop: str
    start: str
    end: str

    @classmethod
    def from_dict(cls, document: dict) -> Backfill:
        return _known(cls, document)

    def command_line(self, pipeline: str) -> str:
        return (
            f"lakehouse backfill {pipeline} --hop {self.hop} --start {self.start} --end {self.end}"
        )


@dataclass
class Plan:
    """A whole rollback: every hop's step, notes, refusals and the backfills owed after it."""

    rollback_id: str
    pipeline: str
    request: Request
    requested_batch: int
    hops: list[HopStep] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    backfills: list[Backfill] = field(default_factory=list)

    @property
    def nothing_to_do(self) -> bool:
        return not self.hops

    def step(self, hop: str) -> HopStep:
        return next(step for step in self.hops if step.hop == hop)

    def table_step(self, hop: str, table: str) -> TableStep:
        return next(each for each in self.step(hop).tables if each.table == table)

    def steps(self) -> list[JournalStep]:
        """The journal's steps, in order: every table's restore, then every checkpoint's rewind."""
        restores = [
            JournalStep("restore", step.hop, table.table)
            for step in self.hops
            for table in step.tables
        ]
        return restores + [JournalStep("checkpoint", step.hop) for step in self.hops]

    @classmethod
    def from_dict(cls, document: dict) -> Plan:
        return _known(
            cls,
            {key: value for key, value in document.items() if key != "nothing_to_do"},
            request=Request.from_dict(document["request"]),
            hops=[HopStep.from_dict(each) for each in document.get("hops", [])],
            backfills=[Backfill.from_dict(each) for each in document.get("backfills", [])],
        )

    def to_dict(self) -> dict:
        return {
            "rollback_id": self.rollback_id,
            "pipeline": self.pipeline,
            "request": self.request.to_dict(),
            "requested_batch": self.requested_batch,
            "hops": [step.to_dict() for step in self.hops],
            "notes": list(self.notes),
            "refused": list(self.refused),
            "backfills": [dataclasses.asdict(each) for each in self.backfills],
            "nothing_to_do": self.nothing_to_do,
        }

    def text(self) -> str:
        """The plan as a person reads it."""
        how = "cascade" if self.request.cascade else "no cascade"
        lines = [
            f"rollback {self.rollback_id} of {self.pipeline}: {self.request.hop} to batch "
            f"{self.requested_batch} ({how})"
        ]
        if self.nothing_to_do:
            lines.append("  nothing to undo: no batch after the target")
        for step in self.hops:
            lines.extend(_step_lines(step))
        lines.extend(f"  note: {note}" for note in self.notes)
        lines.extend(f"  REFUSED: {reason}" for reason in self.refused)
        return "\n".join(lines)


def _step_lines(step: HopStep) -> list[str]:
    if step.refused:
        return [f"  {step.hop}: cannot go back to batch {step.target_batch}"]
    undone = step.undone
    span = (
        f"undo batches {undone[0]}..{undone[-1]} ({len(undone)})" if undone else "no batch undone"
    )
    lines = [f"  {step.hop}: {span}, keep up to batch {step.target_batch}"]
    for table in step.tables:
        to = (
            "emptied"
            if table.action == TableAction.EMPTY
            else f"RESTORE to version {table.restore_to}"
        )
        lines.append(f"    table {table.label}: version {table.version_now} -> {to}")
        if table.other_writers_undone:
            lines.append(
                "      also undoes commits by other writers: "
                f"{', '.join(table.other_writers_undone)}"
            )
    if undone:
        lines.append(
            f"    checkpoint: drop offsets/commits past {step.target_batch}"
            + (
                f", state versions past {step.state_version}"
                if step.state_version is not None
                else ""
            )
            + (
                f", file source log past {step.source_log_cut}"
                if step.source_log_cut is not None
                else ""
            )
            + ", new query id"
        )
    replayed = [*undone, *step.carried_replay]
    carried = (
        f" ({step.carried_replay[0]}..{step.carried_replay[-1]} kept by an earlier rollback)"
        if step.carried_replay
        else ""
    )
    if step.replay == Replay.EXACT and replayed:
        lines.append(
            f"    next run replays batches {replayed[0]}..{replayed[-1]}{carried} as logged (the "
            "same source ranges and watermarks), then reads what is new"
        )
    elif undone:
        because = (
            f" (not as logged: {step.afresh_because})"
            if step.afresh_because not in ("", "--replan")
            else ""
        )
        lines.append(f"    next run re-reads {step.reread}{because}")
    if step.dropped_replay:
        lines.append(
            f"    drops the replay of batches {step.dropped_replay[0]}..{step.dropped_replay[-1]} "
            "an earlier rollback kept: the next run plans them afresh (run before rolling back "
            "again to replay them as logged)"
        )
    lines.extend(
        f"    source offset moves past the restore commit of {upstream}'s table"
        for upstream in step.restored_upstreams
    )
    lines.extend(
        f"    source offset moves past version {version} of {upstream}'s table (an earlier RESTORE)"
        for upstream, version in step.skip_versions.items()
    )
    return lines


@dataclass
class Journal:
    """A plan being carried out: the steps done so far and each restored table's version after
    its restore (the commit a hop reading that table skips). Written after every step."""

    plan: Plan
    status: JournalStatus = JournalStatus.RUNNING
    created_at: float = 0.0
    done: list[JournalStep] = field(default_factory=list)
    restored: dict[str, int] = field(default_factory=dict)
    finished_at: float | None = None
    duration_s: float | None = None
    # Who asked for the rollback and through which interface (spark_jobs.model.origin).
    origin: dict | None = None

    def __post_init__(self):
        self.status = JournalStatus(self.status)
        self.done = [
            each if isinstance(each, JournalStep) else JournalStep.parse(each) for each in self.done
        ]

    @property
    def rollback_id(self) -> str:
        return self.plan.rollback_id

    @property
    def finished(self) -> bool:
        return self.status == JournalStatus.SUCCEEDED

    @classmethod
    def from_dict(cls, document: dict) -> Journal:
        return _known(cls, document, plan=Plan.from_dict(document["plan"]))

    def to_dict(self) -> dict:
        document = {
            "plan": self.plan.to_dict(),
            "status": str(self.status),
            "created_at": self.created_at,
            "done": [str(each) for each in self.done],
            "restored": dict(self.restored),
        }
        if self.origin is not None:
            document["origin"] = self.origin
        if self.finished_at is not None:
            document.update(finished_at=self.finished_at, duration_s=self.duration_s)
        return document
