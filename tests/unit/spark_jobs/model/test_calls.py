"""``spark_jobs/model/calls.py``: a call survives both ways a task sends it (its command line,
parsed back by the CLI, and the shared driver's JSON) unchanged, for random calls of every kind;
text as Airflow renders a template is read as each option's type, and a wrong one is refused."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from spark_jobs.cli import build_parser, call_of
from spark_jobs.model.calls import CALLS, Call, RollbackCall, build
from spark_jobs.model.errors import UsageError

pytestmark = pytest.mark.unit

_TEXT = ["bronze", "g-2", "manual__2026-03-01T00:00:00+00:00", "a b", "x=y", "--hop"]


def _draw(rng: random.Random, kind: type[Call]) -> Call:
    """A call of ``kind`` with each option drawn from values of its type (or left at default)."""
    values = {"pipeline": rng.choice(["ad_events", "crm"])}
    for each in dataclasses.fields(kind):
        if each.name == "pipeline" or (rng.random() < 0.3 and _has_default(each)):
            continue
        default = None if not _has_default(each) else each.default
        if each.name in ("start", "end", "to_time", "from_time"):
            values[each.name] = rng.choice(["2026-03-01", "2026-03-01T06:00:00"])
        elif each.name == "quality":
            values[each.name] = rng.choice(["gate", "report", "off"])
        elif isinstance(default, bool):
            values[each.name] = rng.random() < 0.5
        elif each.name == "wait_s":
            values[each.name] = rng.choice([0.0, 900.0, 2.5])
        elif each.name in ("to_batch", "max_files_per_trigger"):
            values[each.name] = rng.randint(-1, 40)
        else:
            values[each.name] = rng.choice(_TEXT)
    if kind is RollbackCall:  # exactly one target, as the CLI's parser requires
        target = rng.choice(["to_batch", "to_run", "to_time"])
        for name in ("to_batch", "to_run", "to_time"):
            values.pop(name, None)
        values[target] = {"to_batch": 3, "to_run": "manual__r", "to_time": "2026-03-01"}[target]
    return kind(**values)


def _has_default(option: dataclasses.Field) -> bool:
    return option.default is not dataclasses.MISSING


@pytest.mark.parametrize("seed", range(4))
def test_a_call_comes_back_unchanged_from_its_command_line_and_from_the_wire(seed):
    rng = random.Random(seed)
    parser = build_parser()
    for _ in range(60):
        call = _draw(rng, rng.choice(list(CALLS.values())))
        argv = call.argv()
        assert call_of(parser.parse_args(argv)) == call, argv
        assert Call.from_wire(json.loads(json.dumps(call.to_wire()))) == call


def test_text_as_airflow_renders_it_is_read_as_each_options_type():
    call = build(
        "rollback",
        pipeline="shop",
        hop="bronze",
        to_batch="4",
        cascade="False",
        replan="True",
        exact="",
        wait_s=900,
    )
    assert call == RollbackCall(
        pipeline="shop", hop="bronze", to_batch=4, cascade=False, replan=True, wait_s=900.0
    )
    assert call.argv() == [
        "rollback",
        "shop",
        "--hop=bronze",
        "--to-batch=4",
        "--no-cascade",
        "--replan",
        "--no-exact",
        "--wait=900",
    ]
    # the refresh DAG renders "from the start" as empty text
    assert build("refresh", pipeline="shop", hop="gold", from_time="").from_time is None


@pytest.mark.parametrize(
    "command, options, message",
    [
        ("rollback", {"hop": "b", "to_batch": "four"}, "to-batch must be an int, not 'four'"),
        ("rollback", {"hop": "b", "cascade": "maybe"}, "cascade must be a bool"),
        ("run", {"hops": "b"}, "lakehouse run has no option hops"),
        ("drop", {}, "'drop' is not a command a task can send"),
    ],
)
def test_a_wrong_option_is_refused_naming_it(command, options, message):
    with pytest.raises(UsageError, match=message):
        build(command, pipeline="shop", **options)
