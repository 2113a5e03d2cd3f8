"""Checks of one hop's keys that read no other hop (a topic's, a join's, Z-order's): the
spec loader (:mod:`spark_jobs.model.spec`) calls them with each hop and its file."""

from __future__ import annotations

from pathlib import Path

from spark_jobs.model.errors import UsageError
from spark_jobs.model.kinds import KINDS

# Where a topic-fed hop's first run starts (Spark's ``startingOffsets``).
STARTING_OFFSETS = ("earliest", "latest")


def check_topic(hop, path: Path) -> None:
    """A topic-fed hop names one topic or a pattern that compiles, no landing folder and no
    upstream, and starts at earliest or latest."""
    import re

    reads = (
        f"topic {hop.kafka.topic!r}"
        if hop.kafka.topic is not None
        else f"topic_pattern {hop.kafka.topic_pattern!r}"
    )
    if hop.kafka.topic is not None and hop.kafka.topic_pattern is not None:
        raise UsageError(
            f"{path}: hop {hop.name} has topic {hop.kafka.topic!r} and topic_pattern "
            f"{hop.kafka.topic_pattern!r}: keep one"
        )
    if hop.kafka.topic_pattern is not None:
        try:
            re.compile(hop.kafka.topic_pattern)
        except re.error as error:
            raise UsageError(
                f"{path}: hop {hop.name} has topic_pattern {hop.kafka.topic_pattern!r}, which is "
                f"no regular expression ({error}): fix it"
            ) from None
    if hop.landing is not None:
        raise UsageError(
            f"{path}: hop {hop.name} reads {reads} and landing folder {hop.landing!r}: "
            "keep one (a second source is a second ingest hop)"
        )
    if hop.upstreams:
        raise UsageError(
            f"{path}: hop {hop.name} reads {reads}, not {', '.join(map(repr, hop.upstreams))}: "
            "remove its upstream key"
        )
    if hop.kafka.starting_offsets not in STARTING_OFFSETS:
        raise UsageError(
            f"{path}: hop {hop.name} has starting_offsets {hop.kafka.starting_offsets!r}: use "
            f"{' or '.join(STARTING_OFFSETS)}"
        )


def check_join(hop, path: Path) -> None:
    """A join reads two or more different hops and has a bound; only a join reads several."""
    if not hop.kind_of.reads_several:
        several = " or ".join(name for name, kind in KINDS.items() if kind.reads_several)
        raise UsageError(
            f"{path}: hop {hop.name} (kind {hop.kind}) reads one table, not {list(hop.upstreams)}: "
            f"name one upstream, or use kind {several}"
        )
    if len(set(hop.upstreams)) < 2 or not hop.within:
        raise UsageError(
            f"{path}: hop {hop.name} (kind {hop.kind}) needs `upstream: [<hop>, <hop>]` (two or "
            "more different hops above it) and `within: <duration>` (how far apart in event time "
            "two joined rows can be)"
        )


def check_zorder(hop, path: Path) -> None:
    """Z-order columns are not partition columns (a file holds one value of those already)."""
    both = [column for column in hop.zorder_by if column in hop.partition_by]
    if both:
        raise UsageError(
            f"{path}: hop {hop.name} has zorder_by {both!r}, which it partitions by too: each file "
            "holds one value of a partition column already; remove them from zorder_by"
        )


# What may start a pipeline's stream DAG (the spec's ``trigger``).
SCHEDULE, ARRIVAL = "schedule", "arrival"


def check_trigger(raw: dict, where: str) -> tuple[int, ...]:
    """A spec's ``trigger`` (``schedule`` or ``arrival``) with the keys that go with it; for
    ``arrival``, the least time in milliseconds between two runs (``min_interval``) and the
    fallback tick (``max_wait``), which bound the runs a rollback window holds; else (). Every
    pipeline has an ingest hop (the graph starts at one), so something to watch."""
    from spark_jobs.model.times import duration_ms

    trigger = raw.get("trigger", SCHEDULE)
    if trigger not in (SCHEDULE, ARRIVAL):
        raise UsageError(f"{where} has trigger {trigger!r}: use `schedule` or `arrival`")
    if trigger == SCHEDULE:
        given = [key for key in ("min_interval", "max_wait") if key in raw]
        if given:
            raise UsageError(
                f"{where} has {given[0]} without `trigger: arrival`: add the trigger or "
                f"remove {given[0]}"
            )
        return ()
    if "schedule" in raw:
        raise UsageError(
            f"{where} has schedule {raw['schedule']!r} and `trigger: arrival`: remove the "
            "schedule (`max_wait: <duration>` starts a run when nothing arrived for that long)"
        )
    every = [duration_ms(str(raw.get("min_interval", "1 minute")))]
    if raw.get("max_wait") is not None:
        every.append(duration_ms(str(raw["max_wait"])))
    for key, ms in zip(("min_interval", "max_wait"), every, strict=False):
        if ms <= 0:
            raise UsageError(
                f"{where} has {key} {raw.get(key)!r}: give a {key} above 0 (e.g. `5 minutes`)"
            )
    return tuple(every)
