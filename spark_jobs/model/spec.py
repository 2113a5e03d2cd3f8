"""Pipeline specs: the YAML files in the pipelines folders (``$LAKEHOUSE_PIPELINES``), read by
Spark and Airflow alike.

Plain data only; no Spark here, so DAG parsing stays fast.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from spark_jobs.model.changes import ChangesSpec, hop_changes
from spark_jobs.model.errors import UsageError
from spark_jobs.model.formats import FormatSpec, hop_format
from spark_jobs.model.kafka import TopicSpec
from spark_jobs.model.kinds import KINDS, TOPIC, HopKind, kind_named
from spark_jobs.model.retention import batches_to_retain
from spark_jobs.model.settings import pipelines_dirs
from spark_jobs.model.spec_checks import (
    ARRIVAL,
    check_join,
    check_topic,
    check_trigger,
    check_zorder,
)
from spark_jobs.model.spec_keys import (
    HOP_KEYS,
    PIPELINE_KEYS,
    PIPELINE_NAME,
    RETENTION_KEYS,
    check_keys,
)
from spark_jobs.model.summary import hop_measures
from spark_jobs.model.times import duration_ms


@dataclass(frozen=True)
class HopSpec:
    """One streaming query of a pipeline, with its own checkpoint and output table."""

    name: str
    kind: str
    table: str
    time_column: str
    # The hops whose tables it reads: one for append and aggregate, two or more for a join
    # (in the order its transform joins them), none for an ingest hop.
    upstreams: tuple[str, ...] = ()
    quarantine: str | None = None
    partition_by: tuple[str, ...] = ()
    # The columns ``lakehouse maintain`` Z-orders the table's files by when it compacts them.
    zorder_by: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    # An append or join hop whose table holds each of these columns' values once (a transform
    # that drops resends): a stream's batch leaves out the rows whose key the table already
    # holds, which only a backfill can have written (the stream's own state drops the others).
    # A key's rows share their time_column value. Not part of the query: no fingerprint change.
    unique: tuple[str, ...] = ()
    # An ingest hop's landing folder (relative to LAKEHOUSE_HOME); None: the pipeline's ``landing``.
    landing: str | None = None
    # An ingest hop that reads Kafka topics instead (``topic`` or ``topic_pattern`` and the keys
    # that go with them: spark_jobs/model/kafka.py); None: it reads its landing folder.
    kafka: TopicSpec | None = None
    # How an ingest hop's rows are parsed when the platform parses them (``format: csv|json``;
    # spark_jobs/model/formats.py); None: each line goes to the hop's transform as it is.
    format: FormatSpec | None = None
    # A join's bound: how far apart in event time two rows it joins can be (``1 hour``); a
    # backfill reads its upstreams this much around its range.
    within: str | None = None
    # The hop's own event time (None: the pipeline's): its transform's ``spec.window`` and
    # ``spec.allowed_lateness``, and the window its MERGE recomputes and backfills by.
    window: str | None = None
    allowed_lateness: str | None = None
    # A changes hop's rules (sequence, deletes, SCD type): spark_jobs/model/changes.py.
    changes: ChangesSpec | None = None
    # A summary hop's measures, ``(name, Spark SQL aggregate)`` in order
    # (spark_jobs/model/summary.py).
    measures: tuple[tuple[str, str], ...] = ()

    @property
    def upstream(self) -> str | None:
        """The one hop whose table this hop reads; None for an ingest hop and for a join (see
        :attr:`upstreams`)."""
        return self.upstreams[0] if len(self.upstreams) == 1 else None

    @property
    def table_keys(self) -> tuple[str, ...]:
        """The columns that name one row of the hop's table when a MERGE keeps it: its ``keys``,
        and for a type 2 history each version's first sequence too."""
        if self.changes is not None and self.changes.scd == 2:
            return (*self.keys, self.changes.validity[0])
        return self.keys

    @property
    def transform_optional(self) -> bool:
        """The pipeline module may leave the hop's transform out: the engine does its work (its
        kind's), or the platform parses its rows (a ``format``)."""
        return self.kind_of.transform_optional or self.format is not None

    @property
    def within_ms(self) -> int:
        return duration_ms(self.within) if self.within else 0

    @property
    def kind_of(self) -> HopKind:
        """What the hop's kind reads and can do (:mod:`spark_jobs.model.kinds`)."""
        return kind_named(self.kind)

    @property
    def ingests(self) -> bool:
        """True when the hop brings rows into the lake (parsed, stamped with lineage, the rest
        quarantined) from landing files or a topic, not from an upstream table."""
        return self.kind_of.reads_landing

    @property
    def reads_landing(self) -> bool:
        """True when the hop reads landing files (through a file source, whose log
        lists each file).
        """
        return self.ingests and not self.reads_topic

    @property
    def reads_topic(self) -> bool:
        """True when the hop reads Kafka topics (its checkpoint logs each batch's offsets)."""
        return self.ingests and self.kafka is not None

    @property
    def reads(self) -> str:
        """What the hop reads, the key of its Source: its kind's (``landing``, ``table``,
        ``tables``), or ``topic``."""
        return TOPIC if self.reads_topic else self.kind_of.reads


@dataclass(frozen=True)
class PipelineSpec:
    """A pipeline: landing folders, hops in order, and the knobs of its streaming queries.

    Hops form a graph: each ingest hop reads a landing folder (its own ``landing`` or the
    pipeline's), every other hop the table of its ``upstream``, listed above it. Several ingest
    hops, and several hops below one, run side by side in the DAGs.
    """

    name: str
    landing: str | None
    hops: tuple[HopSpec, ...]
    # The pipeline's own static inputs by name (paths relative to LAKEHOUSE_HOME), read by its
    # pipeline module: ad_events' campaigns table, for example.
    inputs: dict[str, str] = field(default_factory=dict, compare=False)
    description: str = ""
    schedule: str = "*/5 * * * *"
    # What starts the stream DAG: its cron ``schedule``, or (``arrival``) what arrives in the
    # sources its ingest hops read, at most one start per ``min_interval``; ``max_wait``: a
    # fallback tick (docs/guides/arrival.md).
    trigger: str = "schedule"
    min_interval: str = "1 minute"
    max_wait: str | None = None
    backfill_start: str = "2026-01-01"
    shuffle_partitions: int = 4
    window: str = "10 seconds"
    allowed_lateness: str = "1 minute"
    # How far back the checkpoint logs reach (Spark's minBatchesToRetain), and how often the
    # file source log is compacted: both bound what a rollback can undo (docs/concepts/rollback.md).
    min_batches_to_retain: int = 100
    source_log_compact_interval: int = 10
    compact_min_files: int = 8  # `lakehouse maintain` compacts a table with this many files or more
    # How old a hop's newest commit may get (``15 minutes``): older is stale, red on the
    # Lakehouse page, and a stream DAG run not done this long after it was queued misses its
    # deadline alert. None: no limit.
    freshness: str | None = None
    # What the pipeline keeps (``{"rollback": "7 days"}``): spark_jobs/model/retention.py.
    retention: dict = field(default_factory=dict, compare=False)
    # The Airflow notifiers of its alerts (``[{"class": ..., ...}]``): lakehouse_airflow/alerts.py.
    notify: list = field(default_factory=list, compare=False)
    source: Path | None = field(default=None, compare=False)

    @property
    def on_arrival(self) -> bool:
        return self.trigger == ARRIVAL

    @property
    def cadence(self) -> str:
        """When the stream DAG runs, in words: ``every <cron>``, or on arrival with its limits."""
        if not self.on_arrival:
            return f"every {self.schedule}"
        fallback = f", and every {self.max_wait} when nothing arrived" if self.max_wait else ""
        return f"on arrival, at most once per {self.min_interval}{fallback}"

    @property
    def min_interval_s(self) -> float:
        return duration_ms(self.min_interval) / 1000

    @property
    def max_wait_s(self) -> float | None:
        return duration_ms(self.max_wait) / 1000 if self.max_wait else None

    @property
    def freshness_s(self) -> float | None:
        return duration_ms(self.freshness) / 1000 if self.freshness else None

    def for_hop(self, name: str) -> PipelineSpec:
        """The spec as hop ``name`` sees it: its own ``window`` and ``allowed_lateness`` where it
        sets them (what its transform reads as ``spec.window`` and ``spec.allowed_lateness``)."""
        hop = self.hop(name)
        return replace(
            self,
            window=hop.window or self.window,
            allowed_lateness=hop.allowed_lateness or self.allowed_lateness,
        )

    @property
    def hop_names(self) -> tuple[str, ...]:
        return tuple(hop.name for hop in self.hops)

    def hop(self, name: str) -> HopSpec:
        """The hop called ``name``; a :class:`UsageError` naming the valid ones otherwise."""
        for hop in self.hops:
            if hop.name == name:
                return hop
        raise UsageError(
            f"unknown hop {name!r} for pipeline {self.name!r}: use one of "
            f"{', '.join(self.hop_names)} or all"
        )

    def select_hops(self, name: str | None) -> tuple[HopSpec, ...]:
        """``all`` (or None) gives every hop in order, a hop name gives that hop."""
        if name in (None, "all"):
            return self.hops
        return (self.hop(name),)

    def input(self, name: str) -> str:
        """The path (relative to the lake's home) of the static input ``name``."""
        if name not in self.inputs:
            raise UsageError(
                f"{self.source or self.name}: pipeline {self.name} needs the input {name!r}: add "
                f"`inputs: {{{name}: <path under LAKEHOUSE_HOME>}}` to its spec"
            )
        return self.inputs[name]

    def landing_of(self, hop: HopSpec) -> str:
        """The landing folder (relative to the lake's home) the ingest ``hop`` reads."""
        return hop.landing or self.landing

    @property
    def landings(self) -> dict[str, str]:
        """Each ingest hop's landing folder, by hop name, in order."""
        return {hop.name: self.landing_of(hop) for hop in self.hops if hop.reads_landing}

    def feeds(self, name: str) -> tuple[HopSpec, ...]:
        """The hops that read ``name``'s table directly."""
        return tuple(hop for hop in self.hops if name in hop.upstreams)

    @property
    def sink(self) -> HopSpec | None:
        """The hop every other hop feeds, directly or through others (a chain's last hop), or
        None when the graph has no such hop (two branches that never meet)."""
        last = self.hops[-1]
        reaching = [hop for hop in self.hops[:-1] if last not in self.downstream_of(hop.name)]
        return None if reaching else last

    def downstream_of(self, name: str) -> tuple[HopSpec, ...]:
        """Hops that read ``name``'s table, directly or through others, in order."""
        below: list[HopSpec] = []
        reached = {name}
        for hop in self.hops:
            if reached.intersection(hop.upstreams):
                below.append(hop)
                reached.add(hop.name)
        return tuple(below)


def _hop_from_dict(raw: dict, source: Path) -> HopSpec:
    missing = [key.name for key in HOP_KEYS if key.required and key.name not in raw]
    if missing:
        raise UsageError(
            f"{source}: hop {raw.get('name', '?')} lacks {', '.join(missing)}: add it to the spec"
        )
    kind = kind_named(raw["kind"], f"{source}: hop {raw['name']} has ")
    check_keys(raw, HOP_KEYS, f"{source}: hop {raw['name']}")
    if raw.get("unique") and not kind.takes_unique:
        takers = " and ".join(name for name, kind in KINDS.items() if kind.takes_unique)
        raise UsageError(
            f"{source}: hop {raw['name']} has unique: {raw['unique']!r}, which only {takers} hops "
            "take: remove it (an aggregate's keys are unique already)"
        )
    upstream = raw.get("upstream")
    return HopSpec(
        name=raw["name"],
        kind=raw["kind"],
        table=raw["table"],
        time_column=raw["time_column"],
        upstreams=()
        if upstream is None
        else (upstream,)
        if isinstance(upstream, str)
        else tuple(upstream),
        within=raw.get("within"),
        quarantine=raw.get("quarantine"),
        partition_by=tuple(raw.get("partition_by") or ()),
        zorder_by=tuple(raw.get("zorder_by") or ()),
        keys=tuple(raw.get("keys") or ()),
        unique=tuple(raw.get("unique") or ()),
        landing=raw.get("landing"),
        kafka=TopicSpec.from_raw(raw, source, f"{source}: hop {raw['name']}"),
        window=raw.get("window"),
        allowed_lateness=raw.get("allowed_lateness"),
        changes=hop_changes(raw, kind, f"{source}: hop {raw['name']}"),
        measures=hop_measures(raw, kind, f"{source}: hop {raw['name']}"),
        format=hop_format(raw, kind, f"{source}: hop {raw['name']}"),
    )


def _check_graph(hops: tuple[HopSpec, ...], path: Path, landing: str | None) -> None:
    """Hop names are unique; a hop that reads tables names hops listed above it as its
    ``upstream`` (hops run top to bottom, so no cycle can be written): one, or for a join two or
    more; an ingest hop names none, and has a landing folder (its own or the pipeline's); only
    an ingest hop has one."""
    names = [hop.name for hop in hops]
    for index, hop in enumerate(hops):
        if hop.name in names[:index]:
            raise UsageError(f"{path}: two hops are called {hop.name!r}: rename one")
        _check_reads(hop, path, landing)
        check_zorder(hop, path)
        if hop.kind_of.reads_several or len(hop.upstreams) > 1:
            check_join(hop, path)
        for upstream in hop.upstreams:
            if upstream not in names[:index]:
                where = (
                    "below it: hops run top to bottom, so list it above"
                    if upstream in names
                    else "not a hop of this spec"
                )
                raise UsageError(
                    f"{path}: hop {hop.name} has upstream {upstream!r}, which is {where}"
                )
            above = hops[names.index(upstream)].kind_of
            if hop.kind_of.reads_changes:
                if hops[names.index(upstream)].changes is None:
                    raise UsageError(
                        f"{path}: hop {hop.name} (kind {hop.kind}) reads {upstream!r}, which is "
                        f"no changes hop: a {hop.kind} hop reads a changes hop's change data feed"
                    )
            elif not above.feeds_streams:
                raise UsageError(
                    f"{path}: hop {hop.name} reads {upstream!r}, a {above.name} hop, whose batches "
                    "rewrite rows in place: a summary hop can stream it, or read it in a "
                    "transform as a static input (STATIC_INPUTS)"
                )


def _check_reads(hop: HopSpec, path: Path, landing: str | None) -> None:
    """An ingest hop has a landing folder or a topic and no upstream; any other hop an upstream
    and neither."""
    if hop.reads_topic:
        check_topic(hop, path)
        return
    if hop.landing is not None and not hop.reads_landing:
        raise UsageError(
            f"{path}: hop {hop.name} (kind {hop.kind}) reads a table, not a landing folder: "
            "remove its landing key"
        )
    if hop.reads_landing and not (hop.landing or landing):
        raise UsageError(
            f"{path}: hop {hop.name} (kind {hop.kind}) has no landing folder: add `landing: <path "
            "under LAKEHOUSE_HOME>` to the hop or to the pipeline"
        )
    if hop.reads_landing and hop.upstreams:
        raise UsageError(
            f"{path}: hop {hop.name} (kind {hop.kind}) reads the landing files, not "
            f"{', '.join(hop.upstreams)!r}: remove its upstream key"
        )
    if not hop.reads_landing and not hop.upstreams:
        raise UsageError(
            f"{path}: hop {hop.name} (kind {hop.kind}) reads a table: add "
            "`upstream: <a hop above it>`"
        )


# The pipeline keys that are PipelineSpec fields as they are written (the rest are read below).
_KNOBS = {key.name for key in PIPELINE_KEYS} - {"name", "hops", "landing", "inputs", "campaigns"}


# Specs already loaded, by path: what they were loaded from and the spec. Long-lived processes
# (the triggerer's watchers, the DAG processor) read the same files again every few seconds.
_LOADED: dict[Path, tuple[tuple, PipelineSpec]] = {}


def _loaded_from(path: Path, text: str) -> tuple:
    """What a spec is loaded from: its text, and each file beside it (an Avro schema it names)
    by name, size and modification time."""
    beside = []
    for sibling in sorted(path.parent.iterdir()):
        if sibling != path and sibling.is_file():
            stat = sibling.stat()
            beside.append((sibling.name, stat.st_size, stat.st_mtime_ns))
    return text, tuple(beside)


def load_spec(path: Path) -> PipelineSpec:
    """Read one spec file; a :class:`UsageError` naming the file and the fix when it is not one.
    A file read before, unchanged and with the files beside it unchanged, gives the same spec
    without parsing it again."""
    text = path.read_text()
    key = _loaded_from(path, text)
    known = _LOADED.get(path)
    if known is not None and known[0] == key:
        return known[1]
    spec = _parse_spec(path, text)
    _LOADED[path] = (key, spec)
    return spec


def _parse_spec(path: Path, text: str) -> PipelineSpec:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise UsageError(
            f"{path}: not valid YAML ({str(error).splitlines()[0]}): fix the file"
        ) from None
    if not isinstance(raw, dict) or "name" not in raw or not raw.get("hops"):
        raise UsageError(f"{path}: not a pipeline spec (needs name and hops)")
    check_keys(raw, PIPELINE_KEYS, f"{path}: the pipeline")
    check_keys(raw.get("retention") or {}, RETENTION_KEYS, f"{path}: retention")
    if not PIPELINE_NAME.fullmatch(raw["name"]):
        raise UsageError(
            f"{path}: the pipeline's name {raw['name']!r} is not allowed: use lower-case letters, "
            "digits and _, starting with a letter (it names modules, tables and DAG ids)"
        )
    if not all(isinstance(hop, dict) for hop in raw["hops"]):
        raise UsageError(
            f"{path}: hops must be a list of mappings (name, kind, table, time_column)"
        )
    hops = tuple(_hop_from_dict(hop, path) for hop in raw["hops"])
    _check_graph(hops, path, raw.get("landing"))
    inputs = dict(raw.get("inputs") or {})
    # specs written before `inputs:` named the campaigns folder at the top level
    if "campaigns" in raw:
        inputs.setdefault("campaigns", raw["campaigns"])
    knobs = {
        key: str(raw[key]) if key == "backfill_start" else raw[key] for key in _KNOBS if key in raw
    }
    every_ms = check_trigger(raw, f"{path}: the pipeline")
    retained = batches_to_retain(
        raw, raw.get("schedule", PipelineSpec.schedule), f"{path}: the pipeline", every_ms
    )
    if retained is not None:
        knobs["min_batches_to_retain"] = retained
    return PipelineSpec(
        name=raw["name"], landing=raw.get("landing"), hops=hops, inputs=inputs, source=path, **knobs
    )


def spec_files(folders: tuple[Path, ...] | None = None) -> list[Path]:
    """The spec files of the pipelines folders: each pipeline folder's spec named after it
    (``orders/orders.yaml``, as ``lakehouse new`` writes), and specs lying in a folder itself."""
    found = []
    for folder in folders or pipelines_dirs():
        found += sorted(folder.glob("*.yaml"))
        found += sorted(path for path in folder.glob("*/*.yaml") if path.stem == path.parent.name)
    return found


def scan_specs(directory: Path | None = None) -> tuple[list[PipelineSpec], dict[str, str]]:
    """Every spec in the pipelines folders (or ``directory``) that loads, sorted by name, and
    the problem of each file that does not (by path): one broken spec never hides the others."""
    specs: dict[str, PipelineSpec] = {}
    broken: dict[str, str] = {}
    for path in spec_files((directory,) if directory else None):
        try:
            spec = load_spec(path)
        except UsageError as error:
            broken[str(path)] = str(error)
            continue
        if spec.name in specs:
            broken[str(path)] = (
                f"{path}: pipeline {spec.name!r} is also defined in "
                f"{specs[spec.name].source}: rename one"
            )
            continue
        specs[spec.name] = spec
    return sorted(specs.values(), key=lambda spec: spec.name), broken


def list_specs(directory: Path | None = None) -> list[PipelineSpec]:
    """Every spec in the pipelines folder that loads, sorted by name (see :func:`scan_specs`)."""
    return scan_specs(directory)[0]


def get_spec(name: str, directory: Path | None = None) -> PipelineSpec:
    """The spec called ``name``; a :class:`UsageError` with its file's problem, or listing
    the known ones.
    """
    specs, broken = scan_specs(directory)
    for spec in specs:
        if spec.name == name:
            return spec
    for path, problem in broken.items():
        if Path(path).stem == name:
            raise UsageError(problem)
    known = ", ".join(spec.name for spec in specs) or "none"
    unreadable = (
        f"; specs that do not load: {', '.join(Path(path).name for path in broken)}"
        if broken
        else ""
    )
    where = ", ".join(str(folder) for folder in ((directory,) if directory else pipelines_dirs()))
    raise UsageError(
        f"unknown pipeline {name!r}: known pipelines are {known} (specs in {where})" + unreadable
    )
