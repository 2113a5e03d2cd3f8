"""Code updates: what a hop's query is, and whether a changed query can go on from
its checkpoint.

A hop's **fingerprint** is taken from its streaming query's analysed logical plan (Spark's text
of it, read by the engine before the query starts) and the spec's parameters of the hop:

- ``query``: the whole plan, normalised (expression ids, watermark annotations and the source's
  own identities left out): any change of what the hop computes changes it;
- ``state``: the plans under each stateful operator (aggregate, de-duplication, stream-stream
  join, ...), without the sources and watermark delays: what the checkpoint's state was built
  by. None for a stateless hop;
- ``code``: a hash of the pipeline's code files and the hop's spec, which tells cheaply
  whether the other two need looking at.

When the query changed and the state did not (a stateless hop, or a change above the stateful
operators), the stream goes on with the new code, as Spark allows. When the state's part
changed (another window, key, join condition or filter before the state), the checkpoint's
state was built by other code: ``run`` refuses, naming ``lakehouse refresh`` (recompute with the
new code from the start, or from a point with the state rebuilt there: :mod:`.rebuild`). The
fingerprint the checkpoint was last run with is kept in ``_ops/fingerprints/<pipeline>/<hop>.json``
(and each run record has its own). Plain Python: no JVM here.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass

from spark_jobs.control.hop_state import HopState
from spark_jobs.logs import checkpoint_log
from spark_jobs.logs.fs import filesystem, read_json, write_json
from spark_jobs.model.changes import TRUNCATES, UNAVAILABLE
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import HopSpec

# A changes hop's "state": the rules its table was built by (spark_jobs/model/changes.py).
CHANGE_RULES = "change rules"
# A summary hop's "state": the measures its table's rows were computed by.
MEASURES = "measures"
STATEFUL = (
    "Aggregate",
    "Deduplicate",
    "DeduplicateWithinWatermark",
    "Join",
    "FlatMapGroupsWithState",
    "TransformWithState",
    "FlatMapGroupsInPandasWithState",
)
_NODE = re.compile(r"^(?P<indent>[\s:|+\-]*?)~?(?P<name>[A-Za-z]+)\b")
_IDS = [
    (re.compile(r"#\d+L?"), ""),  # expression ids
    (re.compile(r"-T\d+ms"), ""),  # watermark delays on attributes
    # node ids
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), ""),
    (re.compile(r"@[0-9a-f]{6,}"), ""),  # object identities
    (re.compile(r", name=<Unassigned>"), ""),
    # PySpark numbers lambda variables per process
    (re.compile(r"\b(lambda [a-z]+)_\d+"), r"\1"),
]
LEAVES = (
    "StreamingRelation",
    "StreamingRelationV2",
    "StreamingExecutionRelation",
    "LogicalRDD",
    "LocalRelation",
    "Relation",
)


@dataclass(frozen=True)
class Fingerprint:
    code: str
    query: str
    state: str | None
    stateful: tuple[str, ...] = ()
    source: str | None = None  # :func:`source_identity` (fingerprints written before it name none)

    def to_dict(self) -> dict:
        return asdict(self)


def source_identity(hop: HopSpec) -> str:
    """What the hop's source is: its kind and, for one topic, its name (a pattern may widen or
    narrow: Spark's Kafka source follows that). :mod:`.source_switch` compares it."""
    if hop.reads_landing:
        return "landing"
    if hop.reads_topic:
        return f"topic {hop.kafka.topic}" if hop.kafka.topic is not None else "topic pattern"
    return "tables"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def normalise(plan: str) -> list[str]:
    """The plan's lines without what differs between two analyses of the same query."""
    lines = []
    for line in plan.splitlines():
        for pattern, replacement in _IDS:
            line = pattern.sub(replacement, line)
        lines.append(line.rstrip())
    return lines


def _depth(line: str) -> int:
    match = _NODE.match(line)
    return len(match["indent"]) if match else 0


def _name(line: str) -> str:
    match = _NODE.match(line)
    return match["name"] if match else ""


def state_part(lines: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """The lines under (and of) each stateful operator, without its sources' and watermarks'
    lines; and the stateful operators' names, top down."""
    part, names = [], []
    index = 0
    while index < len(lines):
        if _name(lines[index]) in STATEFUL:
            names.append(_name(lines[index]))
            depth = _depth(lines[index])
            end = index + 1
            while end < len(lines) and _depth(lines[end]) > depth:
                end += 1
            part.extend(
                line.strip(" :|+-~")
                for line in lines[index:end]
                if _name(line) not in (*LEAVES, "EventTimeWatermark")
            )
            index = end
        else:
            index += 1
    return part, tuple(names)


def _leaf_free(lines: list[str]) -> list[str]:
    """The plan with each source named by kind and columns only (its paths and options are the
    lake's, not the code's)."""
    kept = []
    for line in lines:
        if _name(line) in LEAVES:
            columns = re.findall(r"\[[^\[\]]*\]", line)
            line = line[: _NODE.match(line).end()] + (" " + columns[-1] if columns else "")
        kept.append(line)
    return kept


def of_plan(plan: str, hop: HopSpec, code_hash: str) -> Fingerprint:
    """The fingerprint of ``hop``'s query from its analysed plan's text."""
    lines = _leaf_free(normalise(plan))
    params = json.dumps(
        {
            "kind": hop.kind,
            "upstreams": hop.upstreams,
            "keys": hop.keys,
            "within": hop.within,
            "time_column": hop.time_column,
        },
        sort_keys=True,
    )
    state, names = state_part(lines)
    if hop.changes is not None:
        # A changes hop's table is what its rules built, as a state is: other rules
        # cannot go on with it.
        rules = asdict(hop.changes)
        if tuple(rules["sequence_columns"]) == (rules["sequence_by"],):
            # one column: the rules as lakes written before lists recorded them
            del rules["sequence_columns"]
        defaults = (
            ("truncates", TRUNCATES),
            ("unavailable_value", UNAVAILABLE),
            ("snapshots", False),
        )
        for name, default in defaults:
            # at their defaults: the rules as lakes written before these keys recorded them
            if rules[name] == default:
                del rules[name]
        params += "\n" + json.dumps(rules, sort_keys=True)
        names = (*names, CHANGE_RULES)
    if hop.measures:
        params += "\n" + json.dumps([list(pair) for pair in hop.measures])
        names = (*names, MEASURES)
    return Fingerprint(
        code=code_hash,
        query=_digest(params + "\n" + "\n".join(lines)),
        state=_digest(params + "\n" + "\n".join(state)) if names else None,
        stateful=names,
        source=source_identity(hop),
    )


def _path(lake: Lake) -> str:
    return lake.path(f"_ops/fingerprints/{lake.spec.name}")


def recorded(state: HopState) -> Fingerprint | None:
    """The fingerprint the hop's checkpoint was last run with; None when the checkpoint has no
    committed batch (nothing to go on from: any code may start it)."""
    lake, hop = state.lake, state.hop
    if not checkpoint_log.commit_batch_ids(state.checkpoint):
        return None
    document = read_json(f"{_path(lake)}/{hop.name}.json")
    if not document:
        return None
    return Fingerprint(
        document["code"],
        document["query"],
        document.get("state"),
        tuple(document.get("stateful", ())),
        document.get("source"),
    )


def save(state: HopState, fingerprint: Fingerprint) -> None:
    lake, hop = state.lake, state.hop
    folder = _path(lake)
    filesystem(folder).makedirs(folder, exist_ok=True)
    write_json(folder, f"{hop.name}.json", fingerprint.to_dict())


def change(old: Fingerprint | None, new: Fingerprint) -> str:
    """``unchanged``, ``compatible`` (the query changed, not what its state was built by) or
    ``incompatible``."""
    if old is None or old.query == new.query:
        return "unchanged"
    if old.state == new.state and old.stateful == new.stateful:
        return "compatible"
    return "incompatible"


def refusal(state: HopState, old: Fingerprint, new: Fingerprint) -> str:
    """One line: what changed and the command that fixes it."""
    lake, hop = state.lake, state.hop
    if old.stateful != new.stateful:
        what = (
            f"its stateful operators changed ({', '.join(old.stateful) or 'none'} -> "
            f"{', '.join(new.stateful) or 'none'})"
        )
    elif new.stateful == (MEASURES,):
        what = "its table's rows were computed by other measures"
    elif new.stateful == (CHANGE_RULES,):
        what = (
            "its table was built by other change rules (keys, sequence_by, operation, "
            "deletes, columns or SCD type)"
        )
    else:
        what = (
            f"what its state ({', '.join(new.stateful)}) was built by changed: a key, a window, a "
            "condition or a filter before it"
        )
    return (
        f"hop {hop.name}'s query changed since its checkpoint was written and {what}, so the "
        "checkpoint cannot go on with the new code: recompute with it with `lakehouse refresh "
        f"{lake.spec.name} --hop {hop.name}` (from the start, or --from TIME to keep what was "
        "written before then; the hops below follow), or put the old code back"
    )


def note(hop: HopSpec) -> str:
    return (
        f"[{hop.name}] the query changed since the last run, not its state: the stream goes on "
        "with the new code (rows written before keep the old code's results; `lakehouse "
        "refresh` recomputes them)"
    )
