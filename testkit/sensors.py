"""A pipeline of sensor readings in CSV files with a header, parsed by the platform
(``format: csv``) with no transform: written by the landing-format tests and benchmark."""

from __future__ import annotations

from pathlib import Path

NAME = "sensors"
COLUMNS = {
    "sensor_id": "string",
    "reading_time": "timestamp",
    "temperature_c": "double",
    "note": "string",
}
SPEC = f"""name: {NAME}
landing: landing/{NAME}
hops:
  - name: bronze
    kind: ingest
    format: csv
    columns: {{{", ".join(f"{name}: {kind}" for name, kind in COLUMNS.items())}}}
    table: tables/bronze/{NAME}
    quarantine: tables/quarantine/{NAME}
    time_column: reading_time
"""


def write_pipeline(folder: Path) -> Path:
    """The pipeline's folder in the pipelines folder ``folder``: its spec and a pipeline module
    with no transform (none is needed); returns ``folder``."""
    (folder / NAME).mkdir(parents=True)
    (folder / NAME / f"{NAME}.yaml").write_text(SPEC)
    (folder / NAME / f"{NAME}.py").write_text(
        '"""Sensor readings: the platform parses them (format: csv)."""\nTRANSFORMS = {}\n'
    )
    return folder
