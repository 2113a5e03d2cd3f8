"""What a hop reads and writes, named as OpenLineage names datasets, for the Airflow side's
lineage (``lakehouse_airflow.lineage``): plain values, read without a JVM.

Names follow OpenLineage's dataset naming: a local path is namespace ``file`` and the absolute
path; an object in S3 is namespace ``s3://<bucket>`` and its key; a Kafka topic is namespace
``kafka://<first bootstrap server>`` and the topic's name (a ``topic_pattern`` as the pattern).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import HopSpec


@dataclass(frozen=True)
class LineageDataset:
    """One dataset of a hop: where (``namespace``, ``name``), what it is to the hop (``role``:
    ``landing``, ``topic``, ``table``, ``quarantine``, ``deleted_keys``) and, for a table that
    exists, its columns as (name, type)."""

    namespace: str
    name: str
    role: str
    fields: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class HopLineage:
    """A hop's inputs and outputs, and what its run wrote and its gate found (once it ran)."""

    pipeline: str
    hop: str
    inputs: tuple[LineageDataset, ...]
    outputs: tuple[LineageDataset, ...]
    rows_out: int | None = None
    gate: dict | None = None
    rules: list[dict] = field(default_factory=list)


def dataset_name(path: str) -> tuple[str, str]:
    """OpenLineage's (namespace, name) of a path or URI."""
    if "://" not in path:
        return "file", path
    scheme, rest = path.split("://", 1)
    bucket, _, key = rest.partition("/")
    if scheme in ("s3", "s3a", "s3n"):
        scheme = "s3"
    return f"{scheme}://{bucket}", key


def _topic(hop: HopSpec) -> LineageDataset:
    from spark_jobs.model import settings

    servers = (settings.KAFKA_BOOTSTRAP_SERVERS.value() or "").split(",")[0].strip()
    kafka = hop.kafka
    name = (kafka.topic or kafka.topic_pattern or "") if kafka else ""
    return LineageDataset(f"kafka://{servers or 'unknown'}", name, "topic")


def _fields(table: str) -> tuple[tuple[str, str], ...]:
    """The table's columns, read by delta-rs (none when there is no table yet)."""
    from spark_jobs.logs import table_rows

    try:
        return tuple(table_rows.fields_of(table))
    except Exception:  # noqa: BLE001 - no table yet (a first run's start): no columns to say
        return ()


def _table(path: str, role: str, with_fields: bool) -> LineageDataset:
    namespace, name = dataset_name(path)
    return LineageDataset(namespace, name, role, _fields(path) if with_fields else ())


def hop_lineage(pipeline: str, hop: str, run_id: str | None = None) -> HopLineage:
    """The hop's inputs and outputs; with ``run_id`` (a run that ended), the outputs' columns,
    the rows the run wrote and its gate's result."""
    from spark_jobs.logs.ops import read_record

    lake = Lake.named(pipeline)
    spec = lake.spec.hop(hop)
    ended = run_id is not None
    if spec.reads_topic:
        inputs = [_topic(spec)]
    elif spec.ingests:
        inputs = [_table(lake.landing_of(spec), "landing", False)]
    else:
        inputs = [_table(lake.table(lake.spec.hop(up)), "table", ended) for up in spec.upstreams]
    roles = {lake.table(spec): "table", lake.quarantine(spec): "quarantine"}
    roles[lake.deleted_keys(spec)] = "deleted_keys"
    outputs = [_table(path, roles[path], ended) for path in lake.tables_of(spec)]
    record = read_record(lake, run_id, hop) if ended else None
    quality = (record or {}).get("quality")
    return HopLineage(
        pipeline,
        hop,
        tuple(inputs),
        tuple(outputs),
        rows_out=(record or {}).get("rows_out"),
        gate=quality,
        rules=_rules(lake, run_id, hop) if quality else [],
    )


def _rules(lake: Lake, run_id: str | None, hop: str) -> list[dict]:
    """Each rule of the gate's check of the run: its name, policy, whether it held and how many
    rows failed it."""
    from spark_jobs.control.suites import results_dir
    from spark_jobs.logs.fs import read_json

    summary = read_json(f"{results_dir(lake)}/{run_id}.{hop}.json") or {}
    return [
        {key: rule.get(key) for key in ("rule", "policy", "passed", "failing")}
        for rule in summary.get("rules") or []
    ]
