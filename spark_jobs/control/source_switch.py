"""A hop whose source changed since its checkpoint began: landing files to a topic or back, a
topic to a topic pattern or back, one topic to another. Spark's checkpoint holds the offsets
of the source it was written with, which another source cannot go on from (a file source logs
``{"logOffset": N}``, Kafka's source ``{topic: {partition: offset}}``, Delta's a table version), so
such a change is a code change that only a start over follows: ``lakehouse refresh`` (or a rollback
to before the first batch with ``--replan``). Read from the checkpoint's last offsets and the
fingerprint its last run recorded (:func:`~.fingerprint.source_identity`): plain files, no JVM.
"""

from __future__ import annotations

import re

from spark_jobs.control import fingerprint as fingerprints
from spark_jobs.control.hop_state import HopState
from spark_jobs.logs import checkpoint_log
from spark_jobs.model.errors import CodeChanged
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import HopSpec

LANDING, TOPIC, TABLE = "landing files", "a Kafka topic", "upstream tables"


def kind_of_offsets(offsets: dict | None) -> str | None:
    """Which kind of source wrote a checkpoint's offsets of one source (None: not known)."""
    if not isinstance(offsets, dict):
        return None
    if "logOffset" in offsets:
        return LANDING
    if "reservoirId" in offsets or "reservoirVersion" in offsets:
        return TABLE
    if all(isinstance(ends, dict) for ends in offsets.values()):
        return TOPIC
    return None


def logged_source(state: HopState) -> tuple[str | None, dict | None]:
    """The kind of source the hop's checkpoint last logged offsets of (None before its first
    batch), and those offsets."""
    checkpoint = state.checkpoint
    batch_ids = checkpoint_log.offset_batch_ids(checkpoint)
    if not batch_ids:
        return None, None
    sources = checkpoint_log.read_offsets(checkpoint, batch_ids[-1]).sources
    offsets = sources[0] if sources else None
    return kind_of_offsets(offsets), offsets


def _spec_kind(hop: HopSpec) -> str:
    return LANDING if hop.reads_landing else TOPIC if hop.reads_topic else TABLE


def _what_it_read(state: HopState) -> str | None:
    """What the hop's checkpoint was written reading, where that is not what its spec names now;
    None when it is (or nothing was logged yet)."""
    hop = state.hop
    kind, offsets = logged_source(state)
    if kind is None:
        return None
    if kind != _spec_kind(hop):
        return kind if kind != TOPIC else f"topic {', '.join(sorted(offsets))}"
    if kind != TOPIC:
        return None
    topics = sorted(offsets)
    if hop.kafka.topic is not None and topics and topics != [hop.kafka.topic]:
        return f"topic {', '.join(topics)}"
    if hop.kafka.topic_pattern is not None and not any(
        re.search(hop.kafka.topic_pattern, name) for name in topics
    ):
        return f"topic {', '.join(topics)}"
    # One topic and a pattern log the same offsets: the fingerprint of the last run
    # tells them apart.
    recorded = fingerprints.recorded(state)
    source = recorded.source if recorded is not None else None
    if (
        source is not None
        and source.startswith("topic")
        and source != fingerprints.source_identity(hop)
    ):
        return "a topic pattern" if source == "topic pattern" else source
    return None


def refusal(state: HopState) -> str | None:
    """One line when the hop's source is not the one its checkpoint was written with: what each
    is and the command that starts the hop over; None when they agree."""
    lake, hop = state.lake, state.hop
    old = _what_it_read(state)
    if old is None:
        return None
    new = (
        f"topic pattern {hop.kafka.topic_pattern!r}"
        if hop.reads_topic and hop.kafka.topic is None
        else f"topic {hop.kafka.topic}"
        if hop.reads_topic
        else _spec_kind(hop)
    )
    return (
        f"hop {hop.name} now reads {new} but its checkpoint was written reading {old}: a stream "
        "cannot go on from another source's offsets; start the hop over on its new source with "
        f"`lakehouse refresh {lake.spec.name} --hop {hop.name}` (the hops below follow), or put "
        "the old source back in the spec"
    )


def switched(state: HopState) -> bool:
    return _what_it_read(state) is not None


def check_sources(lake: Lake, hops: tuple[HopSpec, ...]) -> None:
    """:class:`CodeChanged` for the first hop whose source changed: before any query starts."""
    for hop in hops:
        if reason := refusal(HopState(lake, hop)):
            raise CodeChanged(reason, hop.name)


def rollback_problems(state: HopState, target: int, replan: bool) -> list[str] | None:
    """For a hop whose source changed: why a rollback to ``target`` cannot be done (empty: it
    starts the hop over, which is allowed); None when the source did not change."""
    if not switched(state):
        return None
    if target < 0 and replan:
        return []
    return [f"{refusal(state)}; a rollback of it can only start it over (`--to-batch -1 --replan`)"]
