"""Ranges a run recomputes after its stream, so that a join loses no pair to a backfill
(docs/concepts/run-and-backfill.md: "A join after a backfill"). Plain files only (no JVM): run
records and the checkpoint's offsets.

A stream below bronze reads streamed rows only, and skips commits that rewrite files: the rows a
backfill wrote reach the hops below through their own backfill. For a row-by-row hop that is
enough, but a join pairs rows. A row the streams bring *after* a backfill pairs, in the join's
stream, only with streamed rows; its partner that the backfill wrote is never paired (shop's
model, seeds 45 and 47: orders of 03:xx backfilled before any stream read them, their payments
of 04:xx streamed, the pairs missing). So a run repairs:

- a ``join`` hop owes each range backfilled at a hop above it, widened by its ``within``, when
  one of its stream batches ran after that backfill, and no backfill of the join since that
  batch covers it; only from the batch's watermark less ``within`` on (the batch drops rows
  older than its watermark, so it pairs none older than that).
- a hop below a hop that repaired owes that repair's range, until a backfill of its own since
  the repair covers it (its stream skips the repair's rewrite commit).

The repair is a backfill of the range (``replaceWhere`` from the upstream tables, which hold
every row): idempotent, recorded with ``repair`` set.
"""

from __future__ import annotations

from spark_jobs.control.hop_state import HopState
from spark_jobs.logs import checkpoint_log
from spark_jobs.logs.ops import read_records
from spark_jobs.model.times import merged_spans, parse_time


def backfilled(record: dict) -> tuple[int, int] | None:
    """The ``[start, end)`` span (epoch ms) a run record's succeeded backfill wrote, else None."""
    if (
        record.get("mode") != "backfill"
        or record.get("status") != "succeeded"
        or not record.get("range_start")
    ):
        return None
    return parse_time(record["range_start"], "start"), parse_time(record["range_end"], "end")


def widened(span: tuple[int, int], margin_ms: int) -> tuple[int, int]:
    """``span`` with ``margin_ms`` more on each side: what a join pairs a span's rows with."""
    return span[0] - margin_ms, span[1] + margin_ms


def _covered(span: tuple[int, int], after_s: float, backfills: list[dict]) -> bool:
    """Whether a backfill of the hop that started after ``after_s`` covers ``span``."""
    return any(
        record["started_at"] > after_s
        and (bounds := backfilled(record))
        and bounds[0] <= span[0]
        and span[1] <= bounds[1]
        for record in backfills
    )


def _batches(state: HopState) -> list[tuple[float, int]]:
    """(start time in seconds, watermark in ms) of each committed batch the checkpoint holds."""
    checkpoint = state.checkpoint
    found = []
    for batch_id in checkpoint_log.commit_batch_ids(checkpoint):
        try:
            offsets = checkpoint_log.read_offsets(checkpoint, batch_id)
        except (FileNotFoundError, ValueError):
            continue
        found.append((offsets.timestamp_ms / 1000, offsets.watermark_ms))
    return found


def owed(state: HopState) -> list[tuple[int, int]]:
    """The ranges ``hop``'s run recomputes after its stream, merged, oldest first."""
    lake, hop = state.lake, state.hop
    starts = [each for each in lake.spec.hops if each.kind_of.repairs_after_backfill]
    if hop.ingests or not any(
        start == hop or hop in lake.spec.downstream_of(start.name) for start in starts
    ):
        return []  # repairs start at a join: a hop neither a join nor below one owes none
    records = read_records(lake)
    mine = [record for record in records if record.get("hop") == hop.name]
    spans: list[tuple[int, int]] = []
    if hop.kind_of.repairs_after_backfill:
        above = {each.name for each in lake.spec.hops if hop in lake.spec.downstream_of(each.name)}
        batches = _batches(state)
        for record in records:
            bounds = backfilled(record) if record.get("hop") in above else None
            if bounds is None:
                continue
            low, high = widened(bounds, hop.within_ms)
            for started, watermark in batches:
                # The batch's rows are not older than its watermark, so the pairs it could make
                # with the range are not older than the watermark less `within`.
                span = (max(low, watermark - hop.within_ms), high)
                if (
                    started > record["ended_at"]
                    and span[0] < span[1]
                    and not _covered(span, started, mine)
                ):
                    spans.append(span)
    for record in records:
        if (
            record.get("repair")
            and record.get("hop") in hop.upstreams
            and (bounds := backfilled(record))
        ):
            if not _covered(bounds, record["ended_at"], mine):
                spans.append(bounds)
    return merged_spans(spans)
