"""``spark_jobs/engine/preflight.py``: before a run's queries start, which hops cost nothing to
check (no committed batch, the same code hash, an upstream table not written yet) and that a hop
whose code changed is compared, against real lakes (the ``history`` fixture lake, an empty one).

No JVM: the session passed is a stand-in that fails the test as soon as anything of it is used,
so a skipped hop is shown not to touch Spark. Comparing a changed hop's new query with its
recorded one needs Spark's analysed plan (``code_update``): that path is only followed as far as
the stand-in, not to a refusal."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from spark_jobs.engine.preflight import check_code_updates, incompatible_updates
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import load_spec
from testkit.lakes import fixture_lake, spec_copy

pytestmark = pytest.mark.unit


class SparkUsed(Exception):
    pass


class _NoSpark:
    """A session no part of the check may use."""

    def __getattr__(self, name):
        raise SparkUsed(name)


def _recorded_code(lake: Lake, hop: str) -> str:
    path = Path(lake.home) / "_ops" / "fingerprints" / lake.spec.name / f"{hop}.json"
    return json.loads(path.read_text())["code"]


def _record_code(lake: Lake, code: str) -> None:
    """Every hop's fingerprint in the lake says its checkpoint ran with code ``code``."""
    for path in (Path(lake.home) / "_ops" / "fingerprints" / lake.spec.name).glob("*.json"):
        document = json.loads(path.read_text())
        path.write_text(json.dumps({**document, "code": code}))


def _current_code(lake: Lake) -> str:
    from spark_jobs.pipelines import pipeline_code

    return pipeline_code(lake.spec).code_hash(lake.spec)


def test_hops_with_no_committed_batch_are_not_checked(tmp_path):
    spec = load_spec(spec_copy(tmp_path / "pipelines") / "ad_events" / "ad_events.yaml")
    lake = Lake(str(tmp_path / "lake"), spec)
    lines = []
    assert incompatible_updates(_NoSpark(), lake, spec.hops, lines.append) == []
    check_code_updates(_NoSpark(), lake, spec.hops, lines.append)
    assert lines == []


def test_hops_whose_checkpoints_ran_with_the_same_code_are_not_checked(tmp_path):
    lake = fixture_lake("history", tmp_path)
    _record_code(lake, _current_code(lake))
    lines = []
    assert incompatible_updates(_NoSpark(), lake, lake.spec.hops, lines.append) == []
    check_code_updates(_NoSpark(), lake, lake.spec.hops, lines.append)
    assert lines == []


def test_a_hop_whose_code_changed_is_compared_by_its_new_query(tmp_path):
    """The fixture's checkpoints ran with other code than the example's today (its fingerprints
    name another hash): gold's new query is built over silver's table, so Spark is reached. The
    next test is the same lake without silver's table."""
    lake = fixture_lake("history", tmp_path)
    gold = lake.spec.hop("gold")
    assert _recorded_code(lake, "gold") != _current_code(lake)
    with pytest.raises(SparkUsed):
        incompatible_updates(_NoSpark(), lake, (gold,), lambda line: None)
    with pytest.raises(SparkUsed):
        check_code_updates(_NoSpark(), lake, (gold,), lambda line: None)


def test_a_changed_hop_whose_upstream_table_is_not_written_yet_is_not_checked(tmp_path):
    """Its run will do nothing (no upstream to read): nothing to compare, nothing refused."""
    lake = fixture_lake("history", tmp_path)
    silver, gold = lake.spec.hop("silver"), lake.spec.hop("gold")
    assert _recorded_code(lake, "gold") != _current_code(lake)
    shutil.rmtree(lake.table(silver))  # gold's upstream
    assert incompatible_updates(_NoSpark(), lake, (gold,), lambda line: None) == []
    check_code_updates(_NoSpark(), lake, (gold,), lambda line: None)
