"""The spec as the model layer reads it: hops, graph errors naming the fix, inputs, times (no JVM)."""

from __future__ import annotations

import pytest

from spark_jobs.cli import main
from spark_jobs.model.errors import UsageError
from spark_jobs.model.spec import get_spec, load_spec
from spark_jobs.model.times import parse_time

pytestmark = [pytest.mark.unit]

HOP = "{name: %s, kind: %s, table: tables/%s, time_column: t%s}"


def test_spec_has_three_hops_in_order():
    spec = get_spec("ad_events")
    assert spec.hop_names == ("bronze", "silver", "gold")
    assert [hop.upstream for hop in spec.hops] == [None, "bronze", "silver"]
    assert spec.downstream_of("bronze") == spec.hops[1:]


def test_parse_time_is_utc_without_offset():
    assert parse_time("2026-03-01", "--start") == 1_772_323_200_000
    assert parse_time("2026-03-01T01:00:00+01:00", "--start") == 1_772_323_200_000
    with pytest.raises(UsageError, match="not an ISO-8601"):
        parse_time("yesterday", "--start")


def test_a_broken_spec_fails_alone(pipelines, lake_home, capsys):
    """A second spec that does not load leaves ad_events working; naming it gives its problem."""
    folder = pipelines()
    (folder / "shop.yaml").write_text("name: shop\nlanding: landing/shop\nhops: [{name: bronze, kind: ingest}]\n")
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
    (folder / "plain.yaml").write_text("name: plain\nlanding: landing/plain\nhops:\n"
                                       "  - {name: bronze, kind: ingest, table: tables/bronze/plain, time_column: t}\n")
    spec = get_spec("plain")
    assert spec.inputs == {} and get_spec("ad_events").input("campaigns") == "landing/campaigns"
    with pytest.raises(UsageError, match="needs the input 'campaigns'"):
        spec.input("campaigns")


@pytest.mark.parametrize("hops, problem", [
    ([("a", "ingest", ""), ("b", "sideways", ", upstream: a")],
     "hop b has kind 'sideways': use one of ingest, append, aggregate"),
    ([("a", "ingest", ""), ("b", "append", ", upstream: c")], "hop b has upstream 'c', which is not a hop of this spec"),
    ([("a", "ingest", ""), ("b", "append", ", upstream: c"), ("c", "append", ", upstream: b")],
     "hop b has upstream 'c', which is below it: hops run top to bottom, so list it above"),
    ([("a", "ingest", ""), ("b", "append", ", upstream: b")], "hop b has upstream 'b', which is below it"),
    ([("a", "ingest", ""), ("a", "append", ", upstream: a")], "two hops are called 'a': rename one"),
    ([("a", "ingest", ""), ("b", "aggregate", "")], "hop b (kind aggregate) reads a table: add `upstream: <a hop above it>`"),
    ([("a", "ingest", ""), ("b", "ingest", ", upstream: a")], "hop b (kind ingest) reads the landing files, not 'a'"),
    ([("a", "ingest", ""), ("b", "ingest", ""), ("c", "append", ", upstream: [a, b]")],
     "hop c (kind append) reads one table, not ['a', 'b']: name one upstream, or use kind join"),
    ([("a", "ingest", ""), ("c", "join", ", upstream: [a], within: 1 hour")],
     "hop c (kind join) needs `upstream: [<hop>, <hop>]` (two or more different hops above it) and `within: "),
    ([("a", "ingest", ""), ("b", "ingest", ""), ("c", "join", ", upstream: [a, b]")], "hop c (kind join) needs"),
    ([("a", "ingest", ""), ("b", "ingest", ""), ("c", "join", ", upstream: [a, b], within: soon")],
     "hop c has within 'soon', not a duration: use e.g. `1 hour`"),
    ([("a", "ingest", ""), ("c", "join", ", upstream: [a, d], within: 1 hour")],
     "hop c has upstream 'd', which is not a hop of this spec"),
    ([("a", "ingest", ""), ("b", "aggregate", ", upstream: a, unique: [k]")],
     "hop b has unique: ['k'], which only append and join hops take: remove it"),
    ([("a", "ingest", ""), ("b", "append", ", upstream: a, unique: k")],
     "hop b has unique 'k', not a list of column names: use e.g. `[event_date]`"),
], ids=["unknown-kind", "unknown-upstream", "cycle", "self", "duplicate", "no-upstream", "ingest-upstream",
        "two-upstreams-not-join", "join-one-upstream", "join-no-within", "join-bad-within", "join-unknown-upstream",
        "unique-on-aggregate", "unique-not-a-list"])
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

    spec = load("", ("a", "ingest", own.format("x")), ("b", "ingest", own.format("y")),
                ("c", "append", ", upstream: a"), ("d", "append", ", upstream: b"))
    assert spec.landings == {"a": "landing/x", "b": "landing/y"} and spec.sink is None
    assert [hop.name for hop in spec.feeds("a")] == ["c"]
    spec = load("landing: landing/team\n", ("a", "ingest", ""), ("b", "ingest", own.format("y")),
                ("c", "append", ", upstream: a"), ("d", "append", ", upstream: c"))
    assert spec.landings == {"a": "landing/team", "b": "landing/y"} and spec.sink is None  # b never reaches d
    spec = load("landing: landing/team\n", ("a", "ingest", ""), ("c", "append", ", upstream: a"),
                ("e", "append", ", upstream: a"), ("d", "aggregate", ", upstream: c"))
    assert spec.sink is None  # e never reaches d
    spec = load("landing: landing/team\n", ("a", "ingest", ""), ("b", "ingest", own.format("y")),
                ("c", "join", ", upstream: [a, b], within: 1 hour"), ("d", "aggregate", ", upstream: c"))
    assert spec.sink.name == "d" and spec.hop("c").upstreams == ("a", "b") and spec.hop("c").upstream is None
    assert [hop.name for hop in spec.downstream_of("b")] == ["c", "d"] and spec.hop("c").within_ms == 3_600_000
    assert load("landing: landing/team\n", ("a", "ingest", ""), ("c", "append", ", upstream: a"),
                ("d", "aggregate", ", upstream: c")).sink.name == "d"
    for top, hops, problem in [
        ("", [("a", "ingest", "")], "hop a (kind ingest) has no landing folder: add `landing: <path under "
                                    "LAKEHOUSE_HOME>` to the hop or to the pipeline"),
        ("landing: landing/team\n", [("a", "ingest", ""), ("b", "append", ", upstream: a" + own.format("b"))],
         "hop b (kind append) reads a table, not a landing folder: remove its landing key"),
    ]:
        with pytest.raises(UsageError) as refused:
            load(top, *hops)
        assert str(refused.value) == f"{spec_file}: {problem}"


def test_an_s3_lake_is_spelt_s3a_everywhere(monkeypatch):
    from spark_jobs.model.lake import lakehouse_home

    monkeypatch.setenv("LAKEHOUSE_HOME", "s3://bucket/some/prefix/")
    assert lakehouse_home() == "s3a://bucket/some/prefix"
    monkeypatch.setenv("LAKEHOUSE_HOME", "s3a://bucket/p")
    assert lakehouse_home() == "s3a://bucket/p"


@pytest.mark.parametrize("top, hop_extra, problem", [
    ("allowed_latenes: 30 minutes\n", "", "the pipeline has unknown key `allowed_latenes`: did you mean `allowed_lateness`?"),
    ("", ", uniq: [k]", "hop a has unknown key `uniq`: did you mean `unique`?"),
    ("", ", color: red", "hop a has unknown key `color`: remove it (valid keys: name, kind, table, time_column, "),
    ("window: ten seconds\n", "", "the pipeline has window 'ten seconds', not a duration: use e.g. `10 seconds`"),
    ("freshness: soon\n", "", "the pipeline has freshness 'soon', not a duration: use e.g. `15 minutes`"),
    ("shuffle_partitions: 0\n", "", "the pipeline has shuffle_partitions 0, not a positive whole number"),
    ("backfill_start: March\n", "", "the pipeline has backfill_start 'March', not a date"),
    ("inputs: [campaigns]\n", "", "the pipeline has inputs ['campaigns'], not a mapping of names to paths"),
    ("", ", partition_by: event_date", "hop a has partition_by 'event_date', not a list of column names"),
    ("", ", table: 7", "hop a has table 7, not a non-empty string"),
], ids=["pipeline-typo", "hop-typo", "hop-unknown", "window", "freshness", "partitions", "start", "inputs",
        "partition-by", "table"])
def test_a_key_the_spec_does_not_declare_or_a_value_of_the_wrong_type_is_refused(pipelines, top, hop_extra, problem):
    """A misspelled key is an error naming the nearest valid one, never a silent default."""
    folder = pipelines()
    assert _refusal(folder, top, hop_extra).startswith(f"{folder / 'team.yaml'}: {problem}")


def _refusal(folder, top: str, hop_extra: str = "") -> str:
    """Why a one-hop spec ``team`` with these pipeline keys (``top``) and hop keys is refused."""
    (folder / "team.yaml").write_text(f"name: team\nlanding: landing/team\n{top}hops:\n  - "
                                      + "{name: a, kind: ingest, table: tables/a, time_column: t%s}\n" % hop_extra)
    with pytest.raises(UsageError) as refused:
        get_spec("team")
    return str(refused.value)


def test_a_pipeline_name_that_cannot_name_dags_and_tables_is_refused(pipelines):
    folder = pipelines()
    (folder / "Team-1.yaml").write_text("name: Team-1\nlanding: landing/team\nhops:\n"
                                        "  - {name: a, kind: ingest, table: tables/a, time_column: t}\n")
    with pytest.raises(UsageError, match="the pipeline's name 'Team-1' is not allowed: use lower-case letters"):
        get_spec("Team-1")


def test_the_spec_reference_lists_every_declared_key_with_the_specs_defaults(tmp_path):
    """docs/reference/spec.md's tables come from spark_jobs/model/spec_keys.py; each knob's
    default is the one PipelineSpec applies when the key is left out; its example loads."""
    import importlib.util

    from spark_jobs.model.spec import PipelineSpec
    from spark_jobs.model.spec_keys import HOP_KEYS, PIPELINE_KEYS, RETENTION_KEYS
    from testkit.paths import ROOT

    found = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(found)
    found.loader.exec_module(hooks)
    page = hooks.spec_page((ROOT / "docs" / "reference" / "spec.md").read_text())
    top, rest = page.split("## Retention keys")
    retention, hops = rest.split("## Hop keys")
    rows = {line.split("|")[1].strip(): line for line in top.splitlines() if line.startswith("| `")}
    assert {f"`{key.name}`" for key in PIPELINE_KEYS} == set(rows)
    assert {f"`{key.name}`" for key in RETENTION_KEYS} == {line.split("|")[1].strip() for line in retention.splitlines()
                                                         if line.startswith("| `")}
    assert {f"`{key.name}`" for key in HOP_KEYS} == {line.split("|")[1].strip() for line in hops.splitlines()
                                                    if line.startswith("| `")}
    defaults = PipelineSpec(name="x", landing=None, hops=())
    for key in ("schedule", "window", "allowed_lateness", "shuffle_partitions", "min_batches_to_retain"):
        assert f"| `{getattr(defaults, key)}` |" in rows[f"`{key}`"], rows[f"`{key}`"]
    assert page.count("<!-- end ") == 3  # each table between its pair of lines, written again in place
    spec_file = tmp_path / "shop.yaml"
    spec_file.write_text(page.split("```yaml")[1].split("```")[0])
    assert load_spec(spec_file).hop_names[-1] == "gold_merchant_revenue"


def _runs_by_hand(schedule: str, days: int) -> int:
    """A cron schedule's runs in ``days`` days, counted minute by minute (the common forms only)."""
    minute, hour, *_rest = schedule.split()
    per_hour = 60 // int(minute[2:]) if minute.startswith("*/") else 1
    return per_hour * (24 if hour == "*" else 1) * days


@pytest.mark.parametrize("schedule, days", [("*/30 * * * *", 7), ("0 * * * *", 3), ("*/5 * * * *", 2),
                                            ("15 6 * * *", 30)])
def test_a_rollback_window_sets_the_batches_the_checkpoints_keep_or_refuses_too_few(pipelines, schedule, days):
    """retention.rollback: the checkpoints keep two batches per scheduled run in the window (at
    least Spark's 100 when the spec gives no number); a spec that keeps fewer is refused with the
    number it needs."""
    folder = pipelines()
    runs = _runs_by_hand(schedule, days)
    needed = 2 * runs

    def load(extra: str):
        (folder / "team.yaml").write_text(f"name: team\nlanding: landing/team\nschedule: \"{schedule}\"\n{extra}hops:\n"
                                          "  - {name: a, kind: ingest, table: tables/a, time_column: t}\n")
        return get_spec("team")

    assert load(f"retention: {{rollback: {days} days}}\n").min_batches_to_retain == max(100, needed)
    assert load(f"retention: {{rollback: {days} days}}\nmin_batches_to_retain: {needed}\n").min_batches_to_retain == needed
    assert load("").min_batches_to_retain == 100 and load("").retention == {}
    with pytest.raises(UsageError) as refused:
        load(f"retention: {{rollback: {days} days}}\nmin_batches_to_retain: {needed - 1}\n")
    assert f"keeps {needed - 1} batches (min_batches_to_retain), but a rollback window of {days} days" in str(refused.value)
    assert f"needs {needed} ({runs} runs of up to 2 batches): raise min_batches_to_retain to {needed}" in str(refused.value)


@pytest.mark.parametrize("retention, problem", [
    ("{rollbak: 7 days}", "retention has unknown key `rollbak`: did you mean `rollback`?"),
    ("{rollback: a week}", "retention has rollback 'a week', not a duration: use e.g. `7 days`"),
    ("{rollback: 45 days}", "the pipeline has retention.rollback '45 days', longer than the 30 days Delta keeps"),
    ("7 days", "the pipeline has retention '7 days', not a mapping"),
], ids=["typo", "not-a-duration", "beyond-delta", "not-a-mapping"])
def test_a_rollback_window_that_cannot_be_had_is_refused(pipelines, retention, problem):
    folder = pipelines()
    assert _refusal(folder, f"retention: {retention}\n").startswith(f"{folder / 'team.yaml'}: {problem}")


def test_a_rollback_window_needs_a_schedule_whose_runs_can_be_counted(pipelines):
    assert "give a cron schedule" in _refusal(pipelines(), "schedule: \"@continuous\"\nretention: {rollback: 1 day}\n")


def test_a_topic_fed_ingest_hop_reads_its_topic_and_nothing_else(pipelines):
    folder = pipelines()
    (folder / "team.yaml").write_text("name: team\nhops:\n  - {name: a, kind: ingest, topic: events, "
                                      "max_offsets_per_trigger: 500, table: tables/a, time_column: t}\n")
    hop = get_spec("team").hop("a")
    assert (hop.reads, hop.reads_topic, hop.reads_landing, hop.ingests) == ("topic", True, False, True)
    assert (hop.topic, hop.starting_offsets, hop.max_offsets_per_trigger) == ("events", "earliest", 500)
    assert get_spec("team").landings == {}  # no landing folder to list or to generate into

    assert "reads topic 'events' and landing folder 'landing/x': keep one" in _refusal(
        folder, "", ", topic: events, landing: landing/x")
    assert "has starting_offsets 'oldest': use earliest or latest" in _refusal(
        folder, "", ", topic: events, starting_offsets: oldest")
    assert "has max_offsets_per_trigger 0, not a positive whole number" in _refusal(
        folder, "", ", topic: events, max_offsets_per_trigger: 0")


def test_a_hop_reads_topics_by_pattern_or_by_name_not_both(pipelines):
    folder = pipelines()
    (folder / "team.yaml").write_text("name: team\nhops:\n  - {name: a, kind: ingest, topic_pattern: '^orders-[a-z]+$', "
                                      "table: tables/a, time_column: t}\n")
    hop = get_spec("team").hop("a")
    assert (hop.reads, hop.reads_topic, hop.reads_landing) == ("topic", True, False)
    assert hop.subscription == ("subscribePattern", "^orders-[a-z]+$")
    assert hop.topic_label == "the topics matching '^orders-[a-z]+$'"

    assert "has topic 'events' and topic_pattern 'e.*': keep one" in _refusal(
        folder, "", ", topic: events, topic_pattern: 'e.*'")
    assert "has topic_pattern 'e[', which is no regular expression" in _refusal(folder, "", ", topic_pattern: 'e['")
    assert "reads topic_pattern 'e.*' and landing folder 'landing/x': keep one" in _refusal(
        folder, "", ", topic_pattern: 'e.*', landing: landing/x")


def test_avro_values_need_a_topic_and_a_record_schema_beside_the_spec(pipelines):
    folder = pipelines()
    (folder / "event.avsc").write_text('{"type": "record", "name": "E", "fields": [{"name": "t", "type": "long"}]}')
    (folder / "list.avsc").write_text('["long", "null"]')
    (folder / "team.yaml").write_text("name: team\nhops:\n  - {name: a, kind: ingest, topic: events, avro: {schema: "
                                      "event.avsc, header: confluent}, table: tables/a, time_column: t}\n")
    avro = get_spec("team").hop("a").avro
    assert avro.confluent and '"name": "t"' in avro.schema

    assert "has avro but reads no topic" in _refusal(folder, "", ", avro: {schema: event.avsc}")
    assert "has avro {'schemas': 'event.avsc'}: give `{schema: <file>.avsc}`" in _refusal(
        folder, "", ", topic: e, avro: {schemas: event.avsc}")
    assert "has avro header 'registry': use none or confluent" in _refusal(
        folder, "", ", topic: e, avro: {schema: event.avsc, header: registry}")
    assert f"avro schema {folder / 'gone.avsc'} is not readable JSON" in _refusal(
        folder, "", ", topic: e, avro: {schema: gone.avsc}")
    assert "list.avsc is not a record schema" in _refusal(folder, "", ", topic: e, avro: {schema: list.avsc}")
