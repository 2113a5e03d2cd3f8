"""``spark_jobs/control/rollback/rebuild.py``: a state rebuild (``refresh --from``) is refused for a
hop that reads landing files."""

from __future__ import annotations

import pytest

from spark_jobs.control.hop_state import HopState

pytestmark = pytest.mark.unit


def test_a_state_rebuild_is_refused_for_a_hop_that_reads_landing_files(tmp_path):
    from spark_jobs.control.rollback import rebuild
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.spec import get_spec

    lake = Lake(str(tmp_path), get_spec("ad_events"))
    said = rebuild.refusal(HopState(lake, lake.spec.hop("bronze")), "2026-03-01T00:00:00")
    assert (
        said.startswith("--from 2026-03-01T00:00:00: hop bronze reads landing files")
        and "leave out --from" in said
    )
    assert rebuild.refusal(HopState(lake, lake.spec.hop("gold")), "2026-03-01T00:00:00") is None
