"""A ``changes`` hop's rules: how it reads a feed of changes and the table it keeps from them.

A change is a row of the hop's upstream table: the key columns (``keys``), a sequence number
(``sequence_by``) that orders the changes of one key, an optional operation column whose values
in ``deletes`` mark deletes (any other value, or no operation column, is an insert or update),
and the row's values; a truncate (an operation in ``truncates``, its keys null) ends every
key live before it. The hop keeps the latest row of each live key (``scd: 1``) or every
version of each key with its validity range (``scd: 2``). Plain data; the engine applies the
rules (:mod:`spark_jobs.engine.sinks.changes`), ``testkit/changes_model.py`` states them in
plain Python.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_jobs.model.errors import UsageError
from spark_jobs.model.kinds import HopKind
from spark_jobs.model.spec_keys import HOP_KEYS

# The lineage columns an ingest hop stamps that differ between a stream's and a backfill's copy
# of the same change: never part of the table a changes hop keeps.
RUN_COLUMNS = ("_batch_id", "_ingest_time")
DELETES = ("d", "delete")
TRUNCATES = ("t", "truncate")
# What Debezium writes for a value it did not read (an unchanged TOASTed column, by default).
UNAVAILABLE = "__debezium_unavailable_value"
# The operation column a snapshot feed's changes get (its rows have none): "d" on the delete
# of a key a snapshot no longer holds.
SNAPSHOT_OP = "_snapshot_op"
VALIDITY = ("valid_from", "valid_to")
# The column a sequence of several columns is ordered by: the struct of them, in their order
# (compared column by column); a type 2 history's validity columns hold such structs.
SEQUENCE = "_change_sequence"


@dataclass(frozen=True)
class ChangesSpec:
    """The keys of a ``changes`` hop beyond the ones every hop has."""

    sequence_by: str
    sequence_columns: tuple[str, ...] = ()
    operation: str | None = None
    deletes: tuple[str, ...] = DELETES
    truncates: tuple[str, ...] = TRUNCATES
    unavailable_value: str | None = UNAVAILABLE
    except_columns: tuple[str, ...] = ()
    scd: int = 1
    track_history: tuple[str, ...] = ()
    validity: tuple[str, str] = VALIDITY
    # The feed is whole snapshots of the table, ``sequence_by`` each one's time: a key a snapshot
    # holds is inserted or updated at its time, a key it no longer holds is deleted then.
    snapshots: bool = False

    @classmethod
    def from_raw(cls, raw: dict, subject: str) -> ChangesSpec:
        """The rules of a hop's spec mapping (``subject`` names it in errors)."""
        if not raw.get("sequence_by"):
            raise UsageError(
                f"{subject} (kind changes) lacks sequence_by: add the column that orders each "
                "key's changes (`sequence_by: lsn`)"
            )
        if not raw.get("keys"):
            raise UsageError(
                f"{subject} (kind changes) lacks keys: add the columns that "
                "name a row (`keys: [id]`)"
            )
        overlap = set(map(str, raw.get("deletes") or DELETES)) & set(
            map(str, raw.get("truncates") or TRUNCATES)
        )
        if overlap:
            raise UsageError(
                f"{subject} has {sorted(overlap)[0]!r} among both deletes and truncates: a value "
                "marks one of them"
            )
        scd = raw.get("scd", 1)
        if scd not in (1, 2):
            raise UsageError(
                f"{subject} has scd {scd!r}: use 1 (the latest row of each "
                "key) or 2 (every version)"
            )
        validity = tuple(raw.get("validity") or VALIDITY)
        if len(validity) != 2 or validity[0] == validity[1]:
            raise UsageError(
                f"{subject} has validity {list(validity)!r}: name two columns, e.g. "
                f"`[{VALIDITY[0]}, {VALIDITY[1]}]`"
            )
        if scd == 1 and (raw.get("track_history") or raw.get("validity")):
            raise UsageError(
                f"{subject} has track_history or validity, which only an `scd: 2` hop keeps: "
                "remove them or set `scd: 2`"
            )
        given = raw["sequence_by"]
        columns = (given,) if isinstance(given, str) else tuple(given)
        snapshots = bool(raw.get("snapshots", False))
        if snapshots and (raw.get("operation") or len(columns) != 1):
            raise UsageError(
                f"{subject} takes snapshots, which have no operation column and one time: remove "
                "`operation` and give `sequence_by` the column holding each snapshot's time (a key "
                "a snapshot no longer holds is a delete)"
            )
        if not all(isinstance(name, str) and name for name in columns) or len(set(columns)) != len(
            columns
        ):
            raise UsageError(
                f"{subject} has sequence_by {given!r}: name a column, or a list of different "
                "columns compared in turn (`[lsn, event_index]`)"
            )
        return cls(
            sequence_by=columns[0] if len(columns) == 1 else SEQUENCE,
            sequence_columns=columns,
            operation=SNAPSHOT_OP if snapshots else raw.get("operation"),
            deletes=("d",) if snapshots else tuple(str(v) for v in raw.get("deletes") or DELETES),
            truncates=() if snapshots else tuple(str(v) for v in raw.get("truncates") or TRUNCATES),
            unavailable_value=(
                str(raw["unavailable_value"])
                if raw.get("unavailable_value") is not None
                else None
                if "unavailable_value" in raw
                else UNAVAILABLE
            ),
            except_columns=tuple(raw.get("except_columns") or ()),
            scd=scd,
            track_history=tuple(raw.get("track_history") or ()),
            validity=validity,
            snapshots=snapshots,
        )

    @property
    def remembers_deletes(self) -> bool:
        """Whether the hop applies a batch from its table's rows and a memory of its deleted keys
        (a log feed whose table keeps the sequence), not from every change of the batch's keys:
        a snapshot feed's deletes are derived from whole snapshots, and a table without its
        sequence cannot tell which change is late."""
        return not self.snapshots and not set(self.sequence_columns) & set(self.except_columns)

    def dropped(self) -> set[str]:
        """The upstream columns the table leaves out."""
        return (
            set(RUN_COLUMNS)
            | set(self.except_columns)
            | ({self.operation} if self.operation else set())
            | {SEQUENCE}
        )

    def kept_columns(self, columns: list[str]) -> list[str]:
        """The table's columns from the changes' ``columns`` (type 2 adds its validity columns)."""
        kept = [name for name in columns if name not in self.dropped()]
        return kept + list(self.validity) if self.scd == 2 else kept

    def value_columns(self, columns: list[str], keys: tuple[str, ...]) -> list[str]:
        """The kept columns that are neither a key nor the sequence, the ones that ``_`` starts
        (lineage) last: the order in which two changes of one key and sequence are told apart."""
        values = [
            name
            for name in columns
            if name not in self.dropped() and name not in keys and name not in self.sequence_columns
        ]
        return sorted(values, key=lambda name: name.startswith("_"))

    def tracked_columns(
        self, columns: list[str], keys: tuple[str, ...], time_column: str
    ) -> list[str]:
        """The columns whose change starts a new version (type 2): ``track_history``, or every value
        column but the time column and lineage."""
        if self.track_history:
            return list(self.track_history)
        return [
            name
            for name in self.value_columns(columns, keys)
            if name != time_column and not name.startswith("_")
        ]

    def check_columns(self, columns: list[str], keys: tuple[str, ...], subject: str) -> None:
        """Refuse rules that name columns the changes do not have (a snapshot feed's operation is
        derived, never read)."""
        named = [
            *keys,
            *self.sequence_columns,
            *([self.operation] if self.operation and not self.snapshots else []),
            *self.except_columns,
            *self.track_history,
        ]
        absent = [name for name in named if name not in columns]
        if absent:
            raise UsageError(
                f"{subject}: the changes have no column {', '.join(map(repr, absent))} (they have "
                f"{', '.join(columns)}): fix the spec or the transform above it"
            )
        clash = [name for name in self.validity if name in columns and self.scd == 2]
        if clash:
            raise UsageError(
                f"{subject}: the changes already have a column {clash[0]!r}: name the validity "
                "columns differently (`validity: [from, to]`)"
            )


def hop_changes(raw: dict, kind: HopKind, subject: str) -> ChangesSpec | None:
    """A changes hop's rules; its keys on another kind's hop are refused."""
    if kind.name == "changes":
        return ChangesSpec.from_raw(raw, subject)
    given = [key.name for key in HOP_KEYS if key.kinds == "changes" and key.name in raw]
    if given:
        raise UsageError(
            f"{subject} (kind {kind.name}) has {given[0]}, which only a "
            "changes hop takes: remove it"
        )
    return None
