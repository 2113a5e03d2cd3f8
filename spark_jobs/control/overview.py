"""What the Lakehouse page in Airflow shows (docs/guides/lakehouse-page.md), read from the same
plain files as ``lakehouse status`` (no JVM): per hop its last batch and run, freshness,
backlog, state size, rows per run, the last quality result and the rollback horizon; and per
hop the series its charts draw."""

from __future__ import annotations

import datetime as dt
import time

from spark_jobs.control import source_switch, topics
from spark_jobs.control.hop_state import HopState
from spark_jobs.control.rollback import lineage
from spark_jobs.control.status import (
    hop_status,
    last_maintenance,
    new_landing_files,
    pending_work,
    unread_upstream_versions,
)
from spark_jobs.control.suites import read_summary
from spark_jobs.logs.fs import filesystem
from spark_jobs.logs.ops import read_alerts, read_records
from spark_jobs.model.errors import LakehouseError
from spark_jobs.model.lake import Lake


def _epoch(text: str | None) -> float | None:
    """Seconds since the epoch of a ``YYYY-MM-DDTHH:MM:SS`` UTC time (a batch's commit time)."""
    if not text:
        return None
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp()


def _age(then: float | None, now: float) -> float | None:
    return None if then is None else round(max(now - then, 0.0), 1)


def _folder_bytes(path: str) -> int | None:
    fs = filesystem(path)
    if not fs.exists(path):
        return None
    return int(fs.du(path, total=True))


def landing_backlog(state: HopState) -> dict:
    """Landing files the ingest ``hop`` has not taken into a batch yet, and their bytes."""
    lake, hop = state.lake, state.hop
    unread = new_landing_files(state)
    fs = filesystem(lake.landing_of(hop))
    return {"files": len(unread), "bytes": sum(int(fs.size(path) or 0) for path in unread)}


def _topic_backlog(state: HopState) -> dict:
    """Records of the topic-fed ``hop``'s topic it has not read, per partition (or why unknown)."""
    hop = state.hop
    try:
        behind = topics.unread(state)
    except LakehouseError as error:
        return {"topic": hop.kafka.topics_read, "error": str(error)}
    return {
        "topic": hop.kafka.topics_read,
        "records": sum(behind.values()),
        "partitions": {f"{topic}/{partition}": n for (topic, partition), n in behind.items()},
    }


def _last_quality(lake: Lake, hop: str, records: list[dict]) -> dict | None:
    """The newest run's gate result (its record), with the suite's name from the result file."""
    for record in reversed(records):
        if record.get("quality"):
            gate = record["quality"]
            summary = read_summary(lake, record.get("run_id") or "", hop) or {}
            return {
                "suite": summary.get("suite"),
                "run_id": record.get("run_id"),
                **{key: gate.get(key) for key in ("gate", "rows", "failed", "warned", "data_docs")},
            }
    return None


def _run_row(record: dict) -> dict:
    return {
        key: record.get(key)
        for key in (
            "run_id",
            "mode",
            "status",
            "batch_ids",
            "rows_in",
            "rows_out",
            "rows_quarantined",
            "rows_dropped_by_rule",
            "rows_dropped_late",
            "rows_rescued",
            "rows_skipped",
            "rows_deleted",
            "live_keys",
            "duration_s",
            "started_at",
        )
    }


def hop_overview(lake: Lake, hop_name: str, now: float | None = None, runs: int = 10) -> dict:
    """One hop's figures for the pipeline page (``hop_status`` with ``detail`` plus freshness,
    backlog, state size and the last ``runs`` runs)."""
    now = time.time() if now is None else now
    hop = lake.spec.hop(hop_name)
    status = hop_status(lake, hop_name, detail=True)
    committed = [info for info in status["batch_log"] if info["committed"]]
    last = committed[-1] if committed else None
    watermark = (last or {}).get("watermark_ms")
    records = read_records(lake, hop.name)
    backlog = (
        {"landing": landing_backlog(HopState(lake, hop))}
        if hop.reads_landing
        else {"topic": _topic_backlog(HopState(lake, hop))}
        if hop.reads_topic
        else {
            "upstream_versions": [
                version
                for upstream in hop.upstreams
                for version in unread_upstream_versions(HopState(lake, hop), upstream)
            ]
        }
    )
    commit_age = _age(_epoch((last or {}).get("committed_at")), now)
    limit = lake.spec.freshness_s
    return {
        "hop": hop.name,
        "kind": hop.kind,
        "table": lake.table(hop),
        "upstream": ", ".join(hop.upstreams) or None,
        "last_batch": status["last_batch"],
        "last_committed_batch": status["last_committed_batch"],
        "pending_batch": status["pending_batch"],
        "freshness": {
            "last_commit_at": (last or {}).get("committed_at"),
            "last_commit_age_s": commit_age,
            "watermark_ms": watermark,
            "event_time_age_s": _age(watermark / 1000 if watermark else None, now),
            # The spec's freshness: stale when the newest commit is older (never
            # committed: not judged).
            "limit_s": limit,
            "stale": bool(limit is not None and commit_age is not None and commit_age > limit),
        },
        "backlog": backlog,
        "source_changed": source_switch.refusal(
            HopState(lake, hop)
        ),  # its runs refuse until it starts over
        "state_bytes": _folder_bytes(f"{lake.checkpoint(hop)}/state"),
        "table_versions": status["table_versions"],
        "rollback_horizon": status["rollback_horizon"],
        "rollback_window": status["rollback_window"],
        "feeds": status["feeds"],
        "last_run": status["last_run"],
        "runs": [_run_row(record) for record in records[-runs:]],
        "quality": _last_quality(lake, hop.name, records),
    }


def pipeline_overview(lake: Lake, now: float | None = None) -> dict:
    """Every hop's :func:`hop_overview`, and why each has work (the stream DAG's check)."""
    now = time.time() if now is None else now
    pending = pending_work(lake, strict=False)
    return {
        "pipeline": lake.spec.name,
        "lakehouse_home": lake.home,
        "schedule": lake.spec.schedule,
        "cadence": lake.spec.cadence,
        "freshness": lake.spec.freshness,
        "alerts": read_alerts(lake),
        "maintenance": last_maintenance(lake),
        "generated_at": now,
        "hops": [
            hop_overview(lake, name, now) | {"work": pending.get(name)}
            for name in lake.spec.hop_names
        ],
    }


def hop_series(lake: Lake, hop_name: str) -> dict:
    """What the hop page charts: rows/s per batch, event-time lag at each commit, and per run the
    quarantined share and the quality rules' pass rate."""
    hop = lake.spec.hop(hop_name)
    records = read_records(lake, hop.name)
    rates = [
        {
            "batch_id": entry["batch_id"],
            "rows": entry.get("rows"),
            "rows_per_second": entry.get("rows_per_second"),
        }
        for record in records
        for entry in record.get("progress") or []
    ]
    lag = []
    for info in lineage.hop_batches(HopState(lake, hop)):
        committed_at = _epoch(info.committed_at)
        if info.committed and committed_at and info.watermark_ms:
            lag.append(
                {
                    "batch_id": info.batch_id,
                    "committed_at": info.committed_at,
                    "lag_s": round(max(committed_at - info.watermark_ms / 1000, 0.0), 1),
                }
            )
    runs = []
    for record in records:
        # the run's gate result, if checked
        summary = read_summary(lake, record.get("run_id") or "", hop.name)
        rules = (summary or {}).get("rules") or []
        rows_in = int(record.get("rows_in") or 0)
        runs.append(
            {
                "run_id": record.get("run_id"),
                "mode": record.get("mode"),
                "quarantined_share": round(int(record.get("rows_quarantined") or 0) / rows_in, 4)
                if rows_in
                else None,
                "quality_pass_rate": round(
                    sum(1 for rule in rules if rule.get("passed")) / len(rules), 4
                )
                if rules
                else None,
            }
        )
    return {"hop": hop.name, "rows_per_second": rates, "lag": lag, "runs": runs}
