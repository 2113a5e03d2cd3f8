"""What has arrived for a pipeline's ingest hops that their streams have not taken yet, read as
plain files and a broker's metadata (no JVM): what the arrival trigger of a stream DAG watches
(``lakehouse_airflow/arrival.py``, docs/guides/arrival.md)."""

from __future__ import annotations

from dataclasses import dataclass

from spark_jobs.control import topics
from spark_jobs.control.hop_state import HopState
from spark_jobs.control.status import new_landing_files
from spark_jobs.model.lake import Lake


@dataclass(frozen=True)
class Arrived:
    """What arrived for one ingest hop: landing files (their paths), or for a topic-fed hop each
    partition's end offset past what its batches read (``<topic>/<partition>@<end>``: more
    records there make a new item)."""

    hop: str
    items: frozenset[str]
    records: bool = False  # a topic's records, not landing files

    def __sub__(self, seen: frozenset[str]) -> Arrived:
        return Arrived(self.hop, self.items - seen, self.records)

    def text(self) -> str:
        count, hop = len(self.items), self.hop
        if self.records:
            return f"records arrived in {count} partition{'s' * (count > 1)} for {hop}"
        return f"{count} file{'s' * (count > 1)} arrived for {hop}"


def arrived(lake: Lake) -> list[Arrived]:
    """Per ingest hop of ``lake``'s pipeline, what arrived that its stream has not taken. A broker
    that cannot answer raises :class:`~spark_jobs.control.topics.TopicError`."""
    found = []
    for hop in lake.spec.hops:
        if not hop.ingests:
            continue
        state = HopState(lake, hop)
        if hop.reads_topic:
            spans = topics.unread_spans(state)
            items = frozenset(
                f"{topic}/{partition}@{end}" for (topic, partition), (_start, end) in spans.items()
            )
            found.append(Arrived(hop.name, items, records=True))
        else:
            found.append(Arrived(hop.name, frozenset(new_landing_files(state))))
    return found
