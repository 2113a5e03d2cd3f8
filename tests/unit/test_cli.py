"""The CLI's contract without a JVM: bad usage is one line and exit 2, a missing Java, jars or
lake folder is a clear error, a closed pipe ends quietly, importing the package starts no JVM;
the drivers' settings."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys

import pytest

from spark_jobs.cli import main
from testkit.paths import VENV_BIN

pytestmark = [pytest.mark.unit]


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
    code = "import spark_jobs.cli, spark_jobs.control.status, spark_jobs.control.writers.samples, sys; print('pyspark' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


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


def test_progress_lines_carry_the_seconds_since_the_command_began_and_json_keeps_quiet(capsys):
    from types import SimpleNamespace

    from spark_jobs.cli import _progress

    _progress(SimpleNamespace(json=True))("[bronze] batch 0: 10 rows")
    assert capsys.readouterr().err == ""
    _progress(SimpleNamespace(json=False))("[bronze] batch 0: 10 rows")
    assert re.fullmatch(r" *\d+\.\ds \[bronze\] batch 0: 10 rows\n", capsys.readouterr().err)


@pytest.mark.parametrize("master, host, bind, expected", [
    ("local[2]", "", "", ("127.0.0.1", "127.0.0.1")),
    ("spark://127.0.0.1:7077", "", "", ("127.0.0.1", "127.0.0.1")),
    ("spark://localhost:7077", "", "", ("127.0.0.1", "127.0.0.1")),
    ("spark://10.0.0.5:7077", "10.0.0.1", "", ("10.0.0.1", "10.0.0.1")),
    ("k8s://https://10.0.0.5:6443", "driver.svc", "0.0.0.0", ("driver.svc", "0.0.0.0")),
    ("spark://10.0.0.5:7077", "", "", None),
    ("yarn", "", "", None),
], ids=["local", "loopback-master", "localhost-master", "remote-with-host", "k8s-with-bind", "remote-without",
        "yarn-without"])
def test_the_drivers_address_follows_the_settings_and_a_remote_master_needs_one(monkeypatch, master, host, bind,
                                                                                 expected):
    from spark_jobs.model.errors import UsageError
    from spark_jobs.model.settings import driver_addresses

    monkeypatch.setenv("LAKEHOUSE_SPARK_DRIVER_HOST", host)
    monkeypatch.setenv("LAKEHOUSE_SPARK_DRIVER_BIND", bind)
    if expected is None:
        with pytest.raises(UsageError, match=f"the Spark master {master} has executors on other machines.*set "
                                             "LAKEHOUSE_SPARK_DRIVER_HOST"):
            driver_addresses(master)
        return
    found = driver_addresses(master)
    assert (found["spark.driver.host"], found["spark.driver.bindAddress"]) == expected
    assert found["SPARK_LOCAL_IP"] == expected[1]
