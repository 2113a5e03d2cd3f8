"""A stream DAG that runs when data arrives (the spec's ``trigger: arrival``:
docs/guides/arrival.md).

The DAG is scheduled on an asset, ``<pipeline>.arrivals``, watched by :class:`ArrivalTrigger` in
Airflow's triggerer: every ``$LAKEHOUSE_ARRIVAL_POLL_S`` seconds it reads, without a JVM, what
arrived for the pipeline's ingest hops that their streams have not taken (the new-data check's
listing of a landing folder or S3 prefix, a topic's end offsets: ``service.arrivals``). When
something arrived that it has not announced yet, it gives the asset an event, whose ``reason``
says what ("3 files arrived for bronze"), and the scheduler starts a run; then it waits
``min_interval`` before it looks again, so what arrives meanwhile goes into one next run.
Airflow queues the events of a DAG that is running (one queued run per DAG: the stream DAG runs
one at a time), so nothing that arrives is lost. While nothing arrives nothing runs: no DAG run,
no task. With ``max_wait`` the DAG also runs on a timer that long (a fallback for what the
watcher could not see).

What still waits six looks after it was announced (a minute by default; ``min_interval``, if
longer) is announced again: Airflow drops the events of a paused DAG, so its run starts within
that minute of being unpaused, and the files of a failed run are tried again. After a triggerer
restart the watcher has announced nothing yet, so what waits is announced at once. Either way the
run finds what the one before took, or nothing (its ``check_new_data`` skips).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time

from airflow.sdk import Asset, AssetOrTimeSchedule, AssetWatcher, DeltaTriggerTimetable
from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from lakehouse_airflow.assets import GROUP
from spark_jobs import service
from spark_jobs.model.errors import LakehouseError
from spark_jobs.model.lake import Lake
from spark_jobs.model.settings import ARRIVAL_POLL
from spark_jobs.model.spec import PipelineSpec

log = logging.getLogger(__name__)
# What waits is announced again after this many looks (or ``min_interval``, if longer).
AGAIN_POLLS = 6


def _arrivals(pipeline: str) -> list:
    return service.arrivals(Lake.named(pipeline))


class ArrivalTrigger(BaseEventTrigger):
    """Gives its asset an event when something arrived for ``pipeline``'s ingest hops that it
    has not announced, at most once per ``min_interval_s``; looks every ``poll_s``."""

    def __init__(self, pipeline: str, min_interval_s: float, poll_s: float):
        super().__init__()
        self.pipeline, self.min_interval_s, self.poll_s = pipeline, min_interval_s, poll_s

    def serialize(self) -> tuple[str, dict]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "pipeline": self.pipeline,
                "min_interval_s": self.min_interval_s,
                "poll_s": self.poll_s,
            },
        )

    @property
    def again_s(self) -> float:
        """How long what waits stays announced before it is announced again: a paused DAG
        drops its events (Airflow queues none for it), a failed run leaves its files."""
        return max(self.min_interval_s, AGAIN_POLLS * self.poll_s)

    async def run(self):
        announced: dict[str, frozenset[str]] = {}  # per hop, what waits and was announced
        last = None  # when the last event went out (monotonic)
        while True:
            try:
                arrivals = await asyncio.to_thread(_arrivals, self.pipeline)
            except (LakehouseError, OSError) as error:  # a broker down, a lake out of reach
                log.warning("%s: cannot see what arrived (%s); looking again", self.pipeline, error)
                await asyncio.sleep(self.poll_s)
                continue
            new = [one - announced.get(one.hop, frozenset()) for one in arrivals]
            waiting = [one for one in arrivals if one.items]
            again = bool(waiting) and last is not None and time.monotonic() - last >= self.again_s
            if not any(one.items for one in new) and not again:
                # what a run took waits no more: forget it
                announced = {
                    one.hop: announced.get(one.hop, frozenset()) & one.items for one in arrivals
                }
                await asyncio.sleep(self.poll_s)
                continue
            fresh = [one for one in new if one.items]
            reason = "; ".join(one.text() for one in fresh or waiting)
            if not fresh:
                reason = f"still waiting: {reason}"
            log.info("%s: %s", self.pipeline, reason)
            yield TriggerEvent(
                {
                    "pipeline": self.pipeline,
                    "reason": reason,
                    "arrived": {one.hop: len(one.items) for one in fresh or waiting},
                }
            )
            announced, last = {one.hop: one.items for one in arrivals}, time.monotonic()
            await asyncio.sleep(self.min_interval_s)


def arrivals_asset(spec: PipelineSpec) -> Asset:
    """``<pipeline>.arrivals``: the asset whose watcher starts the pipeline's stream DAG."""
    trigger = ArrivalTrigger(
        spec.name,
        min_interval_s=spec.min_interval_s,
        poll_s=float(ARRIVAL_POLL.value()),
    )
    return Asset(
        name=f"{spec.name}.arrivals",
        uri=f"lakehouse://{spec.name}/arrivals",
        group=GROUP,
        watchers=[AssetWatcher(name=f"{spec.name}_arrivals", trigger=trigger)],
    )


def arrival_schedule(spec: PipelineSpec):
    """The stream DAG's schedule for ``trigger: arrival``: its arrivals asset, or that asset or a
    timer of ``max_wait``."""
    asset = arrivals_asset(spec)
    if spec.max_wait is None:
        return [asset]
    every = dt.timedelta(seconds=spec.max_wait_s)
    return AssetOrTimeSchedule(timetable=DeltaTriggerTimetable(every), assets=[asset])
