"""Sample events for a pipeline's landing folder: ``lakehouse generate``.

The loop is the same for every pipeline; what an event looks like is the pipeline's
:class:`Sample`, from ``<name>_sample.py`` beside its spec (plain Python:
``event(rng, time_ms) -> dict``, ``BAD_LINES``, optionally ``prepare(lake) -> path or None`` for
static inputs written once). A pipeline with several
sources whose rows belong together (payments of orders) defines instead
``landing_files(rng, start_ms, events, bad_fraction, late_fraction) -> SampleFiles``: one file's
text per ingest hop, written to each hop's own landing folder.

Files are written under a dot-prefixed name and renamed when complete, so a running stream
never reads half a file (Spark's file source ignores names starting with ``.`` or ``_``). For an
ingest hop that reads a Kafka topic, each file's lines are produced to the topic instead, one
record per line (:func:`spark_jobs.control.topics.produce`); the result names them
``kafka://<topic>``.
"""

from __future__ import annotations

import csv
import io
import json
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from spark_jobs.control import topics
from spark_jobs.control.companions import companion_module
from spark_jobs.logs.fs import filesystem, write_text
from spark_jobs.model.errors import UsageError
from spark_jobs.model.formats import CSV, FormatSpec
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import PipelineSpec

EVENTS_PER_SECOND = 100
LATE_BY_MS = 5 * 60 * 1000


@dataclass
class GenerateResult:
    """What ``generate`` wrote."""

    files: list[str]
    events: int
    bad_lines: int
    late_events: int
    first_event_time_ms: int | None
    last_event_time_ms: int | None
    campaigns_file: str | None


@dataclass
class SampleFiles:
    """What a multi-source sample's ``landing_files`` hook returns for one file index: each
    ingest hop's file (``{hop: (suffix, text)}``), how many events it made, how many of its
    lines are invalid and how many events late, and the event times (epoch ms) it wrote."""

    files: dict[str, tuple[str, str]]
    events: int
    bad: int = 0
    late: int = 0
    times: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Sample:
    """A pipeline's sample events: one event as a dict for a seeded generator and an event time,
    the invalid lines to mix in, and static inputs written before the first file; or a
    ``landing_files`` hook for several sources."""

    event: Callable[[random.Random, int], dict] | None
    bad_lines: tuple[str, ...]
    prepare: Callable[[Lake], str | None] = lambda lake: None
    landing_files: Callable[..., SampleFiles] | None = None


def sample_of(spec: PipelineSpec) -> Sample:
    """``<name>_sample.py`` beside the spec; a :class:`UsageError` naming the fix."""
    module = companion_module(spec, "_sample")
    if module is None:
        where = (
            spec.source.parent / f"{spec.name}_sample.py"
            if spec.source
            else f"{spec.name}_sample.py"
        )
        raise UsageError(
            f"pipeline {spec.name} has no sample data: add {where} with event(rng, "
            "time_ms) and BAD_LINES"
        )
    landing_files = getattr(module, "landing_files", None)
    if not callable(getattr(module, "event", None)) and not callable(landing_files):
        raise UsageError(
            f"{module.__file__}: define event(rng, time_ms) -> dict (one sample event), or "
            "landing_files(rng, start_ms, events, bad_fraction, late_fraction) for several sources"
        )
    return Sample(
        getattr(module, "event", None),
        tuple(getattr(module, "BAD_LINES", ())),
        getattr(module, "prepare", lambda lake: None),
        landing_files,
    )


def _fed_topics(lake: Lake) -> dict[str, str]:
    """Per topic-fed hop, the topic the sample produces to; refused for a hop that reads a pattern
    or Avro values."""
    for hop in lake.spec.hops:
        if hop.reads_topic and hop.kafka.topic is None:
            raise UsageError(
                f"hop {hop.name} reads {hop.kafka.label}: the sample cannot tell which of them to "
                "produce to; produce to them yourself"
            )
        if hop.reads_topic and hop.kafka.avro is not None:
            raise UsageError(
                f"hop {hop.name} reads Avro values and the sample writes text: produce Avro "
                "records yourself"
            )
    return {hop.name: hop.kafka.topic for hop in lake.spec.hops if hop.reads_topic}


def generate(
    lake: Lake,
    events: int,
    files: int = 1,
    seed: int | None = None,
    start_ms: int | None = None,
    bad_fraction: float = 0.0,
    late_fraction: float = 0.0,
) -> GenerateResult:
    """Write ``events`` lines spread over ``files`` new landing files (per source).

    Event times start at ``start_ms`` (default: now) and advance 10 ms per event. A
    ``bad_fraction`` of lines are invalid (one of :data:`BAD_LINES`), a ``late_fraction`` of
    events carry a time 5 minutes in the past.
    """
    sample = sample_of(lake.spec)
    if bad_fraction and not sample.bad_lines and sample.landing_files is None:
        raise UsageError(
            f"pipeline {lake.spec.name}'s sample has no BAD_LINES: add some, or "
            "leave out --bad-fraction"
        )
    rng = random.Random(seed)
    start = int(time.time() * 1000) if start_ms is None else start_ms
    prepared = sample.prepare(lake)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(start / 1000))
    tag = uuid.UUID(int=rng.getrandbits(128), version=4).hex[:8]
    per_file = [events // files + (1 if index < events % files else 0) for index in range(files)]
    folders = {name: lake.landing_of(lake.spec.hop(name)) for name in lake.spec.landings}
    fed = _fed_topics(lake)
    written, bad, late, times = [], 0, 0, []
    # One source: its events' file for the first ingest hop; invalid lines go on cycling through
    # BAD_LINES from file to file (the lambda reads ``bad`` when called).
    first = lake.spec.hop(next(iter([*folders, *fed])))
    make = sample.landing_files or (lambda *args: _event_file(sample, first, bad, *args))
    position = 0
    for index, count in enumerate(per_file):
        made = make(
            rng, start + position * (1000 // EVENTS_PER_SECOND), count, bad_fraction, late_fraction
        )
        position += count
        unknown = sorted(set(made.files) - set(folders) - set(fed))
        if unknown:
            raise UsageError(
                f"pipeline {lake.spec.name}'s sample writes files for {unknown[0]}, which is not "
                f"an ingest hop: use one of {', '.join([*folders, *fed])}"
            )
        for hop, (suffix, text) in made.files.items():
            if hop in fed:
                topics.produce(fed[hop], text.splitlines())
                written.append(f"kafka://{fed[hop]}")
                continue
            folder = folders[hop]
            filesystem(folder).makedirs(folder, exist_ok=True)
            path = f"{folder}/events-{stamp}-{tag}-{index:04d}{suffix}"
            fmt = lake.spec.hop(hop).format
            write_text(path, text, fmt.encoding if fmt else "utf-8")
            written.append(path)
        bad, late, times = bad + made.bad, late + made.late, times + made.times
    return GenerateResult(
        files=written,
        events=events,
        bad_lines=bad,
        late_events=late,
        first_event_time_ms=min(times) if times else None,
        last_event_time_ms=max(times) if times else None,
        campaigns_file=prepared,
    )


def _event_file(
    sample: Sample,
    hop,
    bad_before: int,
    rng: random.Random,
    start_ms: int,
    events: int,
    bad_fraction: float,
    late_fraction: float,
) -> SampleFiles:
    """One file of ``sample.event``'s events for the single ingest ``hop``: JSON lines, or a CSV
    file with a header when the hop reads CSV (:func:`csv_text`)."""
    entries, bad, late, times = [], 0, 0, []  # each an event (a dict) or an invalid line (text)
    for position in range(events):
        event_time = start_ms + position * (1000 // EVENTS_PER_SECOND)
        if rng.random() < bad_fraction:
            entries.append(sample.bad_lines[(bad_before + bad) % len(sample.bad_lines)])
            bad += 1
            continue
        if rng.random() < late_fraction:
            event_time -= LATE_BY_MS
            late += 1
        times.append(event_time)
        entries.append(sample.event(rng, event_time))
    if hop.format is not None and hop.format.name == CSV:
        return SampleFiles(
            {hop.name: (".csv", csv_text(hop.format, entries))}, events, bad, late, times
        )
    text = "".join(
        (json.dumps(entry, separators=(",", ":")) if isinstance(entry, dict) else entry) + "\n"
        for entry in entries
    )
    return SampleFiles({hop.name: (".json", text)}, events, bad, late, times)


def csv_text(fmt: FormatSpec, entries: list[dict | str]) -> str:
    """A CSV file in ``fmt``'s delimiter and quote: its header names the declared columns, then
    any other key the events have (in the order met); each event (a dict) is a row, a missing
    value an empty field; an invalid line (text) is written as it is, where it stood."""
    events = [entry for entry in entries if isinstance(entry, dict)]
    names = [
        *fmt.names,
        *(
            key
            for key in dict.fromkeys(key for event in events for key in event)
            if key not in fmt.names
        ),
    ]
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=fmt.delimiter, quotechar=fmt.quote, lineterminator="\n")
    if fmt.header:
        writer.writerow(names)
    for entry in entries:
        if isinstance(entry, dict):
            writer.writerow(["" if entry.get(name) is None else entry[name] for name in names])
        else:
            buffer.write(entry + "\n")
    return buffer.getvalue()
