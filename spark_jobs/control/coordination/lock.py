"""One writer per pipeline at a time: runs, backfills and rollbacks take the pipeline's lock.

On a local lake, an OS file lock (``flock``) on ``_ops/locks/<pipeline>.lock``: the kernel drops
it when the holding process dies, so a crashed run never holds it forever. The file also says who
holds it, for the error message. On an object-store lake (``s3://``), where no machine sees
another's ``flock``, a lease object ``_ops/locks/<pipeline>.lease`` written with conditional
writes (:mod:`spark_jobs.control.coordination.lease`): it expires when its holder stops renewing it.
Both refuse, wait and name the holder the same way.

The block holding the lock gets a **fence**: a callable the writers call before each commit (a Delta
write, a rollback step). It never refuses for ``flock``, which a live process cannot lose; for a
lease it raises :class:`~spark_jobs.control.coordination.lease.LeaseLost` once the lease expired or
was taken over, so a job that was paused or cut off from the store writes nothing more.
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

from spark_jobs.control.coordination.lease import Lease
from spark_jobs.model.errors import PipelineBusy
from spark_jobs.model.lake import Lake


def lock_path(lake: Lake) -> Path | None:
    return None if "://" in lake.home else Path(lake.locks) / f"{lake.spec.name}.lock"


def lease_path(lake: Lake) -> str:
    return f"{lake.locks}/{lake.spec.name}.lease"


def holder(lake: Lake) -> dict | None:
    """Who holds the lock now (None: nobody), without taking it."""
    path = lock_path(lake)
    if path is None:
        return Lease(lease_path(lake)).holder()
    if not path.exists():
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


class _FileLock:
    """The local lake's ``flock``: taken and let go on one open file, closed at the end."""

    def __init__(self, path: Path, details: dict):
        self.where, self.details = path, details
        path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = open(path, "a+")

    def try_take(self) -> dict | None:
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_info(self.handle)
        self.handle.seek(0)
        self.handle.truncate()
        self.handle.write(
            json.dumps(
                {
                    **self.details,
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "since": time.time(),
                }
            )
        )
        self.handle.flush()
        return None

    def let_go(self) -> None:
        fcntl.flock(self.handle, fcntl.LOCK_UN)

    def check(self) -> None:
        """The kernel keeps an ``flock`` for as long as its process lives: nothing to check."""

    def close(self) -> None:
        self.handle.close()  # closing the file releases the lock


class _LeaseLock:
    """The object-store lake's lease (renewed while held, deleted at the end)."""

    def __init__(self, path: str, details: dict):
        self.where, self.details = path, details
        self.lease = Lease(path)

    def try_take(self) -> dict | None:
        return self.lease.try_take(self.details)

    def let_go(self) -> None:
        self.lease.release()

    def check(self) -> None:
        self.lease.check()

    def close(self) -> None:
        self.lease.release()


def _take(
    lock,
    lake: Lake,
    action: str,
    wait_s: float,
    ready: Callable[[], str | None] | None,
    progress: Callable[[str], None] | None,
) -> None:
    """Take ``lock`` (and have ``ready`` agree) within ``wait_s``, or :class:`PipelineBusy`."""
    deadline = time.monotonic() + max(wait_s, 0)
    told = None
    while True:
        holding = lock.try_take()
        if holding is None:
            reason = ready() if ready is not None else None
            if reason is None:
                return
            lock.let_go()
            if time.monotonic() >= deadline:
                raise PipelineBusy(
                    f"{action} of {lake.spec.name} cannot start yet: {reason} "
                    "(pass --wait SECONDS to wait for it)"
                )
            if progress is not None and reason != told:
                progress(f"{action} waits: {reason}")
                told = reason
            time.sleep(2)
            continue
        if time.monotonic() >= deadline:
            raise PipelineBusy(
                f"pipeline {lake.spec.name} is busy: {_describe(holding)} holds {lock.where}; "
                "wait for it to end (or pass --wait SECONDS)"
            )
        if progress is not None and told != "busy":  # once: a task log says why it waits
            progress(f"{action} waits for the pipeline's lock: {_describe(holding)} holds it")
            told = "busy"
        time.sleep(0.5)


@contextmanager
def pipeline_lock(
    lake: Lake,
    action: str,
    run_id: str | None = None,
    wait_s: float = 0.0,
    ready: Callable[[], str | None] | None = None,
    progress: Callable[[str], None] | None = None,
):
    """Hold the pipeline's lock for the block, which gets the fence to call before each commit;
    :class:`PipelineBusy` after ``wait_s`` seconds.

    ``ready``, when given, is asked while holding the lock; a reason (not None) means "not
    yet": the lock is let go so others can make progress, and asked again until ``wait_s``.
    """
    details = {"action": action, "run_id": run_id}
    path = lock_path(lake)
    lock = _LeaseLock(lease_path(lake), details) if path is None else _FileLock(path, details)
    try:
        _take(lock, lake, action, wait_s, ready, progress)
        yield lock.check
    finally:
        lock.close()
