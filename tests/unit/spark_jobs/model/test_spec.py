"""``spark_jobs/model/spec.py``: the spec as the loader reads it: hops, graph errors and every
refusal naming the fix (keys, formats, changes, retention, topics, Avro), inputs (no JVM)."""

from __future__ import annotations

import re

import pytest

from spark_jobs.cli import main
from spark_jobs.model.errors import UsageError
from spark_jobs.model.spec import get_spec, load_spec
from testkit.lakes import spec_copy
from tests.unit.spark_jobs._helpers import load

pytestmark = pytest.mark.unit


HOP = "{name: %s, kind: %s, table: tables/%s, time_column: t%s}"


def test_spec_has_three_hops_in_order():
    spec = get_spec("ad_events")
    assert spec.hop_names == ("bronze", "silver", "gold")
    assert [hop.upstream for hop in spec.hops] == [None, "bronze", "silver"]
    assert spec.downstream_of("bronze") == spec.hops[1:]


def test_a_broken_spec_fails_alone(pipelines, lake_home, capsys):
    """A second spec that does not load leaves ad_events working; naming it gives its problem."""
    folder = pipelines()
    (folder / "shop.yaml").write_text(
        "name: shop\nlanding: landing/shop\nhops: [{name: bronze, kind: ingest}]\n"
    )
    (folder / "notes.yaml").write_text("name: [unclosed\n")
    assert main(["status", "ad_events"]) == 0
    capsys.readouterr()
    assert main(["status", "shop"]) == 2
    problem = f"{folder / 'shop.yaml'}: hop bronze lacks table, time_column: add it to the spec"
    assert capsys.readouterr().err.strip() == f"error: {problem}"
    assert main(["status", "notes"]) == 2
    assert "not valid YAML" in capsys.readouterr().err
    assert main(["status", "nope"]) == 2
    assert "specs that do not load: notes.yaml, shop.yaml" in capsys.readouterr().err


def test_a_spec_without_inputs_loads_and_names_a_missing_input(pipelines):
    from spark_jobs.model.spec import get_spec

    folder = pipelines()
    (folder / "plain.yaml").write_text(
        "name: plain\nlanding: landing/plain\nhops:\n"
        "  - {name: bronze, kind: ingest, table: tables/bronze/plain, time_column: t}\n"
    )
    spec = get_spec("plain")
    assert spec.inputs == {} and get_spec("ad_events").input("campaigns") == "landing/campaigns"
    with pytest.raises(UsageError, match="needs the input 'campaigns'"):
        spec.input("campaigns")


@pytest.mark.parametrize(
    "hops, problem",
    [
        (
            [("a", "ingest", ""), ("b", "sideways", ", upstream: a")],
            "hop b has kind 'sideways': use one of ingest, append, aggregate",
        ),
        (
            [("a", "ingest", ""), ("b", "append", ", upstream: c")],
            "hop b has upstream 'c', which is not a hop of this spec",
        ),
        (
            [
                ("a", "ingest", ""),
                ("b", "append", ", upstream: c"),
                ("c", "append", ", upstream: b"),
            ],
            "hop b has upstream 'c', which is below it: hops run top to bottom, so list it above",
        ),
        (
            [("a", "ingest", ""), ("b", "append", ", upstream: b")],
            "hop b has upstream 'b', which is below it",
        ),
        (
            [("a", "ingest", ""), ("a", "append", ", upstream: a")],
            "two hops are called 'a': rename one",
        ),
        (
            [("a", "ingest", ""), ("b", "aggregate", "")],
            "hop b (kind aggregate) reads a table: add `upstream: <a hop above it>`",
        ),
        (
            [("a", "ingest", ""), ("b", "ingest", ", upstream: a")],
            "hop b (kind ingest) reads the landing files, not 'a'",
        ),
        (
            [("a", "ingest", ""), ("b", "ingest", ""), ("c", "append", ", upstream: [a, b]")],
            "hop c (kind append) reads one table, not ['a', 'b']: name one "
            "upstream, or use kind join",
        ),
        (
            [("a", "ingest", ""), ("c", "join", ", upstream: [a], within: 1 hour")],
            "hop c (kind join) needs `upstream: [<hop>, <hop>]` (two or more different hops "
            "above it) and `within: ",
        ),
        (
            [("a", "ingest", ""), ("b", "ingest", ""), ("c", "join", ", upstream: [a, b]")],
            "hop c (kind join) needs",
        ),
        (
            [
                ("a", "ingest", ""),
                ("b", "ingest", ""),
                ("c", "join", ", upstream: [a, b], within: soon"),
            ],
            "hop c has within 'soon', not a duration: use e.g. `1 hour`",
        ),
        (
            [("a", "ingest", ""), ("c", "join", ", upstream: [a, d], within: 1 hour")],
            "hop c has upstream 'd', which is not a hop of this spec",
        ),
        (
            [("a", "ingest", ""), ("b", "aggregate", ", upstream: a, unique: [k]")],
            "hop b has unique: ['k'], which only append and join hops take: remove it",
        ),
        (
            [("a", "ingest", ""), ("b", "append", ", upstream: a, unique: k")],
            "hop b has unique 'k', not a list of column names: use e.g. `[event_date]`",
        ),
    ],
    ids=[
        "unknown-kind",
        "unknown-upstream",
        "cycle",
        "self",
        "duplicate",
        "no-upstream",
        "ingest-upstream",
        "two-upstreams-not-join",
        "join-one-upstream",
        "join-no-within",
        "join-bad-within",
        "join-unknown-upstream",
        "unique-on-aggregate",
        "unique-not-a-list",
    ],
)
def test_a_spec_graph_error_names_the_file_the_hop_and_the_fix(pipelines, hops, problem):
    folder = pipelines()
    lines = "".join(f"  - {HOP % (name, kind, name, extra)}\n" for name, kind, extra in hops)
    (folder / "team.yaml").write_text(f"name: team\nlanding: landing/team\nhops:\n{lines}")
    with pytest.raises(UsageError) as refused:
        get_spec("team")
    assert str(refused.value).startswith(f"{folder / 'team.yaml'}: {problem}")


def test_ingest_hops_read_landing_folders_of_their_own_and_the_graph_has_a_sink_or_none(pipelines):
    folder = pipelines()
    own = ", landing: landing/{0}"
    spec_file = folder / "team.yaml"

    def load(top: str, *hops: tuple[str, str, str]):
        lines = "".join(f"  - {HOP % (name, kind, name, extra)}\n" for name, kind, extra in hops)
        spec_file.write_text(f"name: team\n{top}hops:\n{lines}")
        return get_spec("team")

    spec = load(
        "",
        ("a", "ingest", own.format("x")),
        ("b", "ingest", own.format("y")),
        ("c", "append", ", upstream: a"),
        ("d", "append", ", upstream: b"),
    )
    assert spec.landings == {"a": "landing/x", "b": "landing/y"} and spec.sink is None
    assert [hop.name for hop in spec.feeds("a")] == ["c"]
    spec = load(
        "landing: landing/team\n",
        ("a", "ingest", ""),
        ("b", "ingest", own.format("y")),
        ("c", "append", ", upstream: a"),
        ("d", "append", ", upstream: c"),
    )
    # b never reaches d
    assert spec.landings == {"a": "landing/team", "b": "landing/y"} and spec.sink is None
    spec = load(
        "landing: landing/team\n",
        ("a", "ingest", ""),
        ("c", "append", ", upstream: a"),
        ("e", "append", ", upstream: a"),
        ("d", "aggregate", ", upstream: c"),
    )
    assert spec.sink is None  # e never reaches d
    spec = load(
        "landing: landing/team\n",
        ("a", "ingest", ""),
        ("b", "ingest", own.format("y")),
        ("c", "join", ", upstream: [a, b], within: 1 hour"),
        ("d", "aggregate", ", upstream: c"),
    )
    assert (
        spec.sink.name == "d"
        and spec.hop("c").upstreams == ("a", "b")
        and spec.hop("c").upstream is None
    )
    assert [hop.name for hop in spec.downstream_of("b")] == ["c", "d"] and spec.hop(
        "c"
    ).within_ms == 3_600_000
    assert (
        load(
            "landing: landing/team\n",
            ("a", "ingest", ""),
            ("c", "append", ", upstream: a"),
            ("d", "aggregate", ", upstream: c"),
        ).sink.name
        == "d"
    )
    for top, hops, problem in [
        (
            "",
            [("a", "ingest", "")],
            "hop a (kind ingest) has no landing folder: add `landing: <path under "
            "LAKEHOUSE_HOME>` to the hop or to the pipeline",
        ),
        (
            "landing: landing/team\n",
            [("a", "ingest", ""), ("b", "append", ", upstream: a" + own.format("b"))],
            "hop b (kind append) reads a table, not a landing folder: remove its landing key",
        ),
    ]:
        with pytest.raises(UsageError) as refused:
            load(top, *hops)
        assert str(refused.value) == f"{spec_file}: {problem}"


@pytest.mark.parametrize(
    "top, hop_extra, problem",
    [
        (
            "allowed_latenes: 30 minutes\n",
            "",
            "the pipeline has unknown key `allowed_latenes`: did you mean `allowed_lateness`?",
        ),
        ("", ", uniq: [k]", "hop a has unknown key `uniq`: did you mean `unique`?"),
        (
            "",
            ", color: red",
            "hop a has unknown key `color`: remove it (valid keys: name, "
            "kind, table, time_column, ",
        ),
        (
            "window: ten seconds\n",
            "",
            "the pipeline has window 'ten seconds', not a duration: use e.g. `10 seconds`",
        ),
        (
            "freshness: soon\n",
            "",
            "the pipeline has freshness 'soon', not a duration: use e.g. `15 minutes`",
        ),
        (
            "shuffle_partitions: 0\n",
            "",
            "the pipeline has shuffle_partitions 0, not a positive whole number",
        ),
        ("backfill_start: March\n", "", "the pipeline has backfill_start 'March', not a date"),
        (
            "inputs: [campaigns]\n",
            "",
            "the pipeline has inputs ['campaigns'], not a mapping of names to paths",
        ),
        (
            "",
            ", partition_by: event_date",
            "hop a has partition_by 'event_date', not a list of column names",
        ),
        ("", ", table: 7", "hop a has table 7, not a non-empty string"),
    ],
    ids=[
        "pipeline-typo",
        "hop-typo",
        "hop-unknown",
        "window",
        "freshness",
        "partitions",
        "start",
        "inputs",
        "partition-by",
        "table",
    ],
)
def test_a_key_the_spec_does_not_declare_or_a_value_of_the_wrong_type_is_refused(
    pipelines, top, hop_extra, problem
):
    """A misspelled key is an error naming the nearest valid one, never a silent default."""
    folder = pipelines()
    assert _refusal(folder, top, hop_extra).startswith(f"{folder / 'team.yaml'}: {problem}")


def _refusal(folder, top: str, hop_extra: str = "") -> str:
    """Why a one-hop spec ``team`` with these pipeline keys (``top``) and hop keys is refused."""
    (folder / "team.yaml").write_text(
        f"name: team\nlanding: landing/team\n{top}hops:\n  - "
        + "{name: a, kind: ingest, table: tables/a, time_column: t%s}\n" % hop_extra
    )
    with pytest.raises(UsageError) as refused:
        get_spec("team")
    return str(refused.value)


def test_a_pipeline_name_that_cannot_name_dags_and_tables_is_refused(pipelines):
    folder = pipelines()
    (folder / "Team-1.yaml").write_text(
        "name: Team-1\nlanding: landing/team\nhops:\n"
        "  - {name: a, kind: ingest, table: tables/a, time_column: t}\n"
    )
    with pytest.raises(
        UsageError, match="the pipeline's name 'Team-1' is not allowed: use lower-case letters"
    ):
        get_spec("Team-1")


def _runs_by_hand(schedule: str, days: int) -> int:
    """A cron schedule's runs in ``days`` days, counted minute by minute (the common forms only)."""
    minute, hour, *_rest = schedule.split()
    per_hour = 60 // int(minute[2:]) if minute.startswith("*/") else 1
    return per_hour * (24 if hour == "*" else 1) * days


@pytest.mark.parametrize(
    "schedule, days",
    [("*/30 * * * *", 7), ("0 * * * *", 3), ("*/5 * * * *", 2), ("15 6 * * *", 30)],
)
def test_a_rollback_window_sets_the_batches_the_checkpoints_keep_or_refuses_too_few(
    pipelines, schedule, days
):
    """retention.rollback: the checkpoints keep two batches per scheduled run in the window (at
    least Spark's 100 when the spec gives no number); a spec that keeps fewer is refused with the
    number it needs."""
    folder = pipelines()
    runs = _runs_by_hand(schedule, days)
    needed = 2 * runs

    def load(extra: str):
        (folder / "team.yaml").write_text(
            f'name: team\nlanding: landing/team\nschedule: "{schedule}"\n{extra}hops:\n'
            "  - {name: a, kind: ingest, table: tables/a, time_column: t}\n"
        )
        return get_spec("team")

    assert load(f"retention: {{rollback: {days} days}}\n").min_batches_to_retain == max(100, needed)
    assert (
        load(
            f"retention: {{rollback: {days} days}}\nmin_batches_to_retain: {needed}\n"
        ).min_batches_to_retain
        == needed
    )
    assert load("").min_batches_to_retain == 100 and load("").retention == {}
    with pytest.raises(UsageError) as refused:
        load(f"retention: {{rollback: {days} days}}\nmin_batches_to_retain: {needed - 1}\n")
    assert (
        f"keeps {needed - 1} batches (min_batches_to_retain), but a rollback window of {days} days"
        in str(refused.value)
    )
    assert (
        f"needs {needed} ({runs} runs of up to 2 batches): raise min_batches_to_retain to {needed}"
        in str(refused.value)
    )


@pytest.mark.parametrize(
    "retention, problem",
    [
        ("{rollbak: 7 days}", "retention has unknown key `rollbak`: did you mean `rollback`?"),
        (
            "{rollback: a week}",
            "retention has rollback 'a week', not a duration: use e.g. `7 days`",
        ),
        (
            "{rollback: 45 days}",
            "the pipeline has retention.rollback '45 days', longer than the 30 days Delta keeps",
        ),
        ("7 days", "the pipeline has retention '7 days', not a mapping"),
    ],
    ids=["typo", "not-a-duration", "beyond-delta", "not-a-mapping"],
)
def test_a_rollback_window_that_cannot_be_had_is_refused(pipelines, retention, problem):
    folder = pipelines()
    assert _refusal(folder, f"retention: {retention}\n").startswith(
        f"{folder / 'team.yaml'}: {problem}"
    )


def test_a_rollback_window_needs_a_schedule_whose_runs_can_be_counted(pipelines):
    assert "give a cron schedule" in _refusal(
        pipelines(), 'schedule: "@continuous"\nretention: {rollback: 1 day}\n'
    )


def test_a_pipeline_on_arrival_keeps_the_batches_its_runs_can_make_in_the_window(pipelines):
    """``trigger: arrival``: at most one run per ``min_interval`` and one per ``max_wait``,
    two batches each, in the rollback window (no schedule to count)."""
    folder = pipelines()

    def load(extra: str):
        (folder / "team.yaml").write_text(
            f"name: team\nlanding: landing/team\ntrigger: arrival\n{extra}hops:\n"
            "  - {name: a, kind: ingest, table: tables/a, time_column: t}\n"
        )
        return get_spec("team")

    spec = load("")
    assert (spec.on_arrival, spec.min_interval_s, spec.max_wait_s) == (True, 60.0, None)
    assert spec.min_batches_to_retain == 100
    # a day: 1440 runs a minute apart, 2 batches each
    assert load("retention: {rollback: 1 day}\n").min_batches_to_retain == 2 * 24 * 60
    spec = load("min_interval: 10 minutes\nmax_wait: 2 hours\nretention: {rollback: 1 day}\n")
    assert (spec.min_interval_s, spec.max_wait_s) == (600.0, 7200.0)
    assert spec.min_batches_to_retain == max(100, 2 * (24 * 6 + 12))
    assert not get_spec("ad_events").on_arrival


@pytest.mark.parametrize(
    "top, problem",
    [
        ("trigger: sometimes\n", "has trigger 'sometimes': use `schedule` or `arrival`"),
        (
            "min_interval: 5 minutes\n",
            "has min_interval without `trigger: arrival`: add the trigger or remove min_interval",
        ),
        (
            "trigger: arrival\nmin_interval: soon\n",
            "has min_interval 'soon', not a duration: use e.g. `5 minutes`",
        ),
        (
            'trigger: arrival\nschedule: "*/5 * * * *"\n',
            "has schedule '*/5 * * * *' and `trigger: arrival`: remove the schedule",
        ),
        (
            "trigger: arrival\nmax_wait: -5 minutes\n",
            "has max_wait '-5 minutes': give a max_wait above 0",
        ),
    ],
    ids=["unknown", "interval-alone", "not-a-duration", "both", "zero"],
)
def test_a_wrong_trigger_is_refused_with_the_fix(pipelines, top, problem):
    folder = pipelines()
    refusal = _refusal(folder, top)
    assert refusal.startswith(f"{folder / 'team.yaml'}: the pipeline {problem}"), refusal
    assert "\n" not in refusal


def test_a_topic_fed_ingest_hop_reads_its_topic_and_nothing_else(pipelines):
    folder = pipelines()
    (folder / "team.yaml").write_text(
        "name: team\nhops:\n  - {name: a, kind: ingest, topic: events, "
        "max_offsets_per_trigger: 500, table: tables/a, time_column: t}\n"
    )
    hop = get_spec("team").hop("a")
    assert (hop.reads, hop.reads_topic, hop.reads_landing, hop.ingests) == (
        "topic",
        True,
        False,
        True,
    )
    assert (hop.kafka.topic, hop.kafka.starting_offsets, hop.kafka.max_offsets_per_trigger) == (
        "events",
        "earliest",
        500,
    )
    assert get_spec("team").landings == {}  # no landing folder to list or to generate into

    assert "reads topic 'events' and landing folder 'landing/x': keep one" in _refusal(
        folder, "", ", topic: events, landing: landing/x"
    )
    assert "has starting_offsets 'oldest': use earliest or latest" in _refusal(
        folder, "", ", topic: events, starting_offsets: oldest"
    )
    assert "has max_offsets_per_trigger 0, not a positive whole number" in _refusal(
        folder, "", ", topic: events, max_offsets_per_trigger: 0"
    )


def test_a_hop_reads_topics_by_pattern_or_by_name_not_both(pipelines):
    folder = pipelines()
    (folder / "team.yaml").write_text(
        "name: team\nhops:\n  - {name: a, kind: ingest, topic_pattern: '^orders-[a-z]+$', "
        "table: tables/a, time_column: t}\n"
    )
    hop = get_spec("team").hop("a")
    assert (hop.reads, hop.reads_topic, hop.reads_landing) == ("topic", True, False)
    assert hop.kafka.subscription == ("subscribePattern", "^orders-[a-z]+$")
    assert hop.kafka.label == "the topics matching '^orders-[a-z]+$'"

    assert "has topic 'events' and topic_pattern 'e.*': keep one" in _refusal(
        folder, "", ", topic: events, topic_pattern: 'e.*'"
    )
    assert "has topic_pattern 'e[', which is no regular expression" in _refusal(
        folder, "", ", topic_pattern: 'e['"
    )
    assert "reads topic_pattern 'e.*' and landing folder 'landing/x': keep one" in _refusal(
        folder, "", ", topic_pattern: 'e.*', landing: landing/x"
    )


def test_avro_values_need_a_topic_and_a_record_schema_beside_the_spec(pipelines):
    folder = pipelines()
    (folder / "event.avsc").write_text(
        '{"type": "record", "name": "E", "fields": [{"name": "t", "type": "long"}]}'
    )
    (folder / "list.avsc").write_text('["long", "null"]')
    (folder / "team.yaml").write_text(
        "name: team\nhops:\n  - {name: a, kind: ingest, topic: events, avro: {schema: "
        "event.avsc, header: confluent}, table: tables/a, time_column: t}\n"
    )
    avro = get_spec("team").hop("a").kafka.avro
    assert avro.confluent and '"name": "t"' in avro.schema

    assert "has avro but reads no topic" in _refusal(folder, "", ", avro: {schema: event.avsc}")
    assert "has avro {'schemas': 'event.avsc'}: give `{schema: <file>.avsc}`" in _refusal(
        folder, "", ", topic: e, avro: {schemas: event.avsc}"
    )
    assert "has avro header 'registry': use none or confluent" in _refusal(
        folder, "", ", topic: e, avro: {schema: event.avsc, header: registry}"
    )
    assert f"avro schema {folder / 'gone.avsc'} is not readable JSON" in _refusal(
        folder, "", ", topic: e, avro: {schema: gone.avsc}"
    )
    assert "list.avsc is not a record schema" in _refusal(
        folder, "", ", topic: e, avro: {schema: list.avsc}"
    )


def test_format_keys_belong_to_ingest_hops_and_a_topic_has_no_header(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: s\nlanding: landing/s\nhops:\n"
        "  - {name: bronze, kind: ingest, table: t/b, time_column: t, format: csv, columns: {t: "
        "long}}\n  - {name: silver, kind: append, upstream: bronze, table: t/s, "
        "time_column: t, format: json}\n"
    )
    with pytest.raises(
        UsageError, match="hop silver \\(kind append\\) has format, which only an ingest hop takes"
    ):
        load_spec(spec)
    spec.write_text(
        "name: s\nhops:\n  - {name: bronze, kind: ingest, table: t/b, time_column: t, topic: s, "
        "format: csv, columns: {t: long}}\n"
    )
    with pytest.raises(
        UsageError, match="reads topic 's' as CSV with a header.*add `csv: {header: false}`"
    ):
        load_spec(spec)
    spec.write_text(
        "name: s\nhops:\n  - {name: bronze, kind: ingest, table: t/b, time_column: t, topic: s, "
        "format: csv, columns: {t: long}, csv: {header: false}}\n"
    )
    hop = load_spec(spec).hop("bronze")
    assert hop.format.header is False and hop.transform_optional


@pytest.mark.parametrize(
    "hop, message",
    [
        (
            "{name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id]}",
            "hop c (kind changes) lacks sequence_by: add the column",
        ),
        (
            "{name: c, kind: changes, upstream: bronze, table: t/c, time_column: "
            "at, sequence_by: lsn}",
            "hop c (kind changes) lacks keys: add the columns",
        ),
        (
            "{name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id], "
            "sequence_by: lsn, scd: 3}",
            "hop c has scd 3: use 1",
        ),
        (
            "{name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id], "
            "sequence_by: lsn, track_history: [tier]}",
            "hop c has track_history or validity, which only an `scd: 2` hop keeps",
        ),
        (
            "{name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id], "
            "sequence_by: lsn, scd: 2, validity: [v, v]}",
            "hop c has validity ['v', 'v']: name two columns",
        ),
        (
            "{name: c, kind: append, upstream: bronze, table: t/c, time_column: "
            "at, sequence_by: lsn}",
            "hop c (kind append) has sequence_by, which only a changes hop takes: remove it",
        ),
        (
            "{name: c, kind: changes, table: t/c, time_column: at, keys: [id], sequence_by: lsn}",
            "hop c (kind changes) reads a table: add `upstream",
        ),
        (
            "{name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id], "
            "sequence_by: lsn}\n  - {name: g, kind: append, upstream: c, table: "
            "t/g, time_column: at}",
            "hop g reads 'c', a changes hop, whose batches rewrite rows in place: a summary "
            "hop can stream it",
        ),
        (
            "{name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id], "
            "sequence_by: [lsn, lsn]}",
            "hop c has sequence_by ['lsn', 'lsn']: name a column, or a list of different columns",
        ),
        (
            "{name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: "
            "[id], sequence_by: []}",
            "hop c has sequence_by [], not a column's name or a list of them: use e.g. `lsn` "
            "or `[lsn, event_index]`",
        ),
    ],
    ids=[
        "no-sequence",
        "no-keys",
        "scd-3",
        "history-on-1",
        "validity",
        "on-append",
        "no-upstream",
        "below",
        "sequence-twice",
        "sequence-empty",
    ],
)
def test_a_wrong_changes_hop_is_refused_with_the_fix(tmp_path, hop, message):
    with pytest.raises(UsageError, match=re.escape("crm.yaml: " + message)):
        load(tmp_path, f"  - {hop}\n")


@pytest.mark.parametrize(
    "hop, message",
    [
        (
            "{name: s, kind: summary, upstream: bronze, table: t/s, time_column: at, keys: [k], "
            "measures: {n: count(*)}}",
            "hop s (kind summary) reads 'bronze', which is no changes hop: a summary hop reads a "
            "changes hop's change data feed",
        ),
        (
            "{name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id], "
            "sequence_by: lsn}\n  - {name: s, kind: summary, upstream: c, table: t/s, "
            "time_column: at, keys: [k]}",
            "hop s (kind summary) lacks measures: add each column and the Spark SQL aggregate",
        ),
        (
            "{name: c, kind: append, upstream: bronze, table: t/c, time_column: at, "
            "measures: {n: count(*)}}",
            "hop c (kind append) has measures, which only a summary hop takes: remove it",
        ),
    ],
    ids=["reads-no-changes-hop", "no-measures", "measures-on-append"],
)
def test_a_wrong_summary_hop_is_refused_with_the_fix(tmp_path, hop, message):
    with pytest.raises(UsageError, match=re.escape("crm.yaml: " + message)):
        load(tmp_path, f"  - {hop}\n")


def test_a_summary_hop_keeps_its_measures_in_order(tmp_path):
    spec = load(
        tmp_path,
        "  - {name: c, kind: changes, upstream: bronze, table: t/c, time_column: at, keys: [id], "
        "sequence_by: lsn}\n  - {name: s, kind: summary, upstream: c, table: t/s, "
        "time_column: last, keys: [tier], measures: {n: count(*), last: max(at)}}\n",
    )
    assert spec.hop("s").measures == (("n", "count(*)"), ("last", "max(at)"))


@pytest.mark.parametrize(
    "retention, message",
    [
        (
            "{expired_landing: shred}",
            "retention.expired_landing 'shred': use `archive` or `delete`",
        ),
        (
            "{rollback: 7 days, records: 3 days}",
            "keeps records for 3 days, less than its rollback window of 7 days",
        ),
        ("{landing: soon}", "retention has landing 'soon', not a duration"),
    ],
)
def test_retention_refusals(tmp_path, retention, message):
    folder = spec_copy(tmp_path / "pipelines")
    spec_file = folder / "ad_events" / "ad_events.yaml"
    spec_file.write_text(spec_file.read_text() + f"retention: {retention}\n")
    with pytest.raises(UsageError) as refused:
        load_spec(spec_file)
    assert message in str(refused.value)


def test_a_topics_key_on_a_hop_that_reads_no_topic_is_refused(tmp_path):
    with pytest.raises(UsageError, match="has max_offsets_per_trigger but reads no topic"):
        load(
            tmp_path,
            "  - {name: c, kind: append, upstream: bronze, table: t/c, time_column: at, "
            "max_offsets_per_trigger: 10}\n",
        )


def test_a_spec_read_again_unchanged_is_not_parsed_again_and_any_change_is_seen(
    tmp_path, monkeypatch
):
    """The watcher and the DAG processor read every spec every few seconds: an unchanged file
    gives the spec it gave before; a changed one, or a changed file beside it (an Avro schema it
    names), is parsed again, even when the change keeps its size and time."""
    import os

    import yaml

    from spark_jobs.model import spec as module

    path = spec_copy(tmp_path / "pipelines") / "ad_events" / "ad_events.yaml"
    parsed = []
    parse = module._parse_spec
    monkeypatch.setattr(module, "_parse_spec", lambda *args: parsed.append(1) or parse(*args))
    first = load_spec(path)
    assert load_spec(path) is first and len(parsed) == 1
    # the same size and modification time, another schedule
    stat = path.stat()
    text = path.read_text()
    changed = text.replace("*/30 * * * *", "*/20 * * * *")
    assert changed != text and len(changed) == len(text)
    path.write_text(changed)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert load_spec(path).schedule == "*/20 * * * *" and len(parsed) == 2
    # a file beside it, written afresh
    schema = path.parent / "values.avsc"
    schema.write_text('{"type": "string"}')
    assert load_spec(path).schedule == "*/20 * * * *" and len(parsed) == 3
    assert load_spec(path) is load_spec(path) and len(parsed) == 3
    # a spec that does not load is refused every time, never kept
    path.write_text(yaml.safe_dump({"name": "ad_events"}))
    for _ in range(2):
        with pytest.raises(UsageError, match="not a pipeline spec"):
            load_spec(path)
