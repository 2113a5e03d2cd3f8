"""The rollback window as the model test computes it on its own (:mod:`testkit.model`).

The test spec declares ``retention.rollback`` (:data:`~testkit.model_lake.WINDOW_MS`) and the
sequence moves the platform's clock forward (``advance`` steps). A batch's time is its checkpoint
commit file's modification time. Per hop, the window begins at the last batch committed before
``now - window`` (-1: every batch is inside it), and no earlier than what Spark still keeps: the
oldest commit left in the checkpoint and the batch after it (``min_batches_to_retain`` purges
older ones; a rollback to the oldest needs the offsets and state version before it too). From
these two rules alone, without the platform's own ``horizon``:

- ``maintain`` may cut a hop's reach only up to the declared window's start;
- a rollback whose every hop's target is inside the window must not be refused.
"""

from __future__ import annotations

from spark_jobs.logs.fs import filesystem
from testkit.model_lake import WINDOW_MS


def _commit_times(home: str, hop: str) -> dict[int, int]:
    """Each committed batch of ``hop`` and its commit file's modification time (epoch ms)."""
    fs = filesystem(home)
    folder = f"{home}/checkpoints/ad_events/{hop}/commits"
    times = {}
    for path, info in fs.find(folder, detail=True).items() if fs.exists(folder) else []:
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if name.isdigit():
            stamp = info.get("mtime", info.get("LastModified"))
            times[int(name)] = int(
                (stamp.timestamp() if hasattr(stamp, "timestamp") else float(stamp)) * 1000
            )
    return times


def declared_start(home: str, hop: str, now_ms: int) -> int | None:
    """The last batch of ``hop`` committed before the declared window began (-1: none;
    None: no batch).
    """
    times = _commit_times(home, hop)
    if not times:
        return None
    # A second's slack: the platform reads commit times to the second.
    return max(
        (batch for batch, stamp in times.items() if stamp < now_ms - WINDOW_MS + 1000), default=-1
    )


def floor(home: str, hop: str, now_ms: int) -> int | None:
    """The oldest target of ``hop`` a rollback inside the window may ask for (None: no batch)."""
    start = declared_start(home, hop, now_ms)
    if start is None:
        return None
    kept = min(_commit_times(home, hop))
    return max(start, kept + 2 if kept > 0 else -1)


def cut_too_far(
    home: str, before: dict[str, int | None], after: dict[str, int | None], now_ms: int
) -> list[str]:
    """Hops whose reach ``maintain`` cut (``before`` -> ``after``, each the oldest reachable
    batch) past the declared window's start."""
    wrong = []
    for hop, was in before.items():
        start = declared_start(home, hop, now_ms)
        if was is None or start is None:
            continue
        if after[hop] is None or after[hop] > max(was, start):
            wrong.append(
                f"{hop}: reached back to batch {was}, now {after[hop]}; the declared window starts "
                f"after batch {start}"
            )
    return wrong


def refused_inside(home: str, plan, now_ms: int) -> list[str]:
    """The steps of a rollback ``plan`` refused although their target is inside the window."""
    wrong = []
    for step in plan.hops:
        oldest = floor(home, step.hop, now_ms)
        if step.refused and oldest is not None and step.target_batch >= oldest:
            wrong.append(
                f"{step.hop} to batch {step.target_batch} (the window reaches batch {oldest}): "
                f"{'; '.join(step.refused)}"
            )
    return wrong
