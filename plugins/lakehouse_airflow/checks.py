"""Light tasks: plain-file reads of checkpoints and landing folders, no JVM."""

from __future__ import annotations

import logging

from spark_jobs.lake import Lake
from spark_jobs.spec import get_spec
from spark_jobs.status import pending_work

log = logging.getLogger(__name__)


def has_new_data(pipeline: str) -> bool:
    """True when some hop of ``pipeline`` has work; the stream DAG skips Spark otherwise."""
    pending = pending_work(Lake.open(get_spec(pipeline)))
    for hop, reason in pending.items():
        log.info("%s: %s", hop, reason or "nothing new")
    return any(pending.values())
