"""``lakehouse_airflow/arrival.py``: the watcher of a pipeline that runs on arrival, driven as the
triggerer drives it (its ``run()`` loop) over a real landing folder, no JVM; and the stream DAG
it schedules. A real triggerer, scheduler and topic: the cluster walk of
``tests/e2e/test_platform.py``."""

from __future__ import annotations

import asyncio
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
    assert "When new landing files or topic records arrive" in dag.doc_md

    pipelines(schedule=None, trigger="arrival", max_wait="2 hours")
    dag = build_stream_dag(get_spec("ad_events"))
    assert dag.timetable.timetable.delta == dt.timedelta(hours=2)
    assert [asset.name for asset in dag.timetable.asset_condition.objects] == ["ad_events.arrivals"]

    pipelines()
    assert build_stream_dag(get_spec("ad_events")).timetable.expression == "*/30 * * * *"
