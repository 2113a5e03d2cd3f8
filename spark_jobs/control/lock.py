"""One writer per pipeline at a time: runs, backfills and rollbacks take the pipeline's lock.

An OS file lock (``flock``) on ``_ops/locks/<pipeline>.lock``: the kernel drops it when the
holding process dies, so a crashed run never holds it forever. The file also says who holds
it, for the error message. Local lakes only; on a URI lake there is no shared lock (yet).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from spark_jobs.model.errors import PipelineBusy
from spark_jobs.model.lake import Lake


def lock_path(lake: Lake) -> Path | None:
    return None if "://" in lake.home else Path(lake.locks) / f"{lake.spec.name}.lock"


def holder(lake: Lake) -> dict | None:
    """Who holds the lock now (None: nobody), without taking it."""
    path = lock_path(lake)
    if path is None or not path.exists():
        return None
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_info(handle)
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


def _read_info(handle) -> dict:
    """What the holder wrote into the lock file (empty if unreadable)."""
    handle.seek(0)
    try:
        return json.loads(handle.read() or "{}")
    except ValueError:
        return {}


def _describe(info: dict) -> str:
    since = time.strftime("%H:%M:%S UTC", time.gmtime(info["since"])) if info.get("since") else "?"
    who = f"pid {info.get('pid', '?')} on {info.get('host', '?')}"
    return f"{info.get('action', '?')} {info.get('run_id') or ''} ({who}, since {since})"


@contextmanager
def pipeline_lock(lake: Lake, action: str, run_id: str | None = None, wait_s: float = 0.0,
                  ready: Callable[[], str | None] | None = None, progress: Callable[[str], None] | None = None):
    """Hold the pipeline's lock for the block; :class:`PipelineBusy` after ``wait_s`` seconds.

    ``ready``, when given, is asked while holding the lock; a reason (not None) means "not
    yet": the lock is let go so others can make progress, and asked again until ``wait_s``.
    """
    path = lock_path(lake)
    deadline = time.monotonic() + max(wait_s, 0)
    if path is None:
        if ready is not None and (reason := ready()):
            raise PipelineBusy(f"{action} of {lake.spec.name} cannot start: {reason}")
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")
    told = None
    try:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                reason = ready() if ready is not None else None
                if reason is None:
                    break
                fcntl.flock(handle, fcntl.LOCK_UN)
                if time.monotonic() >= deadline:
                    raise PipelineBusy(f"{action} of {lake.spec.name} cannot start yet: {reason} "
                                       "(pass --wait SECONDS to wait for it)")
                if progress is not None and reason != told:
                    progress(f"{action} waits: {reason}")
                    told = reason
                time.sleep(2)
            except BlockingIOError:
                info = _read_info(handle)
                if time.monotonic() >= deadline:
                    raise PipelineBusy(
                        f"pipeline {lake.spec.name} is busy: {_describe(info)} holds {path}; "
                        f"wait for it to end (or pass --wait SECONDS)"
                    ) from None
                if progress is not None and told != "busy":  # once: a task log says why it waits
                    progress(f"{action} waits for the pipeline's lock: {_describe(info)} holds it")
                    told = "busy"
                time.sleep(0.5)
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"action": action, "run_id": run_id, "pid": os.getpid(),
                                 "host": socket.gethostname(), "since": time.time()}))
        handle.flush()
        yield
    finally:
        handle.close()  # closing the file releases the lock
