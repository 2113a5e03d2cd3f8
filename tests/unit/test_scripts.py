"""The platform's scripts (``include/scripts/``, not in the package), checked without starting
what they start: the Kafka broker's cluster ids."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.unit


def test_a_new_cluster_id_never_reads_as_an_option():
    """The broker's format tool takes the id after ``-t``; one starting with ``-``
    failed a CI run.
    """
    import base64

    from kafka_server import cluster_id  # include/scripts

    ids = [cluster_id() for _ in range(3000)]  # about 47 of them would start with "-" unfiltered
    assert not [found for found in ids if found.startswith("-")]
    assert all(len(base64.urlsafe_b64decode(found + "==")) == 16 for found in ids) and len(
        set(ids)
    ) == len(ids)


def test_an_airflow_process_that_exits_is_named_with_its_code_and_the_end_of_its_log(tmp_path):
    """The launcher says which of Airflow's processes ended, and why as far as its log says (a CI
    run once failed on "an Airflow process exited" with nothing else to go on). A real process
    here, run as the launcher runs them: ``<program> <command>``, its output in
    ``<command>.log``."""
    import subprocess
    import sys

    from lakehouse_platform import exited  # include/scripts

    (tmp_path / "scheduler").write_text(
        "import sys\nfor n in range(20):\n    print('line', n)\nsys.exit(3)\n"
    )
    logs = tmp_path / "logs"
    logs.mkdir()
    with open(logs / "scheduler.log", "wb") as log:
        running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        ended = subprocess.Popen([sys.executable, "scheduler"], cwd=tmp_path, stdout=log)
    try:
        ended.wait(timeout=30)
        assert exited([running], logs) is None
        said = exited([running, ended], logs, lines=3).splitlines()
        assert said[0] == f"airflow scheduler exited with code 3; the end of {logs}/scheduler.log:"
        assert said[1:] == ["  line 17", "  line 18", "  line 19"]
    finally:
        running.kill()
        running.wait()
