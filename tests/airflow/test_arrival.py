"""``lakehouse_airflow/arrival.py``: the watcher of a pipeline that runs on arrival, driven as the
triggerer drives it (its ``run()`` loop) over a real landing folder, no JVM; and the stream DAG
it schedules. A real triggerer, scheduler and topic: the cluster walk of
``tests/e2e/test_platform.py``."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

pytestmark = [pytest.mark.unit, pytest.mark.airflow]


def _watch(trigger, steps):
    """Run ``trigger``'s loop while ``steps`` (a coroutine function given the events so far, as
    ``(seconds since start, payload)``) acts and checks; then stop it, as the triggerer does."""

    async def scenario():
        events: list[tuple[float, dict]] = []
        began = time.monotonic()

        async def consume():
            async for event in trigger.run():
                events.append((time.monotonic() - began, event.payload))

        task = asyncio.create_task(consume())
        try:
            await steps(events)
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(scenario())


async def _until(test, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not test():
        assert time.monotonic() < deadline, "no event came"
        await asyncio.sleep(0.02)


def test_what_arrives_is_announced_once_and_what_comes_within_min_interval_goes_together(
    airflow_in_process, pipelines, lake_home
):
    """Nothing arrived: no event. A file: one event at once, naming it. Two more within
    ``min_interval``: one event, when the interval is over. Then nothing new while they wait,
    until they have waited six looks: announced again (a paused DAG dropped the first)."""
    from lakehouse_airflow.arrival import ArrivalTrigger

    pipelines(schedule=None, trigger="arrival", min_interval="1 second")
    landing = lake_home / "landing" / "ad_events"
    landing.mkdir(parents=True)
    # looks every 0.3 s: announced again after 1.8 s
    trigger = ArrivalTrigger("ad_events", min_interval_s=1.0, poll_s=0.3)

    async def steps(events):
        await asyncio.sleep(0.8)
        assert events == []
        (landing / "events-1.json").write_text("{}\n")
        await _until(lambda: len(events) == 1)
        first = events[0]
        assert first[1] == {
            "pipeline": "ad_events",
            "reason": "1 file arrived for bronze",
            "arrived": {"bronze": 1},
        }
        for name in ("events-2.json", "events-3.json", "_SUCCESS", ".events-4.json.crc"):
            (landing / name).write_text("{}\n")  # Spark reads no name starting with _ or .
        await _until(lambda: len(events) == 2)
        assert events[1][1]["reason"] == "2 files arrived for bronze"
        assert events[1][0] - first[0] >= 1.0  # not before min_interval was over
        await asyncio.sleep(1.2)
        assert len(events) == 2  # they wait, announced
        await _until(lambda: len(events) == 3, timeout=3.0)
        assert events[2][1]["reason"] == "still waiting: 3 files arrived for bronze"
        assert events[2][0] - events[1][0] >= 1.8

    _watch(trigger, steps)


def test_a_stream_dag_on_arrival_is_scheduled_by_its_watched_asset(airflow_in_process, pipelines):
    """``trigger: arrival``: the stream DAG's schedule is the asset ``<pipeline>.arrivals``, its
    watcher the pipeline's trigger with the spec's ``min_interval``; with ``max_wait``, that
    asset or a timer of that long. A spec with a schedule keeps its cron timetable."""
    import datetime as dt

    from lakehouse_airflow.arrival import ArrivalTrigger
    from lakehouse_airflow.dag_factory import build_stream_dag

    from spark_jobs.model.spec import get_spec

    pipelines(schedule=None, trigger="arrival", min_interval="5 minutes")
    dag = build_stream_dag(get_spec("ad_events"))
    (asset,) = dag.timetable.asset_condition.objects
    assert (asset.name, asset.uri) == ("ad_events.arrivals", "lakehouse://ad_events/arrivals")
    (watcher,) = asset.watchers
    assert isinstance(watcher.trigger, ArrivalTrigger)
    assert watcher.trigger.serialize() == (
        "lakehouse_airflow.arrival.ArrivalTrigger",
        {"pipeline": "ad_events", "min_interval_s": 300.0, "poll_s": 10.0},
    )
    assert (
        "On arrival, at most once per 5 minutes: new landing files or topic records (asset "
        "`ad_events.arrivals`, watched by the triggerer)" in dag.doc_md
    )

    pipelines(schedule=None, trigger="arrival", max_wait="2 hours")
    dag = build_stream_dag(get_spec("ad_events"))
    assert dag.timetable.timetable.delta == dt.timedelta(hours=2)
    assert [asset.name for asset in dag.timetable.asset_condition.objects] == ["ad_events.arrivals"]
    assert "On arrival, at most once per 1 minute, and every 2 hours when nothing arrived" in (
        dag.doc_md
    )

    pipelines()
    dag = build_stream_dag(get_spec("ad_events"))
    assert dag.timetable.expression == "*/30 * * * *"
    assert "Every */30 * * * *" in dag.doc_md


class _Airflow:
    """What Airflow does with the watcher's events, in plain Python: an event starts a run of the
    stream DAG when it is unpaused and idle, queues one next run while one runs, and is dropped
    while the DAG is paused (Airflow's asset manager queues runs for unpaused DAGs only). A run
    takes every file waiting when it starts, as the stream's file source does; when it ends, its
    batch is written to bronze's source log in Spark's format (a run that found nothing writes
    none); a failed run writes nothing and leaves its files waiting."""

    def __init__(self, lake_home, landing):
        self.landing, self.log = landing, lake_home / "checkpoints/ad_events/bronze/sources/0"
        self.paused, self.queued, self.running = False, False, None
        self.events, self.runs, self.batches = 0, [], 0
        self.done: set[str] = set()  # the kinds of step taken

    def waiting(self) -> set[str]:
        done = {name for name in self.logged()}
        busy = self.running or set()
        return {path.name for path in self.landing.iterdir()} - done - busy

    def logged(self) -> set[str]:
        import json

        names = set()
        for path in self.log.glob("*") if self.log.exists() else ():
            lines = path.read_text().splitlines()[1:]
            names |= {json.loads(line)["path"].rsplit("/", 1)[-1] for line in lines}
        return names

    def event(self) -> None:
        self.events += 1
        if self.paused:
            return
        if self.running is not None:
            self.queued = True
            return
        self.start()

    def start(self) -> None:
        self.running = self.waiting()
        self.runs.append(set(self.running))

    def end(self, failed: bool = False) -> None:
        import json

        if self.running is None:
            return
        if self.running and not failed:
            self.log.mkdir(parents=True, exist_ok=True)
            entries = [
                json.dumps({"path": (self.landing / name).as_uri(), "batchId": self.batches})
                for name in sorted(self.running)
            ]
            (self.log / str(self.batches)).write_text("\n".join(["v1", *entries]) + "\n")
            self.batches += 1
        if failed:
            self.runs[-1] = set()
        self.running = None
        if self.queued:
            self.queued = False
            self.start()

    def act(self, rng, arrived: int) -> tuple[int, bool]:
        """One random step: files arrive, the run ends (or fails), the DAG is paused or
        unpaused, or the triggerer restarts (True); the files arrived so far."""
        roll = rng.random()
        kind = "wait"
        if roll < 0.35:
            kind = "arrive"
            for _ in range(rng.randint(1, 3)):
                (self.landing / f"events-{arrived:03d}.json").write_text("{}\n")
                arrived += 1
        elif roll < 0.6:
            failed = rng.random() < 0.25
            kind = "fail" if failed and self.running is not None else "end"
            self.end(failed=failed)
        elif roll < 0.75:
            kind = "pause"
            self.paused = not self.paused
        elif roll < 0.85:
            kind = "restart"
        self.done.add(kind)
        return arrived, kind == "restart"


@pytest.mark.parametrize("seed", [0, 2])  # seeds whose steps are of every kind
def test_random_arrivals_pauses_failures_and_restarts_lose_no_file_and_idle_runs_nothing(
    airflow_in_process, pipelines, lake_home, seed
):
    """The real watcher, in a plain-Python Airflow (:class:`_Airflow`), through random arrivals,
    run ends and failures, pauses and unpauses, and triggerer restarts (a new ``run()`` that has
    announced nothing). Then, unpaused, with nothing arriving and each run ended: every file is
    taken by exactly one successful run, and once none waits no event comes."""
    import random

    from lakehouse_airflow.arrival import ArrivalTrigger

    pipelines(schedule=None, trigger="arrival", min_interval="1 second")
    landing = lake_home / "landing" / "ad_events"
    landing.mkdir(parents=True)
    airflow = _Airflow(lake_home, landing)
    rng = random.Random(seed)
    # announced again after max(0.1 s, 6 x 0.03 s)
    trigger = ArrivalTrigger("ad_events", min_interval_s=0.1, poll_s=0.03)

    async def watch():
        async for _event in trigger.run():
            airflow.event()

    async def scenario():
        watcher = asyncio.create_task(watch())
        arrived = 0
        try:
            for _step in range(30):
                arrived, restart = airflow.act(rng, arrived)
                if restart:
                    watcher.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await watcher
                    watcher = asyncio.create_task(watch())
                await asyncio.sleep(rng.uniform(0.0, 0.15))
            airflow.paused = False
            deadline = time.monotonic() + 20
            while airflow.waiting() or airflow.running is not None:
                assert time.monotonic() < deadline, (airflow.waiting(), airflow.runs)
                airflow.end()
                await asyncio.sleep(0.05)
            taken = [run for run in airflow.runs if run]
            everything = {path.name for path in landing.iterdir()}
            assert sorted(name for run in taken for name in run) == sorted(everything)
            assert everything == airflow.logged() and len(everything) == arrived
            # (whether a run was going when a failure was drawn depends on timing)
            assert airflow.done >= {"arrive", "end", "pause", "restart"}, airflow.done
            events = airflow.events
            await asyncio.sleep(0.6)  # six looks twice over: nothing waits, nothing is announced
            assert airflow.events == events and airflow.running is None
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    asyncio.run(scenario())
