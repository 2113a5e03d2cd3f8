"""The distribution as a team installs it: a wheel built from this checkout, installed with the
pinned requirements into a new virtualenv in a folder that holds no checkout, then used from
there only: ``lakehouse new`` scaffolds a pipeline in the team's folder, it runs, and that
venv's Airflow parses the one-line DAG file with the plugin loaded from the entry point.

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

DAG_FILE = "from lakehouse_airflow.dag_factory import build_all; globals().update(build_all())  # the lakehouse's DAGs\n"
DAGBAG_PROBE = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
print(json.dumps({"dags": sorted(bag.dags), "errors": bag.import_errors,
                  "heavy": sorted(m for m in ("pyspark", "delta", "great_expectations") if m in sys.modules)}))
"""


def _run(argv: list, env: dict, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    done = subprocess.run([str(part) for part in argv], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, argv))} exited {done.returncode}:\n{done.stderr[-3000:]}"
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
    _run([uv, "venv", "-q", "--python", sys.executable, venv], os.environ.copy(), team.parent)
    _run([uv, "pip", "install", "-q", "--python", venv / "bin" / "python", "-r", ROOT / "requirements.txt", wheel],
         os.environ.copy(), tmp_path)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("LAKEHOUSE_", "AIRFLOW", "PYTHON", "VIRTUAL_ENV", "SPARK_"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}", AIRFLOW_HOME=str(team / "airflow"),
               AIRFLOW__CORE__LOAD_EXAMPLES="False", LAKEHOUSE_HOME=str(team / "lake"),
               LAKEHOUSE_PIPELINES=str(team / "pipelines"), LAKEHOUSE_JVM_SHARING="off",
               SPARK_SUBMIT_OPTS=os.environ.get("SPARK_SUBMIT_OPTS", ""))
    python = venv / "bin" / "python"
    where = _run([python, "-c", "import spark_jobs, lakehouse_airflow; print(spark_jobs.__file__, "
                                "lakehouse_airflow.__file__)"], env, team).stdout.split()
    assert all(str(venv) in path for path in where), where

    # Nowhere to write: one line naming the setting, exit 2, nothing written.
    refused = subprocess.run([venv / "bin" / "lakehouse", "new", "orders"], env={**env, "LAKEHOUSE_PIPELINES": ""},
                             cwd=team, capture_output=True, text=True)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "LAKEHOUSE_PIPELINES" in refused.stderr
    assert not (team / "pipelines").exists()

    lakehouse = venv / "bin" / "lakehouse"
    _run([lakehouse, "setup"], env, team)  # the jars from the user's cache, resolved once
    _run([lakehouse, "new", "orders"], env, team)
    assert (team / "pipelines" / "orders" / "quality" / "bronze.json").is_file()
    assert not list(venv.rglob("orders*")), "lakehouse new wrote into the installed package"
    _run([lakehouse, "generate", "orders", "--events", "600", "--seed", "1", "--start", "2026-03-01T00:00:00",
          "--bad-fraction", "0.05"], env, team)
    ran = json.loads(_run([lakehouse, "run", "orders", "--json"], env, team).stdout)
    by_hop = {record["hop"]: record for record in ran["hops"]}
    assert set(by_hop) == {"bronze", "silver", "gold"} and all(r["status"] == "succeeded" for r in by_hop.values())
    landing = [line for path in sorted((team / "lake" / "landing" / "orders").glob("*.json"))
               for line in path.read_text().splitlines()]
    assert by_hop["bronze"]["rows_out"] + by_hop["bronze"]["rows_quarantined"] == len(landing) == 600
    assert 0 < by_hop["bronze"]["rows_quarantined"] < 600

    # The team's Airflow: the one-line DAG file, the plugin from the distribution's entry point.
    dags = team / "dags"
    dags.mkdir()
    (dags / "lakehouse.py").write_text(DAG_FILE)
    bag = json.loads(_run([python, "-c", DAGBAG_PROBE, dags], env, team).stdout.strip().splitlines()[-1])
    assert bag["errors"] == {} and bag["heavy"] == []
    assert bag["dags"] == [f"orders__{kind}" for kind in ("backfill", "maintenance", "refresh", "rollback", "stream")]
    plugins = json.loads(_run([venv / "bin" / "airflow", "plugins", "-o", "json"], env, team).stdout)
    assert [plugin["name"] for plugin in plugins] == ["lakehouse"], plugins
