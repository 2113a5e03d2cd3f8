"""The embedded PostgreSQL of ``make run`` (``include/scripts/metadata_db.py``): on loopback, behind
a password, stopped by PID."""

from __future__ import annotations

import subprocess

import metadata_db  # include/scripts (tests/conftest.py puts it on the path)
import psutil
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_embedded_postgres_listens_on_loopback_behind_a_password_and_stops_by_pid(tmp_path):
    """The metadata DB server of ``make run``: on 127.0.0.1 only, a login needs the generated
    password, never runs as root (as root: as nobody), keeps its cluster across restarts, and
    its PID's end is the server's end."""
    import psycopg2

    server = restarted = metadata_db.Postgres(tmp_path / "postgres")
    try:
        process = server.start()
        listening = [
            line
            for line in subprocess.run(
                ["ss", "-ltnH"], capture_output=True, text=True
            ).stdout.splitlines()
            if f":{server.port} " in line
        ]
        assert listening and all("127.0.0.1:" in line for line in listening), listening
        assert psutil.Process(process.pid).username() != "root"
        with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
            psycopg2.connect(
                host="127.0.0.1",
                port=server.port,
                user="airflow",
                password="guess",
                dbname="airflow",
            )
        password = server.password()
        assert (tmp_path / "postgres/password").stat().st_mode & 0o077 == 0
        connection = psycopg2.connect(
            host="127.0.0.1", port=server.port, user="airflow", password=password, dbname="airflow"
        )
        with connection, connection.cursor() as cursor:
            cursor.execute("CREATE TABLE kept (n int)")
        connection.close()
        server.stop()
        assert process.poll() is not None and not psutil.pid_exists(process.pid)

        restarted = metadata_db.Postgres(tmp_path / "postgres")
        restarted.start()
        assert restarted.password() == password
        connection = psycopg2.connect(
            host="127.0.0.1",
            port=restarted.port,
            user="airflow",
            password=password,
            dbname="airflow",
        )
        with connection, connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM kept")
            assert cursor.fetchone() == (0,)
        connection.close()
    finally:
        restarted.stop()
        server.remove()
