"""Fast tests without a JVM: specs, log readers, CLI errors."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_jobs.cli import main
from spark_jobs.logs import checkpoint_log, delta_log
from spark_jobs.model.errors import UsageError
from spark_jobs.model.spec import get_spec
from spark_jobs.model.times import parse_time
from tests.conftest import VENV_BIN

pytestmark = [pytest.mark.unit]


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


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "nope"], "unknown pipeline 'nope'"),
        (["run", "ad_events", "--hop", "platinum"], "unknown hop 'platinum'"),
        (["backfill", "ad_events", "--start", "2026-03-02", "--end", "2026-03-01"], "is not before --end"),
        (["backfill", "ad_events", "--start", "2026-03-01", "--end", "2026-03-01"], "is not before --end"),
        (["backfill", "ad_events", "--start", "03/01/2026", "--end", "2026-03-02"], "not an ISO-8601"),
        (["run", "ad_events", "--run-id", "../../etc"], "--run-id"),
        (["generate", "ad_events", "--events", "5", "--bad-fraction", "2"], "outside 0..1"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(argv, message, lake_home, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]


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


HOP = "{name: %s, kind: %s, table: tables/%s, time_column: t%s}"


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
     "hop b has unique: 'k': give a list of column names"),
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


def test_missing_lakehouse_home_is_created(tmp_path, monkeypatch, capsys):
    home = tmp_path / "not" / "yet"
    monkeypatch.setenv("LAKEHOUSE_HOME", str(home))
    assert main(["status", "ad_events"]) == 0
    assert home.is_dir()


def _cli(args, env):
    return subprocess.run([str(VENV_BIN / "lakehouse"), *args], env=env, capture_output=True, text=True, timeout=120)


def test_missing_java_is_a_clear_error(tmp_path):
    env = {**os.environ, "LAKEHOUSE_HOME": str(tmp_path), "PATH": str(VENV_BIN), "JAVA_HOME": ""}
    done = _cli(["run", "ad_events"], env)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: Java is not installed or not on PATH: install Java 17+ (e.g. apt-get install openjdk-17-jre-headless)"]


def test_missing_delta_jars_is_a_clear_error(tmp_path):
    env = {**os.environ, "LAKEHOUSE_HOME": str(tmp_path), "LAKEHOUSE_JARS_DIR": str(tmp_path / "nojars")}
    done = _cli(["run", "ad_events"], env)
    assert done.returncode == 2
    assert "Delta jars are missing" in done.stderr and "lakehouse setup" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_unresolvable_jars_is_a_clear_error(tmp_path, monkeypatch):
    from spark_jobs.engine import jars
    from spark_jobs.model.errors import SetupError

    bad = tmp_path / "pom.xml"
    with jars.manifest() as pom:
        bad.write_text(pom.read_text().replace("<version>4.4.0</version>", "<version>0.0.0-none</version>"))
    monkeypatch.setattr(jars, "manifest", lambda: contextlib.nullcontext(bad))
    monkeypatch.setenv("LAKEHOUSE_JARS_DIR", str(tmp_path / "jars"))
    # Maven offline with an empty local repository (its settings under a user.home of our own):
    # nothing resolves whether or not this machine reaches a repository.
    settings = tmp_path / "home" / ".m2" / "settings.xml"
    settings.parent.mkdir(parents=True)
    settings.write_text(f"<settings><offline>true</offline><localRepository>{tmp_path / 'm2'}</localRepository></settings>")
    monkeypatch.setenv("MAVEN_OPTS", f"-Duser.home={tmp_path / 'home'}")
    with pytest.raises(SetupError, match="not resolvable"):
        jars.resolve_jars()
    assert not list((tmp_path / "m2").rglob("*.jar")), "Maven downloaded something offline"


def _write_log(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def test_file_source_log_reads_newest_compact_then_later_batches(tmp_path):
    ckpt = tmp_path / "ckpt"
    entry = lambda name, batch: json.dumps({"path": f"file:///land/{name}", "timestamp": 1, "batchId": batch})
    _write_log(ckpt / "sources/0/0", ["v1", entry("a", 0)])
    _write_log(ckpt / "sources/0/1.compact", ["v1", entry("a", 0), entry("b", 1)])
    _write_log(ckpt / "sources/0/2", ["v1", entry("c", 2), entry("d", 2)])
    _write_log(ckpt / "sources/0/.2.crc", ["junk"])
    names = [e["path"].rsplit("/", 1)[-1] for e in checkpoint_log.file_source_entries(str(ckpt))]
    assert names == ["a", "b", "c", "d"]


def test_offsets_v1_and_v2_formats(tmp_path):
    ckpt = tmp_path / "ckpt"
    _write_log(ckpt / "offsets/3", ["v1", '{"batchWatermarkMs":7,"batchTimestampMs":9,"conf":{}}', '{"logOffset":5}'])
    _write_log(ckpt / "offsets/4", ["v2", '{"batchWatermarkMs":8,"batchTimestampMs":10,"conf":{}}', '0:{"logOffset":6}'])
    _write_log(ckpt / "commits/3", ["v1", '{"nextBatchWatermarkMs":7}'])
    assert checkpoint_log.offset_batch_ids(str(ckpt)) == [3, 4]
    assert checkpoint_log.commit_batch_ids(str(ckpt)) == [3]
    assert checkpoint_log.read_offsets(str(ckpt), 3).sources == [{"logOffset": 5}]
    assert checkpoint_log.read_offsets(str(ckpt), 4).sources == [{"logOffset": 6}]
    assert checkpoint_log.read_offsets(str(ckpt), 4).watermark_ms == 8


def test_delta_log_versions_and_rows_written(tmp_path):
    log = tmp_path / "t/_delta_log"
    commit = lambda metrics: json.dumps({"commitInfo": {"operation": "X", "operationMetrics": metrics}})
    _write_log(log / f"{0:020d}.json", [commit({"numOutputRows": "5"})])
    _write_log(log / f"{1:020d}.json", [commit({"numTargetRowsInserted": "2", "numTargetRowsUpdated": "3"}),
                                        json.dumps({"txn": {"appId": "q", "version": 1}})])
    (log / f"{1:020d}.crc").write_text("{}")
    table = str(tmp_path / "t")
    assert delta_log.versions(table) == [0, 1]
    assert delta_log.rows_written(table, None, 1) == 10
    assert delta_log.rows_written(table, 0, 1) == 5
    assert delta_log.transaction(table, 1) == {"appId": "q", "version": 1}
    assert delta_log.table_version(str(tmp_path / "none")) is None


def test_a_closed_pipe_ends_the_command_quietly(tmp_path):
    """``lakehouse status X | head -1``: the reader is gone before the command writes; it ends
    with the status of a process a closed pipe stopped, and says nothing."""
    env = {**os.environ, "LAKEHOUSE_HOME": str(tmp_path)}
    command = subprocess.Popen([str(VENV_BIN / "lakehouse"), "status", "ad_events"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    command.stdout.close()
    _out, err = command.communicate(timeout=120)
    assert (command.returncode, err.decode()) == (141, "")
    shown = subprocess.run([str(VENV_BIN / "lakehouse"), "status", "ad_events"], env=env, capture_output=True, text=True)
    assert shown.returncode == 0 and shown.stdout.startswith("pipeline ad_events")


def test_importing_the_package_starts_no_jvm():
    code = "import spark_jobs.cli, spark_jobs.control.status, spark_jobs.control.generator, sys; print('pyspark' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_a_killed_holder_does_not_keep_the_pipeline_lock(tmp_path, monkeypatch):
    import signal
    import time

    from spark_jobs.control.lock import holder, pipeline_lock
    from spark_jobs.model.errors import PipelineBusy
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.spec import get_spec

    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path))
    lake = Lake.open(get_spec("ad_events"))
    script = ("from spark_jobs.model.lake import Lake; from spark_jobs.model.spec import get_spec; "
              "from spark_jobs.control.lock import pipeline_lock; import time\n"
              "with pipeline_lock(Lake.open(get_spec('ad_events')), 'run', 'r-held'):\n"
              "    print('held', flush=True); time.sleep(600)")
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "LAKEHOUSE_HOME": str(tmp_path)})
    try:
        assert process.stdout.readline().strip() == "held"
        assert holder(lake)["run_id"] == "r-held"
        told = []
        with pytest.raises(PipelineBusy, match="busy: run r-held"):
            with pipeline_lock(lake, "backfill", wait_s=1.2, progress=told.append):
                pass
        assert len(told) == 1 and told[0].startswith("backfill waits for the pipeline's lock: run r-held (pid "), told
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    started = time.monotonic()
    with pipeline_lock(lake, "run", "r-next"):  # taken at once: the kernel dropped the dead holder's lock
        assert time.monotonic() - started < 1
        assert holder(lake)["run_id"] == "r-next"
    assert holder(lake) is None


def test_a_table_written_again_at_the_same_path_is_read_anew(tmp_path):
    """A long-lived process (the API server, a test process copying one lake to one path) must not
    keep the commits of a table that was deleted and written again: same path, same version."""
    import shutil

    table = tmp_path / "table"
    log = table / "_delta_log"

    def write(app_id: str) -> None:
        log.mkdir(parents=True)
        (log / f"{0:020d}.json").write_text(json.dumps({"txn": {"appId": app_id, "version": 0}}) + "\n")

    write("first-query")
    assert delta_log.transaction(str(table), 0)["appId"] == "first-query"
    shutil.rmtree(table)
    write("second-query, a longer id")
    assert delta_log.transaction(str(table), 0)["appId"] == "second-query, a longer id"


def test_an_s3_lake_is_spelt_s3a_everywhere(monkeypatch):
    from spark_jobs.model.lake import lakehouse_home

    monkeypatch.setenv("LAKEHOUSE_HOME", "s3://bucket/some/prefix/")
    assert lakehouse_home() == "s3a://bucket/some/prefix"
    monkeypatch.setenv("LAKEHOUSE_HOME", "s3a://bucket/p")
    assert lakehouse_home() == "s3a://bucket/p"


def test_source_log_paths_compare_with_listed_paths():
    """Spark records escaped URIs; fsspec lists plain paths (s3fs's without a scheme)."""
    assert checkpoint_log.listed_path("file:///tmp/a%20b/x.json") == "/tmp/a b/x.json"
    assert checkpoint_log.listed_path("/tmp/a/x.json") == "/tmp/a/x.json"
    assert checkpoint_log.listed_path("s3a://bucket/lake/a%20b/x.json") == "bucket/lake/a b/x.json"
    assert checkpoint_log.listed_path("s3://bucket/x.json") == "bucket/x.json"


def test_s3a_settings_come_from_the_standard_aws_variables():
    from spark_jobs.engine.session import s3a_confs

    assert s3a_confs({}) == {"fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem"}  # AWS itself: the SDK's chain
    confs = s3a_confs({"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1",
                       "AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "key"})
    assert confs["fs.s3a.endpoint"] == "http://127.0.0.1:9000" and confs["fs.s3a.path.style.access"] == "true"
    assert confs["fs.s3a.endpoint.region"] == "eu-west-1"
    assert (confs["fs.s3a.access.key"], confs["fs.s3a.secret.key"]) == ("id", "key")
    assert "fs.s3a.session.token" not in confs
    assert s3a_confs({"AWS_DEFAULT_REGION": "us-east-2"})["fs.s3a.endpoint.region"] == "us-east-2"


def test_a_clusters_properties_file_reads_as_spark_submit_reads_it(tmp_path):
    """``$LAKEHOUSE_SPARK_PROPERTIES`` (make run-cluster's shared secret) for a ``lakehouse`` driver:
    ``key value`` and ``key=value`` lines, comments and blank lines left out."""
    from spark_jobs.engine.session import properties_file

    path = tmp_path / "spark.conf"
    path.write_text("# the cluster's\nspark.authenticate true\n\nspark.authenticate.secret=s3cr3t-value\n"
                    "spark.executor.extraJavaOptions   -Da=1 -Db=2\n")
    assert properties_file(str(path)) == {"spark.authenticate": "true", "spark.authenticate.secret": "s3cr3t-value",
                                          "spark.executor.extraJavaOptions": "-Da=1 -Db=2"}


def test_a_multi_source_sample_writes_each_sources_file_and_payments_name_their_orders(lake_home, capsys, tmp_path,
                                                                                        monkeypatch):
    """``lakehouse generate shop``: an orders JSON-lines file and a payments CSV file (header
    first) per file index, in each ingest hop's landing folder; every payment names an order of
    the same call; the counts it prints are the files' (read back here as plain text)."""
    assert main(["generate", "shop", "--events", "400", "--files", "2", "--seed", "7", "--bad-fraction", "0.05",
                 "--start", "2026-03-01T00:00:00", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    orders = sorted((lake_home / "landing/shop/orders").glob("*.json"))
    payments = sorted((lake_home / "landing/shop/payments").glob("*.csv"))
    assert len(orders) == len(payments) == 2 and sorted(map(str, orders + payments)) == sorted(result["files"])
    parsed, bad = [], 0
    for path in orders:
        for line in path.read_text().splitlines():
            try:
                order = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if not order["order_id"].startswith("o-") or {"merchant_id", "customer_id"} - set(order) or \
                    not isinstance(order["amount"], (int, float)) or order["currency"] not in ("EUR", "USD", "GBP"):
                bad += 1
            else:
                parsed.append(order)
    rows = [path.read_text().splitlines() for path in payments]
    assert all(lines[0] == "payment_id,order_id,paid_amount,status,paid_time" for lines in rows)
    bodies = [line.split(",") for lines in rows for line in lines[1:]]
    def valid(fields: list[str]) -> bool:
        from datetime import datetime

        try:
            float(fields[2]), datetime.fromisoformat(fields[4])
        except (ValueError, IndexError):
            return False
        return len(fields) == 5 and fields[3] in ("paid", "failed")

    good = [fields for fields in bodies if valid(fields)]
    bad += len(bodies) - len(good)
    assert bad == result["bad_lines"] > 0
    assert {fields[1] for fields in good} <= {order["order_id"] for order in parsed}
    distinct = {order["order_id"] for order in parsed}
    assert len(distinct) + result["bad_lines"] // 2 == result["events"] == 400 and len(parsed) > len(distinct)
    # A sample that names a folder the spec does not have: one line naming the hop and the fix.
    specs = tmp_path / "team"
    specs.mkdir()
    (specs / "one.yaml").write_text("name: one\nlanding: landing/one\nhops:\n"
                                    "  - {name: bronze, kind: ingest, table: tables/one, time_column: t}\n")
    (specs / "one_sample.py").write_text(
        "from spark_jobs.authoring import SampleFiles\n"
        "def landing_files(rng, start_ms, events, bad_fraction, late_fraction):\n"
        "    return SampleFiles({'orders': ('.json', '{}\\n')}, events)\n")
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(specs))
    assert main(["generate", "one", "--events", "1"]) == 2
    assert "sample writes files for orders, which is not an ingest hop: use one of bronze" in capsys.readouterr().err


GOLD_PLAN = """\
~Project [kind#10, window#20-T60000ms.start AS window_start#30, count#21L]
+- ~Aggregate [window#25-T60000ms, kind#10], [window#25-T60000ms AS window#20-T60000ms, kind#10, count(1) AS count#21L]
   +- ~Project [named_struct(start, (event_ts#11-T60000ms % 60000000)) AS window#25-T60000ms, kind#10, \
exists(tags#13, lambdafunction(lambda x_1#40 = a, lambda x_1#40, false)) AS tagged#41]
      +- ~Filter isnotnull(event_ts#11-T60000ms)
         +- ~EventTimeWatermark 4846bf13-83ec-44ae-b376-d951bbf09d57, event_ts#11: timestamp, 1 minutes
            +- StreamingRelation FileSource[/lake/a], [kind#10, event_ts#11, _batch_id#12L], name=<Unassigned>"""


@pytest.mark.parametrize("edit, kind", [
    (lambda plan: plan.replace("#1", "#7").replace("4846bf13", "00000000"), "unchanged"),
    (lambda plan: plan.replace("/lake/a", "/elsewhere/b"), "unchanged"),
    (lambda plan: plan.replace("lambda x_1", "lambda x_9"), "unchanged"),  # PySpark's per-process numbering
    (lambda plan: plan.replace("count#21L]\n", "count#21L, kind#10 AS k#31]\n", 1), "compatible"),
    (lambda plan: plan.replace("1 minutes", "2 minutes").replace("-T60000ms", "-T120000ms"), "compatible"),
    (lambda plan: plan.replace("% 60000000", "% 120000000"), "incompatible"),
    (lambda plan: plan.replace("isnotnull(event_ts#11-T60000ms)", "(kind#10 = a)"), "incompatible"),
    (lambda plan: plan.replace("~Aggregate [window#25-T60000ms, kind#10]", "~Aggregate [window#25-T60000ms]"),
     "incompatible"),
], ids=["ids", "paths", "lambdas", "column-above-the-state", "watermark-delay", "window", "filter-below", "key"])
def test_a_query_fingerprint_tells_changes_its_state_can_follow(edit, kind):
    """Expected kinds by Spark's rules for a restarted query: only what feeds the state (keys,
    windows, filters before it) is incompatible; ids, paths and the watermark delay are not."""
    from spark_jobs.control import fingerprint
    from spark_jobs.model.spec import HopSpec

    hop = HopSpec(name="gold", kind="aggregate", table="t", time_column="window_start", upstreams=("silver",),
                  keys=("kind", "window_start"))
    old, new = (fingerprint.of_plan(plan, hop, "code") for plan in (GOLD_PLAN, edit(GOLD_PLAN)))
    assert old.stateful == ("Aggregate",)
    assert fingerprint.change(old, new) == kind
    assert fingerprint.change(None, new) == "unchanged"  # no committed batch: any code may start


def test_a_state_rebuild_is_refused_for_a_hop_that_reads_landing_files(tmp_path):
    from spark_jobs.control import rebuild
    from spark_jobs.model.lake import Lake
    from spark_jobs.model.spec import get_spec

    lake = Lake(str(tmp_path), get_spec("ad_events"))
    said = rebuild.refusal(lake, lake.spec.hop("bronze"), "2026-03-01T00:00:00")
    assert said.startswith("--from 2026-03-01T00:00:00: hop bronze reads landing files") and "leave out --from" in said
    assert rebuild.refusal(lake, lake.spec.hop("gold"), "2026-03-01T00:00:00") is None


def test_a_rollback_plan_widens_a_joins_rebackfill_and_lists_each_hops_backfills_once(tmp_path):
    """Shop's model, seed 42: a join that starts over owes an ingest upstream's backfilled range
    widened by its ``within`` (payments of 06:00..08:00 pair with orders from 05:00), and the
    plan's list then named silver_paid twice over overlapping ranges. Plain files, no JVM."""
    from spark_jobs.control import rollback
    from spark_jobs.model.lake import Lake

    lake = Lake(str(tmp_path), get_spec("shop"))
    runs = Path(lake.runs)
    runs.mkdir(parents=True)
    for hop, start, end in (("bronze_payments", "06:00", "08:00"), ("bronze_orders", "22:00", "23:00")):
        record = {"run_id": f"bf-{hop}", "hop": hop, "mode": "backfill", "status": "succeeded", "started_at": 1,
                  "range_start": f"2026-03-01T{start}:00.000", "range_end": f"2026-03-01T{end}:00.000"}
        (runs / f"bf-{hop}.{hop}.json").write_text(json.dumps(record))
    starts_over = {"target_batch": -1, "undone": [0, 1], "tables": []}
    # within is 1 hour in shop.yaml: the payments' range one hour wider each side; bronze_orders
    # feeds the join through silver_orders, whose own step owes that range as it was
    assert rollback._rebackfill(lake, lake.spec.hop("silver_paid"), starts_over) == [
        ["2026-03-01T05:00:00.000", "2026-03-01T09:00:00.000"]]
    assert rollback._rebackfill(lake, lake.spec.hop("silver_orders"), starts_over) == [
        ["2026-03-01T22:00:00.000", "2026-03-01T23:00:00.000"]]
    assert rollback._rebackfill(lake, lake.spec.hop("silver_paid"), {**starts_over, "target_batch": 0}) == []

    steps = [{"hop": "silver_orders", "rebackfill": [["2026-03-01T06:00:00.000", "2026-03-01T08:00:00.000"],
                                                     ["2026-03-01T10:00:00.000", "2026-03-01T11:00:00.000"]]},
             {"hop": "silver_paid", "rebackfill": [["2026-03-01T05:00:00.000", "2026-03-01T09:00:00.000"],
                                                   ["2026-03-01T09:00:00.000", "2026-03-01T09:30:00.000"]]}]
    listed = [(each["hop"], each["start"][11:16], each["end"][11:16]) for each in rollback._backfills(lake, steps)]
    assert listed == [("silver_orders", "06:00", "08:00"), ("silver_orders", "10:00", "11:00"),
                      ("silver_paid", "05:00", "09:30"), ("silver_paid", "10:00", "11:00"),
                      ("gold_merchant_revenue", "05:00", "09:30"), ("gold_merchant_revenue", "10:00", "11:00")]


def test_a_rollback_plan_to_a_run_says_which_of_its_repairs_it_leaves(tmp_path):
    """The stream DAG's undo rolls back to before the run; a repair the run made at a hop whose
    stream wrote no batch in it is not undone (it would be backfilled again from the same rows),
    and the plan says so with the command that redoes it. Plain files, no JVM."""
    from spark_jobs.control import rollback
    from spark_jobs.model.lake import Lake

    lake = Lake(str(tmp_path), get_spec("shop"))
    gold = lake.spec.hop("gold_merchant_revenue")
    runs = Path(lake.runs)
    runs.mkdir(parents=True)
    for run_id in ("R.repair-1", "S.repair-1"):
        record = {"run_id": run_id, "hop": gold.name, "mode": "backfill", "status": "succeeded", "repair": True,
                  "started_at": 1, "range_start": "2026-03-01T05:00:00.000", "range_end": "2026-03-01T09:00:00.000",
                  "tables": {lake.table(gold): {"version_after": 5}}}
        (runs / f"{run_id}.{gold.name}.json").write_text(json.dumps(record))

    def restoring(version: int) -> list[dict]:
        return [{"hop": gold.name, "tables": [{"table": lake.table(gold), "restore_to": version}]}]

    [note] = rollback._repairs_kept(lake, [gold], "R", [])  # the plan does nothing at gold
    assert note.startswith("gold_merchant_revenue: the run's repair R.repair-1 (2026-03-01T05:00:00.000 .. ")
    assert note.endswith("`lakehouse backfill shop --hop gold_merchant_revenue --start 2026-03-01T05:00:00.000 "
                         "--end 2026-03-01T09:00:00.000`")
    assert rollback._repairs_kept(lake, [gold], "R", restoring(5)) == [note]  # the restore keeps its commit
    assert rollback._repairs_kept(lake, [gold], "R", restoring(4)) == []  # the restore undoes it
    assert rollback._repairs_kept(lake, [gold], "T", []) == []  # another run's repairs are not this run's


@pytest.mark.quality
def test_a_stream_runs_gate_fails_when_one_of_its_repairs_failed(tmp_path, monkeypatch):
    """The stream DAG's hop task runs with ``--quality=report``, so a failed ``fail`` rule on what a
    join's repair wrote (run id ``<run>.repair-N``) must fail the hop's gate task, and the undo
    planner must name the hop. Plain files, no JVM; ``Recorder`` stands in for Airflow's task
    instance (only ``xcom_push`` is called)."""
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException
    from lakehouse_airflow.checks import plan_undo, quality_gate

    from spark_jobs.control import suites
    from spark_jobs.model.lake import Lake

    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path))
    lake = Lake.open(get_spec("shop"))
    folder = Path(suites.results_dir(lake))
    folder.mkdir(parents=True)

    def summary(run_id: str, hop: str, gate: str) -> None:
        failed = ["expect_column_values_to_not_be_null(amount)"] if gate == "failed" else []
        (folder / f"{run_id}.{hop}.json").write_text(json.dumps({
            "run_id": run_id, "hop": hop, "gate": gate, "failed": failed, "warned": [], "rules": [],
            "suite": f"shop.{hop}", "rows": 3, "versions": [4, 5], "seconds": 0.1}))

    class Recorder:
        def __init__(self):
            self.pushed = {}

        def xcom_push(self, key, value):
            self.pushed[key] = value

    for hop in ("bronze_orders", "bronze_payments", "silver_orders", "silver_paid"):
        summary("R", hop, "passed")
    summary("R.repair-1", "silver_paid", "passed")
    summary("R2.repair-1", "silver_paid", "failed")  # another run's repair
    summary("R.repair-1", "gold_merchant_revenue", "failed")  # another hop's repair
    assert quality_gate("shop", "silver_paid", "R", Recorder())["gate"] == "passed"
    assert plan_undo("shop", "R") == "gold_merchant_revenue"  # its own repair failed
    (folder / "R.repair-1.gold_merchant_revenue.json").unlink()
    with pytest.raises(AirflowSkipException):
        plan_undo("shop", "R")

    summary("R.repair-2", "silver_paid", "failed")
    assert [each["run_id"] for each in suites.read_repair_summaries(lake, "R", "silver_paid")] == [
        "R.repair-1", "R.repair-2"]
    with pytest.raises(AirflowFailException, match="failed on the run's repair R.repair-2"):
        quality_gate("shop", "silver_paid", "R", Recorder())
    assert plan_undo("shop", "R") == "silver_paid"  # the first hop, in the spec's order, whose gate failed


def test_an_always_on_query_that_stopped_by_itself_fails_the_session():
    """``run --continuous`` checks each query every second: one with an exception fails the
    session, and so does one that is no longer active with none (a query the session did not
    stop). A stand-in for Spark's StreamingQuery: only the two members the check reads."""
    from spark_jobs.engine.runner import query_failure

    class Query:
        def __init__(self, active: bool, error: Exception | None = None):
            self.isActive, self.error = active, error

        def exception(self):
            return self.error

    assert query_failure("gold", Query(active=True)) is None
    assert query_failure("gold", Query(active=True, error=RuntimeError("boom\nat ..."))) == "gold failed: boom"
    assert query_failure("gold", Query(active=False, error=RuntimeError("boom"))) == "gold failed: boom"
    assert query_failure("gold", Query(active=False)).startswith("gold's query stopped without an error")
