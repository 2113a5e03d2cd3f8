"""Per-pipeline glue: which pure transform each hop applies, and its static inputs.

The runner is generic by hop kind (``ingest``, ``append``, ``aggregate``); a module here
named after the pipeline supplies ``static_inputs(spark, lake)`` and
``transform(hop, frame, spec, inputs)``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from spark_jobs.model.errors import UsageError


def pipeline_code(name: str) -> ModuleType:
    try:
        return importlib.import_module(f"spark_jobs.pipelines.{name}")
    except ModuleNotFoundError as error:
        raise UsageError(f"pipeline {name!r} has a spec but no code: add spark_jobs/pipelines/{name}.py") from error
