"""``spark_jobs/control/fingerprint.py``: a query's fingerprint tells which code changes its state
and table can follow (plans as text, no JVM)."""

from __future__ import annotations

import pytest

from spark_jobs.control.hop_state import HopState
from tests.unit.spark_jobs._helpers import load

pytestmark = pytest.mark.unit


GOLD_PLAN = """\
~Project [kind#10, window#20-T60000ms.start AS window_start#30, count#21L]
+- ~Aggregate [window#25-T60000ms, kind#10], [window#25-T60000ms AS window#20-T60000ms, kind#10, count(1) AS count#21L]
   +- ~Project [named_struct(start, (event_ts#11-T60000ms % 60000000)) AS window#25-T60000ms, kind#10, \
exists(tags#13, lambdafunction(lambda x_1#40 = a, lambda x_1#40, false)) AS tagged#41]
      +- ~Filter isnotnull(event_ts#11-T60000ms)
         +- ~EventTimeWatermark 4846bf13-83ec-44ae-b376-d951bbf09d57, event_ts#11: timestamp, 1 minutes
            +- StreamingRelation FileSource[/lake/a], [kind#10, event_ts#11, _batch_id#12L], name=<Unassigned>"""  # noqa: E501


@pytest.mark.parametrize(
    "edit, kind",
    [
        (lambda plan: plan.replace("#1", "#7").replace("4846bf13", "00000000"), "unchanged"),
        (lambda plan: plan.replace("/lake/a", "/elsewhere/b"), "unchanged"),
        # PySpark's per-process numbering
        (lambda plan: plan.replace("lambda x_1", "lambda x_9"), "unchanged"),
        (
            lambda plan: plan.replace("count#21L]\n", "count#21L, kind#10 AS k#31]\n", 1),
            "compatible",
        ),
        (
            lambda plan: plan.replace("1 minutes", "2 minutes").replace("-T60000ms", "-T120000ms"),
            "compatible",
        ),
        (lambda plan: plan.replace("% 60000000", "% 120000000"), "incompatible"),
        (
            lambda plan: plan.replace("isnotnull(event_ts#11-T60000ms)", "(kind#10 = a)"),
            "incompatible",
        ),
        (
            lambda plan: plan.replace(
                "~Aggregate [window#25-T60000ms, kind#10]", "~Aggregate [window#25-T60000ms]"
            ),
            "incompatible",
        ),
    ],
    ids=[
        "ids",
        "paths",
        "lambdas",
        "column-above-the-state",
        "watermark-delay",
        "window",
        "filter-below",
        "key",
    ],
)
def test_a_query_fingerprint_tells_changes_its_state_can_follow(edit, kind):
    """Expected kinds by Spark's rules for a restarted query: only what feeds the state (keys,
    windows, filters before it) is incompatible; ids, paths and the watermark delay are not."""
    from spark_jobs.control import fingerprint
    from spark_jobs.model.spec import HopSpec

    hop = HopSpec(
        name="gold",
        kind="aggregate",
        table="t",
        time_column="window_start",
        upstreams=("silver",),
        keys=("kind", "window_start"),
    )
    old, new = (fingerprint.of_plan(plan, hop, "code") for plan in (GOLD_PLAN, edit(GOLD_PLAN)))
    assert old.stateful == ("Aggregate",)
    assert fingerprint.change(old, new) == kind
    assert fingerprint.change(None, new) == "unchanged"  # no committed batch: any code may start


def test_other_change_rules_are_an_incompatible_code_change_and_another_filter_is_not(tmp_path):
    """A changes hop's table is what its rules built: new rules cannot go on with it (refresh),
    while a change of its query alone (a filter in its transform) can."""
    from dataclasses import replace
    from types import SimpleNamespace

    from spark_jobs.control import fingerprint

    hop = load(
        tmp_path,
        "  - {name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id], "
        "sequence_by: lsn, operation: op}\n",
    ).hop("c")
    plan = "Project [id#1, lsn#2]\n+- StreamingRelation delta, [id#1, lsn#2]"
    filtered = (
        "Project [id#1, lsn#2]\n+- Filter (lsn#2 > 0)\n   +- StreamingRelation delta, [id#1, lsn#2]"
    )
    before = fingerprint.of_plan(plan, hop, "code-1")
    # As the code before a sequence could be several columns computed it: a lake's
    # fingerprints hold.
    assert (before.query, before.state) == ("a21d4f0209b952ca", "c0d92fa1da310c47")
    assert fingerprint.change(before, fingerprint.of_plan(filtered, hop, "code-2")) == "compatible"
    for rules in (
        {"scd": 2},
        {"sequence_by": "ts"},
        {"deletes": ("D",)},
        {"truncates": ("T",)},
        {"unavailable_value": None},
        {"except_columns": ("note",)},
    ):
        other = replace(hop, changes=replace(hop.changes, **rules))
        assert (
            fingerprint.change(before, fingerprint.of_plan(plan, other, "code-2")) == "incompatible"
        ), rules
    # the refusal reads the pipeline's name only
    lake = SimpleNamespace(spec=SimpleNamespace(name="crm"))
    assert fingerprint.refusal(
        HopState(lake, other), before, fingerprint.of_plan(plan, other, "code-2")
    ).startswith(
        "hop c's query changed since its checkpoint was written and its table was built "
        "by other change rules"
    )
