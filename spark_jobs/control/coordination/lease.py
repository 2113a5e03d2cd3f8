"""A pipeline lock that works across machines: a lease object on the object store.

The local lock (:mod:`spark_jobs.control.coordination.lock`) is an ``flock``, which only one machine
sees. On an object-store lake the lock is an object, ``_ops/locks/<pipeline>.lease``, written with
S3 conditional writes, so that of two writers exactly one wins:

- **take**: create it with ``If-None-Match: *``; when it exists and its expiry has passed (its
  holder died or stalled), replace it with ``If-Match: <the ETag read>``; two takers of one
  expired lease race on that ETag and one loses;
- **renew**: while the job runs, a thread replaces it with ``If-Match: <our ETag>`` every third
  of its duration, pushing the expiry on; a replace that fails means someone took it over;
- **fence**: before each commit the job calls :meth:`Lease.check`, which refuses (``LeaseLost``)
  once a renewal failed or the expiry the holder last wrote has passed on its own clock (a
  paused process wakes up past its expiry: it must not write, another may hold the lease);
- **let go**: delete it with ``If-Match: <our ETag>`` (never someone else's lease).

What the object says (owner, action, run id, pid, host, since, expires) names the holder in the
refusal, as the local lock's file does. Expiry compares the holder's clock with a taker's: clocks
must agree to well within the lease's duration (60 s, or ``$LAKEHOUSE_LEASE_SECONDS``).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable

from fsspec.asyn import sync

from spark_jobs.logs.fs import filesystem
from spark_jobs.model import settings
from spark_jobs.model.errors import LakehouseError, UsageError

DURATION_S = 60.0


class LeaseLost(LakehouseError):
    """The lease expired or was taken over: the job must not commit."""

    exit_code = 1


def _precondition_failed(error: OSError) -> bool:
    return "pre-condition" in str(error) or "PreconditionFailed" in str(error)


class Lease:
    """The lease object at ``path`` (an ``s3://`` URI), held by this process while
    :meth:`take` is in effect.
    """

    def __init__(
        self, path: str, duration_s: float | None = None, clock: Callable[[], float] = time.time
    ):
        self.path = path
        self.fs = filesystem(path)
        if not hasattr(self.fs, "call_s3"):
            raise UsageError(
                f"{path}: a lake at a URI needs S3 (s3:// or s3a://) for its lock, which is a "
                "lease object written with S3 conditional writes: use a local path or an S3 URI"
            )
        self.bucket, _, self.key = self.fs._strip_protocol(path).partition("/")
        self.duration_s = duration_s or float(settings.LEASE_SECONDS.value() or DURATION_S)
        self.clock = clock
        self.owner = uuid.uuid4().hex
        self.etag: str | None = None
        self.expires = 0.0
        self.lost: str | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    # -- the object ---------------------------------------------------------------------------

    def _put(self, info: dict, **condition) -> str | None:
        """Write ``info`` if ``condition`` holds; its new ETag, or None when it did not hold."""
        body = json.dumps(info).encode()
        try:
            return self.fs.call_s3(
                "put_object", Bucket=self.bucket, Key=self.key, Body=body, **condition
            )["ETag"]
        except OSError as error:
            if _precondition_failed(error):
                return None
            raise

    def read(self) -> tuple[dict, str] | None:
        """What the lease object says and its ETag, read together; None when there is none."""
        try:
            found = self.fs.call_s3("get_object", Bucket=self.bucket, Key=self.key)
        except FileNotFoundError:
            return None
        body = sync(self.fs.loop, found["Body"].read)
        try:
            return json.loads(body or b"{}"), found["ETag"]
        except ValueError:
            return {}, found["ETag"]

    def holder(self) -> dict | None:
        """Who holds the lease now (None: nobody, or an expired lease)."""
        found = self.read()
        if found is None or found[0].get("expires", 0) <= self.clock():
            return None
        return found[0]

    # -- taking, keeping and letting go ----------------------------------------------------------

    def _info(self, details: dict) -> dict:
        now = self.clock()
        return {
            **details,
            "owner": self.owner,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": details.get("since", now),
            "expires": now + self.duration_s,
        }

    def try_take(self, details: dict) -> dict | None:
        """Take the lease if it is free or expired: None when taken, else what the holder wrote."""
        info = self._info(details)
        etag = self._put(info, IfNoneMatch="*")
        if etag is None:
            found = self.read()
            if found is None:  # let go between our write and our read: try again at once
                return self.try_take(details)
            current, current_etag = found
            if current.get("expires", 0) > self.clock():
                return current
            etag = self._put(info, IfMatch=current_etag)  # an expired lease: one taker wins it
            if etag is None:  # another taker won the expired lease: name it
                won = self.read()
                return won[0] if won else {}
        self.etag, self.expires, self.lost = etag, info["expires"], None
        self._details = info
        self._start_renewing()
        return None

    def renew(self) -> None:
        """Push the expiry on, if the lease is still ours; otherwise remember it is lost."""
        if self.etag is None or self.lost:
            return
        info = {**self._details, "expires": self.clock() + self.duration_s}
        etag = self._put(info, IfMatch=self.etag)
        if etag is None:
            self.lost = "the lease was taken over after it expired"
            return
        self.etag, self.expires, self._details = etag, info["expires"], info

    def _start_renewing(self) -> None:
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(self.duration_s / 3):
                try:
                    self.renew()
                except OSError:  # the store is unreachable: the expiry check will fence the job
                    pass

        self._renewer = threading.Thread(target=loop, name="lease-renewer", daemon=True)
        self._renewer.start()

    def check(self) -> None:
        """The fencing check before a commit: :class:`LeaseLost` unless the lease is surely ours."""
        if self.etag is None:
            raise LeaseLost(f"{self.path}: this process does not hold the lease")
        if self.lost:
            raise LeaseLost(f"{self.path}: {self.lost}; nothing more is written by this job")
        if self.clock() >= self.expires:
            raise LeaseLost(
                f"{self.path}: the lease expired before it was renewed (the job was paused or cut "
                "off from the store); nothing more is written by this job"
            )

    def release(self) -> None:
        """Stop renewing and delete the lease if it is still ours."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if self.etag is not None and not self.lost:
            try:
                self.fs.call_s3(
                    "delete_object", Bucket=self.bucket, Key=self.key, IfMatch=self.etag
                )
            except OSError as error:
                if not _precondition_failed(error):
                    raise
        self.etag = None
