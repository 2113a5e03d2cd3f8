"""Set up and run the platform on the embedded default: SQLite Airflow, local Spark, local lake.

    python include/scripts/lakehouse_platform.py env        # print the environment as shell exports
    python include/scripts/lakehouse_platform.py migrate    # airflow db migrate, once per Airflow version
    python include/scripts/lakehouse_platform.py run [--duration S] [--port P]

``run`` starts Airflow's api-server, scheduler, dag-processor and triggerer bound to
127.0.0.1 (README: "Two commands"), unpauses the stream DAGs, feeds a trickle of sample events,
prints the URL and the login, and stops every process it started (by PID) on Ctrl-C, SIGTERM
or after ``--duration`` seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def platform_env(base: dict[str, str] | None = None, port: int = 8080) -> dict[str, str]:
    """The environment every Airflow process and task of the platform runs with."""
    env = dict(os.environ if base is None else base)
    airflow_home = env.get("AIRFLOW_HOME") or str(ROOT / ".airflow")
    env.update(
        {
            "AIRFLOW_HOME": airflow_home,
            "LAKEHOUSE_HOME": env.get("LAKEHOUSE_HOME") or str(ROOT / ".lakehouse"),
            "PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": env.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "admin:admin"),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow_home}/airflow.db",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": env.get("AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT", "8793"),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "30",
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
            "AIRFLOW_CONN_SPARK_DEFAULT": env.get(
                "AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"})
            ),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def airflow(*args: str, env: dict[str, str], check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "airflow"), *args], env=env, check=check, **kwargs)


def migrate(env: dict[str, str]) -> None:
    """Migrate the metadata DB when it is new or Airflow's version changed (idempotent, fast)."""
    from importlib.metadata import version

    home = Path(env["AIRFLOW_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    stamp = home / ".migrated"
    wanted = version("apache-airflow")
    if stamp.exists() and stamp.read_text() == wanted and (home / "airflow.db").exists():
        return
    print(f"migrating the Airflow metadata DB in {home} ...", flush=True)
    airflow("db", "migrate", env=env, stdout=subprocess.DEVNULL)
    stamp.write_text(wanted)


def _wait_healthy(url: str, deadline: float, processes: list[subprocess.Popen]) -> None:
    while time.time() < deadline:
        if any(process.poll() is not None for process in processes):
            raise SystemExit("an Airflow process exited during start-up: see the logs in $AIRFLOW_HOME/logs")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise SystemExit(f"the api-server did not answer {url} in time")


def _password(home: Path, user: str) -> str:
    generated = home / "simple_auth_manager_passwords.json.generated"
    for _ in range(30):
        if generated.exists():
            return json.loads(generated.read_text()).get(user, "?")
        time.sleep(1)
    return "?"


def start(env: dict[str, str]) -> list[subprocess.Popen]:
    """Start Airflow's four processes on 127.0.0.1; logs go to $AIRFLOW_HOME/logs/<name>.log."""
    logs = Path(env["AIRFLOW_HOME"]) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    commands = {
        "api-server": ["api-server", "--host", "127.0.0.1", "--port", env["AIRFLOW__API__PORT"]],
        "scheduler": ["scheduler", "--skip-serve-logs"],
        "dag-processor": ["dag-processor"],
        "triggerer": ["triggerer", "--skip-serve-logs"],
    }
    processes = []
    for name, args in commands.items():
        log = open(logs / f"{name}.log", "ab")
        processes.append(
            subprocess.Popen([str(VENV_BIN / "airflow"), *args], env=env, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        )
    return processes


def stop(processes: list[subprocess.Popen]) -> None:
    """Stop the processes we started, by PID (their process groups), politely then firmly."""
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    deadline = time.time() + 20
    for process in processes:
        try:
            process.wait(timeout=max(deadline - time.time(), 0.1))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def run(env: dict[str, str], duration: float | None, trickle_every: float, trickle_events: int) -> int:
    migrate(env)
    processes = start(env)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    try:
        _wait_healthy(f"{env['AIRFLOW__API__BASE_URL']}/api/v2/monitor/health", time.time() + 120, processes)
        user = env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].split(",")[0].split(":")[0]
        password = _password(Path(env["AIRFLOW_HOME"]), user)
        lakehouse = str(VENV_BIN / "lakehouse")
        for spec_path in sorted((ROOT / "include" / "pipelines").glob("*.yaml")):
            pipeline = spec_path.stem
            subprocess.run([lakehouse, "generate", pipeline, "--events", str(trickle_events)], env=env, check=True,
                           stdout=subprocess.DEVNULL)
            for _ in range(60):  # the dag-processor must have parsed the DAG before it can be unpaused
                if airflow("dags", "unpause", f"{pipeline}__stream", env=env, check=False,
                           capture_output=True).returncode == 0:
                    break
                time.sleep(2)
        print(f"\nAirflow UI: {env['AIRFLOW__API__BASE_URL']}  login: {user} / {password}", flush=True)
        print(f"lake: {env['LAKEHOUSE_HOME']}   logs: {env['AIRFLOW_HOME']}/logs", flush=True)
        print("try: .venv/bin/lakehouse status ad_events   (Ctrl-C stops everything)\n", flush=True)
        began = time.time()
        next_trickle = began + trickle_every
        while not stopping and (duration is None or time.time() - began < duration):
            if any(process.poll() is not None for process in processes):
                print("an Airflow process exited: see the logs above; stopping", file=sys.stderr)
                return 1
            if time.time() >= next_trickle:
                for spec_path in sorted((ROOT / "include" / "pipelines").glob("*.yaml")):
                    subprocess.run([lakehouse, "generate", spec_path.stem, "--events", str(trickle_events)], env=env,
                                   check=False, stdout=subprocess.DEVNULL)
                next_trickle = time.time() + trickle_every
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        print("stopping Airflow ...", flush=True)
        stop(processes)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["env", "migrate", "run"])
    parser.add_argument("--port", type=int, default=int(os.environ.get("LAKEHOUSE_AIRFLOW_PORT", "8080")))
    parser.add_argument("--duration", type=float, help="stop after this many seconds (default: until Ctrl-C)")
    parser.add_argument("--trickle-every", type=float, default=60.0, help="seconds between sample event files")
    parser.add_argument("--trickle-events", type=int, default=200, help="events per sample file")
    args = parser.parse_args()
    env = platform_env(port=args.port)
    if args.action == "env":
        for key in sorted(key for key in env if os.environ.get(key) != env[key]):
            print(f"export {key}={json.dumps(env[key])}")
        return 0
    if args.action == "migrate":
        migrate(env)
        return 0
    return run(env, args.duration, args.trickle_every, args.trickle_events)


if __name__ == "__main__":
    sys.exit(main())
