"""What several unit test modules of the package share: hand-made log files, a changes spec."""

from __future__ import annotations


def _write_log(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


BRONZE = "  - {name: bronze, kind: ingest, table: t/b, time_column: at}\n"


def load(tmp_path, hop: str):
    from spark_jobs.model.spec import load_spec

    path = tmp_path / "crm.yaml"
    path.write_text("name: crm\nlanding: landing/crm\nhops:\n" + BRONZE + hop)
    return load_spec(path)
