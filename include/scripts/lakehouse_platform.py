"""Set up and run the platform on the embedded defaults: Airflow on an embedded PostgreSQL
(``metadata_db.py``; SQLite behind ``LAKEHOUSE_METADATA_DB=sqlite``), local Spark, a local lake
or (``--lake s3``) a lake on the embedded S3 server (``s3_server.py``), and (``--spark cluster``)
a Spark standalone master with two workers (``spark_cluster.py``) instead of local Spark:
``make run-cluster`` is both, the production topology of ``docker-compose.yaml`` as processes.

    python include/scripts/lakehouse_platform.py env        # print the environment as shell exports
    python include/scripts/lakehouse_platform.py migrate    # the SQLite DB (tests, sqlite mode), once per version
    python include/scripts/lakehouse_platform.py run [--duration S] [--port P] [--lake local|s3] [--spark local|cluster]
        [--source landing|kafka] [--trigger schedule|arrival]
    python include/scripts/lakehouse_platform.py stop       # stop a platform started by run

``run`` starts PostgreSQL (migrated once per Airflow version), with ``--lake s3`` the S3 server
(its data in ``$AIRFLOW_HOME/s3``; the lake is ``s3a://lakehouse/lake`` and every process gets
the server's standard ``AWS_*`` variables), with ``--spark cluster`` the Spark cluster (every Spark
task is then submitted to its master, with its shared secret), with ``--source kafka`` a Kafka
broker (``kafka_server.py``, its data in ``$AIRFLOW_HOME/kafka``) and copies of the pipelines
whose ingest hops read a topic each (:func:`pipeline_copies`; with ``--trigger arrival``, copies
whose stream DAGs run on arrival), then Airflow's api-server, scheduler and dag-processor (and its
triggerer when a pipeline runs on arrival, or with ``LAKEHOUSE_TRIGGERER=1``) with the
LocalExecutor, all bound to 127.0.0.1
(docs/getting-started.md), unpauses the stream and rollback DAGs, feeds a trickle of sample events,
prints the URL and the login, and stops every process it started (by process group) on Ctrl-C,
SIGTERM, SIGHUP or after ``--duration`` seconds. Nothing outlives it when it dies otherwise
(SIGKILL, a closed terminal): each child gets SIGTERM when the launcher dies (Linux's
parent-death signal), and a watchdog process, which holds a pipe from the launcher, stops the
children's process groups when that pipe closes without the launcher saying it is done. The
launcher writes ``$AIRFLOW_HOME/platform.json`` (its PID, its children's process groups, the
URL, the metadata DB's address, the lake's variables; mode 0600): a second ``run`` refuses while
the first is alive and stops what a dead one left. ``env`` prints the running platform's metadata
DB address and lake (so ``lakehouse status`` in another shell reads the same lake).
"""  # noqa: E501

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import metadata_db  # beside this file
from kafka_server import KafkaServer, KafkaServerError
from s3_server import BUCKET, S3Server, S3ServerError
from spark_cluster import SparkCluster, SparkClusterError

ROOT = Path(__file__).resolve().parents[2]
# the reference pipelines `make run` runs, unless $LAKEHOUSE_PIPELINES names others
EXAMPLES = ROOT / "examples"
VENV_BIN = Path(sys.executable).parent
LOCAL_BUNDLE = "airflow.dag_processing.bundles.local.LocalDagBundle"
GRACE_S = 20.0  # SIGTERM, then this long for a process group to end, then SIGKILL


# An idle platform's CPU (docs/benchmarks.md), each overridable from the environment.
# Measured idle over 5 minutes with no DAG: the scheduler 4.3 -> 2.1 CPU-s and
# PostgreSQL 2.2 -> 1.5 with these; the API server's own loop does not change, and the DAG
# processor's and triggerer's fixed 1 s are stretched by the lakehouse plugin.
IDLE_SETTINGS = {
    # An idle scheduler loop comes round every 10 s (1 s by default): its executor, Airflow's
    # LocalExecutor made prompt (lakehouse_airflow.executor), waits up to 9 s, returning as soon as
    # a task ends, a scheduled DAG run is due or (PostgreSQL's notification) a run is triggered or
    # cleared, then the loop sleeps 1 s. (With Airflow's own LocalExecutor, a 5-s sleep costs about
    # the same idle, and a triggered run waits up to 5 s.)
    "AIRFLOW__CORE__EXECUTOR": "lakehouse_airflow.executor.PromptLocalExecutor",
    "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "1",
    "AIRFLOW__LAKEHOUSE__EXECUTOR_IDLE_WAIT": "9",
    # A task's supervisor wakes every second (5 s) while the task runs: when the task closed its
    # sockets before its process had exited, the supervisor saw the exit only at its next wake, so
    # a 0.1-s task could take 5 s (Task SDK ``_monitor_subprocess``). It heartbeats as often.
    "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
    # Heartbeats every 15 s (5 s), so "unhealthy" after 60 s without one (30 s).
    "AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC": "15",
    "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "15",
    "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "60",
    "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "15",
    "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "60",
    "AIRFLOW__DAG_PROCESSOR__HEALTH_CHECK_THRESHOLD": "60",
    # Housekeeping the scheduler and DAG processor do on a clock, less often.
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "60",
    "AIRFLOW__SCHEDULER__PARSING_CLEANUP_INTERVAL": "600",
    "AIRFLOW__SCHEDULER__TRIGGER_TIMEOUT_CHECK_INTERVAL": "60",
    "AIRFLOW__SCHEDULER__POOL_METRICS_INTERVAL": "60",
    "AIRFLOW__DAG_PROCESSOR__BUNDLE_REFRESH_CHECK_INTERVAL": "60",
    "AIRFLOW__DAG_PROCESSOR__PRINT_STATS_INTERVAL": "600",
    # The DAG processor's loop, every second whatever Airflow's settings, every 5 s when it
    # has nothing to parse (lakehouse_airflow.dag_processor): callbacks and parse requests
    # wait up to 5 s.
    "AIRFLOW__LAKEHOUSE__DAG_PROCESSOR_IDLE_WAIT": "4",
    # The triggerer's two loops, every second whatever Airflow's settings, every 5 s while no
    # trigger fires (lakehouse_airflow.triggerer): a fired trigger's event (an arrival) goes at
    # once; a new deferred task's trigger starts up to 10 s later.
    "AIRFLOW__LAKEHOUSE__TRIGGERER_IDLE_WAIT": "4",
    # A DAG file is parsed again every 2 minutes (30 s by default), so a spec's change shows then.
    "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "120",
}


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
            # The plugin comes from the installed distribution's entry point; this folder is for a
            # team's own plugins (one that held the lakehouse's too would load it twice).
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(Path(airflow_home) / "plugins"),
            "LAKEHOUSE_PIPELINES": env.get("LAKEHOUSE_PIPELINES") or str(EXAMPLES),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": env.get(
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "admin:admin"
            ),
            # SQLite until the launcher starts PostgreSQL and puts its address here (``run``).
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata_db.sqlite_url(airflow_home),
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": env.get(
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT", "8793"
            ),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "30",
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
            "AIRFLOW_CONN_SPARK_DEFAULT": env.get(
                "AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"})
            ),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYTHONUNBUFFERED": "1",
        }
    )
    for key, value in IDLE_SETTINGS.items():
        env.setdefault(key, value)
    # the team's own DAGs, beside the platform's: a second bundle
    if env.get("LAKEHOUSE_USER_DAGS"):
        env["AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST"] = json.dumps(
            [
                {"name": "dags-folder", "classpath": LOCAL_BUNDLE, "kwargs": {}},
                {
                    "name": "user-dags",
                    "classpath": LOCAL_BUNDLE,
                    "kwargs": {"path": str(Path(env["LAKEHOUSE_USER_DAGS"]).resolve())},
                },
            ]
        )
    return env


def airflow(
    *args: str, env: dict[str, str], check: bool = True, **kwargs
) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "airflow"), *args], env=env, check=check, **kwargs)


def migrate(env: dict[str, str], stamp: Path | None = None) -> None:
    """Migrate the metadata DB ``env`` names when it is new or Airflow's version changed
    (idempotent, fast). ``stamp`` records the version migrated; by default the SQLite DB's."""
    from importlib.metadata import version

    home = Path(env["AIRFLOW_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    if stamp is None:
        stamp = home / ".migrated"
        if not (home / "airflow.db").exists():
            stamp.unlink(missing_ok=True)
    wanted = version("apache-airflow")
    if stamp.exists() and stamp.read_text() == wanted:
        return
    print(f"migrating the Airflow metadata DB in {home} ...", flush=True)
    airflow("db", "migrate", env=env, stdout=subprocess.DEVNULL)
    stamp.write_text(wanted)


def migrated_copy(env: dict[str, str], cache: Path = ROOT / ".cache" / "airflow-db") -> None:
    """Give ``env``'s ``AIRFLOW_HOME`` a copy of a SQLite DB migrated once per Airflow version in
    ``cache`` (``airflow db migrate`` takes about 30 s; processes that share the cache wait on a
    lock while the first migrates): the tests' and the benchmarks' throwaway Airflow homes."""
    import fcntl
    import shutil
    from importlib.metadata import version

    template = cache / version("apache-airflow")
    template.mkdir(parents=True, exist_ok=True)
    with (template / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        migrate(
            {
                **env,
                "AIRFLOW_HOME": str(template),
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata_db.sqlite_url(str(template)),
            }
        )
    home = Path(env["AIRFLOW_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    for name in ("airflow.db", ".migrated"):
        shutil.copy(template / name, home / name)


def exited(processes: list[subprocess.Popen], logs: Path, lines: int = 8) -> str | None:
    """When one of Airflow's ``processes`` (:func:`start`) has exited: which, its exit code and
    the last ``lines`` of its log in ``logs``; else None."""
    for process in processes:
        code = process.poll()
        if code is None:
            continue
        name = process.args[1]
        log = logs / f"{name}.log"
        said = log.read_text(errors="replace").splitlines() if log.exists() else []
        tail = "\n".join(f"  {line}" for line in said[-lines:])
        return f"airflow {name} exited with code {code}; the end of {log}:\n{tail}"
    return None


def _wait_healthy(url: str, deadline: float, processes: list[subprocess.Popen], logs: Path) -> None:
    while time.time() < deadline:
        if (ended := exited(processes, logs)) is not None:
            raise SystemExit(f"during start-up, {ended}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise SystemExit(f"the api-server did not answer {url} in time")


def _unpause(
    base: str, user: str, password: str, dag_ids: list[str], timeout_s: float = 120
) -> None:
    """Unpause ``dag_ids`` through the REST API, waiting for the dag-processor to
    have parsed each.
    """
    login = urllib.request.Request(
        f"{base}/auth/token",
        method="POST",
        headers={"Content-Type": "application/json"},
        data=json.dumps({"username": user, "password": password}).encode(),
    )
    with urllib.request.urlopen(login, timeout=30) as response:
        token = json.load(response)["access_token"]
    deadline = time.time() + timeout_s
    for dag_id in dag_ids:
        request = urllib.request.Request(
            f"{base}/api/v2/dags/{dag_id}",
            method="PATCH",
            data=json.dumps({"is_paused": False}).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        while True:
            try:
                urllib.request.urlopen(request, timeout=30).close()
                break
            except urllib.error.HTTPError as error:
                if error.code != 404 or time.time() > deadline:  # 404: not parsed yet
                    print(
                        f"warning: could not unpause {dag_id} ({error.code}): unpause it in the UI",
                        file=sys.stderr,
                    )
                    break
                time.sleep(2)


def _password(home: Path, user: str) -> str:
    generated = home / "simple_auth_manager_passwords.json.generated"
    for _ in range(30):
        if generated.exists():
            return json.loads(generated.read_text()).get(user, "?")
        time.sleep(1)
    return "?"


def start(env: dict[str, str]) -> list[subprocess.Popen]:
    """Start Airflow's processes (the API server on ``AIRFLOW__API__HOST``: 127.0.0.1 in
    :func:`platform_env`), each in its own process group; logs go to
    $AIRFLOW_HOME/logs/<name>.log. The triggerer only with ``LAKEHOUSE_TRIGGERER=1`` (set when
    a pipeline runs on arrival: it runs the watchers): otherwise the platform's DAGs defer
    nothing (the freshness deadline's callback runs in the executor), and an idle triggerer
    costs about 100 CPU-s per hour (its loops wake every 5 s: the Idle benchmark); a team whose
    own DAGs defer (deferrable operators, async callbacks) turns it on."""
    logs = Path(env["AIRFLOW_HOME"]) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    commands = {
        "api-server": [
            "api-server",
            "--host",
            env["AIRFLOW__API__HOST"],
            "--port",
            env["AIRFLOW__API__PORT"],
        ],
        "scheduler": ["scheduler", "--skip-serve-logs"],
        "dag-processor": ["dag-processor"],
    }
    if env.get("LAKEHOUSE_TRIGGERER") == "1":
        commands["triggerer"] = ["triggerer", "--skip-serve-logs"]
    processes = []
    for name, args in commands.items():
        with open(logs / f"{name}.log", "ab") as log:
            processes.append(
                subprocess.Popen(
                    [str(VENV_BIN / "airflow"), *args],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=lambda: metadata_db.die_with_parent(signal.SIGTERM),
                )
            )
    return processes


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    return True


def _signal_group(group: int, signum: int) -> None:
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        pass


def stop_groups(groups: list[int], reap=lambda: None, grace_s: float = GRACE_S) -> None:
    """Stop whole process groups (a process and what it started): SIGTERM, then SIGKILL what
    is left after ``grace_s``. ``reap`` collects the exit status of our own children, so a
    finished leader does not linger as a zombie that keeps its group alive."""
    for group in groups:
        _signal_group(group, signal.SIGTERM)
    deadline = time.time() + grace_s
    while time.time() < deadline:
        reap()
        if not any(_group_alive(group) for group in groups):
            return
        time.sleep(0.2)
    for group in groups:
        _signal_group(group, signal.SIGKILL)
    reap()


def stop(processes: list[subprocess.Popen]) -> None:
    """Stop the processes we started, with everything they started (their process groups)."""
    stop_groups(
        [process.pid for process in processes],
        reap=lambda: [process.poll() for process in processes],
    )


def drivers_dir(env: dict[str, str]) -> Path:
    """Where the shared Spark drivers of the platform's DAG runs write their address files
    (``spark_jobs.control.coordination.driver.driver_dir``: ``drivers`` in ``$AIRFLOW_HOME``)."""
    return Path(env.get("LAKEHOUSE_DRIVER_DIR") or Path(env["AIRFLOW_HOME"]) / "drivers")


def stop_drivers(folder: Path) -> None:
    """Stop the shared drivers still running (each its own process group: spark-submit's JVM
    and the Python driver); a driver ends by itself after a minute idle, this is for a stop."""
    groups = []
    for address in folder.glob("*.json"):
        try:
            found = json.loads(address.read_text())
            alive = "serve" in Path(f"/proc/{found['pid']}/cmdline").read_bytes().decode(
                errors="replace"
            )
        except (OSError, ValueError, KeyError):
            continue
        if alive and _group_alive(found["group"]):
            groups.append(found["group"])
    if groups:
        stop_groups(groups)


def watchdog(drivers: Path | None = None) -> int:
    """Read process groups from stdin, one per line, until it closes. ``done`` means the
    launcher stopped them itself; an end without it means the launcher died: stop them, and
    the shared drivers in ``drivers``."""
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        # a Ctrl-C or a closed terminal must not take the watchdog first
        signal.signal(signum, signal.SIG_IGN)
    groups = []
    for line in sys.stdin:
        if line.strip() == "done":
            return 0
        groups.append(int(line))
    stop_groups(groups)
    if drivers is not None:
        stop_drivers(drivers)
    return 0


def _start_watchdog(drivers: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, __file__, "watchdog", "--drivers", str(drivers)],
        stdin=subprocess.PIPE,
        text=True,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
    )


def _pid_file(env: dict[str, str]) -> Path:
    return Path(env["AIRFLOW_HOME"]) / "platform.json"


def _is_launcher(pid: int) -> bool:
    try:
        return Path(__file__).name in Path(f"/proc/{pid}/cmdline").read_bytes().decode(
            errors="replace"
        )
    except OSError:
        return False


def running_platform(env: dict[str, str]) -> dict | None:
    """What ``platform.json`` says, if its launcher is alive."""
    try:
        found = json.loads(_pid_file(env).read_text())
    except (OSError, ValueError):
        return None
    return found if _is_launcher(found.get("pid", -1)) else None


def _stop_leftovers(env: dict[str, str]) -> None:
    """A dead launcher's children that nothing stopped (its watchdog killed too): stop them."""
    try:
        found = json.loads(_pid_file(env).read_text())
    except (OSError, ValueError):
        return
    alive = [group for group in found.get("groups", []) if _group_alive(group)]
    if alive:
        print(
            "stopping what a platform that ended uncleanly left running (process "
            f"groups {alive}) ...",
            flush=True,
        )
        stop_groups(alive)
    stop_drivers(drivers_dir(env))
    _pid_file(env).unlink(missing_ok=True)


def stop_platform(env: dict[str, str]) -> int:
    """``stop``: end a running launcher (it stops its children) or what a dead one left."""
    found = running_platform(env)
    if found is None:
        _stop_leftovers(env)
        print("no platform is running")
        return 0
    os.kill(found["pid"], signal.SIGTERM)
    deadline = time.time() + GRACE_S + 10
    while _is_launcher(found["pid"]) and time.time() < deadline:
        time.sleep(0.5)
    _stop_leftovers(env)  # in case it could not finish
    print(f"stopped the platform (pid {found['pid']})")
    return 0


def _spec_files(env: dict[str, str]) -> list[Path]:
    """The spec files of the pipelines the platform runs, in ``$LAKEHOUSE_PIPELINES`` (default:
    the examples), as the DAG files find them."""
    from spark_jobs.model.spec import spec_files

    folders = (env.get("LAKEHOUSE_PIPELINES") or str(EXAMPLES)).split(os.pathsep)
    return spec_files(tuple(Path(folder).resolve() for folder in folders if folder))


def _pipelines(env: dict[str, str]) -> list[str]:
    """The pipelines the platform runs, by name."""
    return [path.stem for path in _spec_files(env)]


def _generate(env: dict[str, str], events: int, warn: bool) -> None:
    """A sample file of ``events`` events (per source) for each pipeline; with ``warn``, one line
    for a pipeline that has none (no sample module, a broken spec): the others run anyway."""
    for name in _pipelines(env):
        done = subprocess.run(
            [str(VENV_BIN / "lakehouse"), "generate", name, "--events", str(events)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if done.returncode and warn:
            reason = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            print(f"warning: no sample events for {name}: {reason}", file=sys.stderr, flush=True)


LAKES = ("local", "s3")
SPARKS = ("local", "cluster")
SOURCES = ("landing", "kafka")
TRIGGERS = ("schedule", "arrival")
S3_LAKE = f"s3a://{BUCKET}/lake"
TOPIC_PARTITIONS = 3


def pipeline_copies(env: dict[str, str], out: Path, topics: bool, arrival: bool) -> list[str]:
    """Copies in ``out`` of the pipelines ``env`` names: with ``topics``, each ingest hop reading a
    topic of its own (``<pipeline>.<hop>``) instead of its landing folder; with ``arrival``, each
    stream DAG run on arrival (``trigger: arrival`` instead of its schedule). Returns the topics.
    A pipeline folder is copied whole; a spec written side by side with others, with its own
    modules."""
    import shutil

    import yaml

    shutil.rmtree(out, ignore_errors=True)
    named = []
    for path in _spec_files(env):
        target = out / path.stem
        if path.parent.name == path.stem:
            shutil.copytree(path.parent, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.mkdir(parents=True)
            for item in path.parent.glob(f"{path.stem}*"):
                if item.is_file():
                    shutil.copy2(item, target / item.name)
        spec = yaml.safe_load(path.read_text())
        for hop in spec.get("hops") or []:
            if topics and hop.get("kind") == "ingest":
                hop.pop("landing", None)
                hop.pop("topic_pattern", None)
                hop["topic"] = f"{spec['name']}.{hop['name']}"
                named.append(hop["topic"])
        if arrival:
            spec.pop("schedule", None)
            spec["trigger"] = "arrival"
        (target / path.name).write_text(yaml.safe_dump(spec, sort_keys=False))
    return named


def runs_on_arrival(env: dict[str, str]) -> bool:
    """Whether a pipeline ``env`` names runs its stream DAG on arrival (the triggerer watches)."""
    import yaml

    for path in _spec_files(env):
        try:
            raw = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError):
            continue  # the DAG processor reports a broken spec
        if isinstance(raw, dict) and raw.get("trigger") == "arrival":
            return True
    return False


class Platform:
    """What one ``run`` started, in order: the watchdog, PostgreSQL (unless SQLite), the S3
    server (``--lake s3``), the Spark cluster (``--spark cluster``), the Kafka broker (``--source
    kafka``), Airflow (with its triggerer when a pipeline runs on arrival: ``--trigger
    arrival``, or a spec's own ``trigger: arrival``)."""

    def __init__(
        self,
        env: dict[str, str],
        lake: str = "local",
        spark: str = "local",
        source: str = "landing",
        trigger: str = "schedule",
    ):
        self.env = env
        self.lake, self.spark, self.source, self.trigger = lake, spark, source, trigger
        self.kafka: KafkaServer | None = None
        self.guard: subprocess.Popen | None = None
        self.db: metadata_db.Postgres | None = None
        self.s3: S3Server | None = None
        self.cluster: SparkCluster | None = None
        self.processes: list[subprocess.Popen] = []

    def _watch(self, process: subprocess.Popen) -> None:
        self.guard.stdin.write(f"{process.pid}\n")
        self.guard.stdin.flush()

    def launch(self) -> None:
        """Start everything, each process group told to the watchdog as soon as it exists, then
        write ``platform.json``."""
        self.guard = _start_watchdog(drivers_dir(self.env))
        home = Path(self.env["AIRFLOW_HOME"])
        if metadata_db.kind(self.env) == "postgres":
            self.db = metadata_db.Postgres(home / "postgres")
            self._watch(self.db.start())
            self.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = self.db.url()
            migrate(self.env, stamp=self.db.folder / "migrated")
        else:
            migrate(self.env)
        lake_env = {}
        if self.lake == "s3":
            self.s3 = S3Server(home / "s3")
            self._watch(self.s3.start())
            lake_env = {**self.s3.env(), "LAKEHOUSE_HOME": S3_LAKE}
            self.env.update(lake_env)
        if self.spark == "cluster":
            self.cluster = SparkCluster(home / "spark")
            for process in self.cluster.start():
                self._watch(process)
            lake_env.update(self.cluster.env())
            self.env.update(lake_env)
        if self.source == "kafka":
            self.kafka = KafkaServer(home / "kafka")
            self._watch(self.kafka.start())
            lake_env.update(self.kafka.env())
        arrival = self.trigger == "arrival"
        if self.kafka is not None or arrival:
            pipelines = home / ("pipelines-kafka" if self.kafka else "pipelines-arrival")
            for topic in pipeline_copies(self.env, pipelines, self.kafka is not None, arrival):
                self.kafka.create_topic(topic, TOPIC_PARTITIONS)
            lake_env["LAKEHOUSE_PIPELINES"] = str(pipelines)
        self.env.update(lake_env)
        if runs_on_arrival(self.env):
            self.env["LAKEHOUSE_TRIGGERER"] = "1"
        self.processes = start(self.env)
        for process in self.processes:
            self._watch(process)
        groups = (
            [process.pid for process in self.processes]
            + [
                server.process.pid
                for server in (self.db, self.s3, self.kafka)
                if server is not None
            ]
            + [process.pid for process in (self.cluster.processes if self.cluster else [])]
        )
        pid_file = _pid_file(self.env)
        pid_file.touch(mode=0o600)
        pid_file.write_text(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "groups": groups,
                    "url": self.env["AIRFLOW__API__BASE_URL"],
                    "sql_alchemy_conn": self.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"],
                    "lake_env": lake_env,
                }
            )
        )

    def stop(self) -> None:
        """Airflow first (its processes use the DB and the lake to the end), then the Spark cluster,
        the S3 server and PostgreSQL, then tell the watchdog."""
        stop(self.processes)
        stop_drivers(drivers_dir(self.env))
        if self.cluster is not None:
            self.cluster.stop()
        if self.s3 is not None:
            self.s3.stop()
        if self.kafka is not None:
            self.kafka.stop()
        if self.db is not None:
            self.db.stop()
        if self.guard is not None:
            self.guard.stdin.write("done\n")
            self.guard.stdin.close()
            self.guard.wait()
        _pid_file(self.env).unlink(missing_ok=True)


def _serve(
    env: dict[str, str],
    processes: list[subprocess.Popen],
    stopping: list,
    duration: float | None,
    trickle_every: float,
    trickle_events: int,
) -> int:
    """Wait for the API server, unpause the stream and rollback DAGs, print the login, then trickle
    sample events until stopped (or an Airflow process exits: 1)."""
    logs = Path(env["AIRFLOW_HOME"]) / "logs"
    _wait_healthy(
        f"{env['AIRFLOW__API__BASE_URL']}/api/v2/monitor/health",
        time.time() + 120,
        processes,
        logs,
    )
    user = env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].split(",")[0].split(":")[0]
    password = _password(Path(env["AIRFLOW_HOME"]), user)
    # The stream DAGs run on their schedule or on arrival; the rollback DAGs have none, and the
    # Lakehouse page triggers them (Airflow runs nothing of a paused DAG). The backfill DAGs stay
    # paused until a user backfills (the backfill dialog's "Unpause on trigger").
    _unpause(
        env["AIRFLOW__API__BASE_URL"],
        user,
        password,
        [f"{name}__{kind}" for name in _pipelines(env) for kind in ("stream", "rollback")],
    )
    # after the unpause: Airflow drops the asset events of a paused DAG, so a stream DAG that
    # runs on arrival would wait for its watcher to announce the first sample again
    _generate(env, trickle_events, warn=True)
    print(f"\nAirflow UI: {env['AIRFLOW__API__BASE_URL']}  login: {user} / {password}", flush=True)
    print(f"lake: {env['LAKEHOUSE_HOME']}   logs: {env['AIRFLOW_HOME']}/logs", flush=True)
    if env.get("LAKEHOUSE_SPARK_MASTER"):
        print(
            f"spark: {env['LAKEHOUSE_SPARK_MASTER']} (a standalone master and two workers, "
            f"logs in {env['AIRFLOW_HOME']}/spark)",
            flush=True,
        )
    print(
        "try: .venv/bin/lakehouse status ad_events   (Ctrl-C or `make stop` stops everything)\n",
        flush=True,
    )
    began = time.time()
    next_trickle = began + trickle_every
    while not stopping and (duration is None or time.time() - began < duration):
        if (ended := exited(processes, logs)) is not None:
            print(f"{ended}\nstopping", file=sys.stderr)
            return 1
        if time.time() >= next_trickle:
            _generate(env, trickle_events, warn=False)
            next_trickle = time.time() + trickle_every
        time.sleep(1)
    return 0


def run(
    env: dict[str, str],
    duration: float | None,
    trickle_every: float,
    trickle_events: int,
    lake: str = "local",
    spark: str = "local",
    source: str = "landing",
    trigger: str = "schedule",
) -> int:
    found = running_platform(env)
    if found is not None:
        print(
            f"error: a platform is already running (pid {found['pid']}, {found.get('url')}): stop "
            "it with `make stop` (or Ctrl-C in its terminal), then run again",
            file=sys.stderr,
        )
        return 2
    _stop_leftovers(env)
    stopping: list = []
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda *_: stopping.append(True))
    platform = Platform(env, lake, spark, source, trigger)
    try:
        platform.launch()
        return _serve(env, platform.processes, stopping, duration, trickle_every, trickle_events)
    except KeyboardInterrupt:
        return 0
    except (
        metadata_db.MetadataDBError,
        S3ServerError,
        SparkClusterError,
        KafkaServerError,
    ) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the stop short
        print(f"stopping Airflow (at most {GRACE_S:.0f} s) ...", flush=True)
        platform.stop()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("action", choices=["env", "migrate", "run", "stop", "watchdog"])
    # the watchdog's: the shared drivers' folder
    parser.add_argument("--drivers", help=argparse.SUPPRESS)
    parser.add_argument(
        "--port", type=int, default=int(os.environ.get("LAKEHOUSE_AIRFLOW_PORT", "8080"))
    )
    parser.add_argument(
        "--duration", type=float, help="stop after this many seconds (default: until Ctrl-C)"
    )
    parser.add_argument(
        "--trickle-every", type=float, default=60.0, help="seconds between sample event files"
    )
    parser.add_argument("--trickle-events", type=int, default=200, help="events per sample file")
    parser.add_argument(
        "--lake",
        choices=LAKES,
        default=os.environ.get("LAKEHOUSE_LAKE") or "local",
        help="where the lake lives: a local folder (LAKEHOUSE_HOME) or the embedded S3 server",
    )
    parser.add_argument(
        "--spark",
        choices=SPARKS,
        default=os.environ.get("LAKEHOUSE_SPARK") or "local",
        help=(
            "where Spark tasks run: local[2] in each task, or a standalone master with two workers"
        ),
    )
    parser.add_argument(
        "--source",
        choices=SOURCES,
        default=os.environ.get("LAKEHOUSE_SOURCE") or "landing",
        help=(
            "what ingest hops read: their landing folders, or a topic each on an "
            "embedded Kafka broker"
        ),
    )
    parser.add_argument(
        "--trigger",
        choices=TRIGGERS,
        default=os.environ.get("LAKEHOUSE_TRIGGER") or "schedule",
        help="what starts the sample pipelines' stream DAGs: their schedules, or what arrives",
    )
    args = parser.parse_args()
    env = platform_env(port=args.port)
    if args.action == "run":
        # A stream or backfill DAG's Spark driver waits this long idle for the DAG's next run
        # (docs/guides/airflow.md): a warm JVM instead of a new one each run,
        # longer than the example specs' 30-minute schedule (an idle driver costs about 0.2 CPU-s
        # per 30 s; a cold start about 20 CPU-s more than a warm run).
        env.setdefault("LAKEHOUSE_DRIVER_KEEP_WARM", "2400")
    if args.action == "env":
        found = running_platform(env)
        if found and found.get("sql_alchemy_conn"):
            env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = found["sql_alchemy_conn"]
        env.update((found or {}).get("lake_env") or {})
        for key in sorted(key for key in env if os.environ.get(key) != env[key]):
            print(f"export {key}={json.dumps(env[key])}")
        return 0
    if args.action == "migrate":
        migrate(env)
        return 0
    if args.action == "watchdog":
        return watchdog(Path(args.drivers) if args.drivers else None)
    if args.action == "stop":
        return stop_platform(env)
    return run(
        env,
        args.duration,
        args.trickle_every,
        args.trickle_events,
        args.lake,
        args.spark,
        args.source,
        args.trigger,
    )


if __name__ == "__main__":
    sys.exit(main())
