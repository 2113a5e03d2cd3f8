"""``spark_jobs/control/source_switch.py``: a hop whose source changed since its checkpoint began,
read without a JVM from a lake real runs wrote (bronze fed by its landing folder): named by the
stream DAG's check, the Lakehouse page's figures and the rollback planner, never a crash, and
only a start over is planned. The topic-fed side, with a broker and real runs, is in
tests/spark/test_kafka_hop.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_jobs.control import fingerprint, source_switch, topics
from spark_jobs.control.hop_state import HopState
from spark_jobs.control.rollback import planner
from spark_jobs.control.status import pending_work
from spark_jobs.model.errors import CodeChanged
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import load_spec
from testkit.lakes import fixture_lake, spec_copy, topic_spec_copy

pytestmark = pytest.mark.unit


FIX = "`lakehouse refresh ad_events --hop bronze`"


def _relabelled(lake: Lake, folder: Path, **bronze) -> Lake:
    """``lake``'s files under a spec whose bronze reads a topic (``bronze``: its keys)."""
    pipelines = topic_spec_copy(folder, **bronze)
    return Lake(lake.home, load_spec(pipelines / "ad_events" / "ad_events.yaml"))


def test_a_landing_hop_now_fed_by_a_topic_is_refused_with_the_command_that_starts_it_over(tmp_path):
    written = fixture_lake("history", tmp_path)
    # the spec it was written with
    assert source_switch.refusal(HopState(written, written.spec.hop("bronze"))) is None
    assert all(
        reason is None or "refresh" not in reason for reason in pending_work(written).values()
    )

    lake = _relabelled(written, tmp_path / "topic", topic="ad_events_topic")
    bronze = lake.spec.hop("bronze")
    reason = source_switch.refusal(HopState(lake, bronze))
    assert (
        reason.startswith(
            "hop bronze now reads topic ad_events_topic but its checkpoint was written reading "
            "landing files"
        )
        and FIX in reason
    )
    with pytest.raises(CodeChanged, match="hop bronze now reads topic") as refused:
        pending_work(lake)  # the stream DAG's check fails with it: the run would refuse
    assert refused.value.hop == "bronze"
    assert pending_work(lake, strict=False)["bronze"] == reason  # the Lakehouse page says so
    assert (
        topics.logged_offsets(HopState(lake, bronze)) is None
        and topics.initial_offsets(HopState(lake, bronze)) is None
    )

    # A rollback can only start the hop over; the hops below it follow.
    kept = planner.plan_request(lake, "bronze", to_batch=0)
    assert kept.refused and FIX in kept.refused[0] and "--to-batch -1 --replan" in kept.refused[0]
    over = planner.plan_request(lake, "bronze", to_batch=-1, replan=True)
    assert not over.refused and {step.hop for step in over.hops} == {"bronze", "silver", "gold"}
    assert over.step("bronze").reread == "topic ad_events_topic from the earliest record held"


def test_a_topic_hop_now_fed_by_its_landing_folder_or_another_topic_is_refused(tmp_path):
    written = fixture_lake("history", tmp_path)
    checkpoint = Path(written.checkpoint(written.spec.hop("bronze")))
    # Kafka's offsets in the place of the file source's (as a topic-fed bronze logs them).
    for path in sorted((checkpoint / "offsets").iterdir()):
        lines = path.read_text().splitlines()
        lines[-1] = json.dumps({"orders_v1": {"0": 10 * int(path.name), "1": 7}})
        path.write_text("\n".join(lines))
    landing = Lake(
        written.home, load_spec(spec_copy(tmp_path / "landing") / "ad_events" / "ad_events.yaml")
    )
    reason = source_switch.refusal(HopState(landing, landing.spec.hop("bronze")))
    assert (
        reason.startswith(
            "hop bronze now reads landing files but its checkpoint was written reading topic "
            "orders_v1"
        )
        and FIX in reason
    )
    step = planner.plan_request(landing, "bronze", to_batch=-1, replan=True).step("bronze")
    # nothing of the topic's log read as files
    assert step.source_log_cut == -1 and step.reread_files == []

    other = _relabelled(written, tmp_path / "other", topic="orders_v2")
    assert (
        "now reads topic orders_v2 but its checkpoint was written reading topic orders_v1"
        in source_switch.refusal(HopState(other, other.spec.hop("bronze")))
    )
    same = _relabelled(written, tmp_path / "same", topic="orders_v1")
    assert source_switch.refusal(HopState(same, same.spec.hop("bronze"))) is None
    matching = _relabelled(written, tmp_path / "matching", topic_pattern="^orders_")
    bronze = matching.spec.hop("bronze")
    # no fingerprint names the source: the offsets agree
    assert source_switch.refusal(HopState(matching, bronze)) is None

    # The last run's fingerprint says it read one topic: the pattern is another source.
    fingerprint.save(
        HopState(matching, bronze),
        fingerprint.Fingerprint("code", "query", None, (), "topic orders_v1"),
    )
    assert (
        "now reads topic pattern '^orders_' but its checkpoint was written reading topic orders_v1"
        in source_switch.refusal(HopState(matching, bronze))
    )
    fingerprint.save(
        HopState(same, bronze), fingerprint.Fingerprint("code", "query", None, (), "topic pattern")
    )
    assert "written reading a topic pattern" in source_switch.refusal(
        HopState(same, same.spec.hop("bronze"))
    )
