"""Per-pipeline glue, as data: which pure transform each hop applies, its static inputs, what its
quality suite checks, and how an ingest hop splits parsed lines.

A module here named after the pipeline defines:

- ``TRANSFORMS``: ``{hop name: fn(frame, spec, inputs) -> frame}``, the same call for streams and
  backfills;
- ``STATIC_INPUTS`` (optional): ``{hop name: fn(spark, lake) -> {name: DataFrame}}``, re-read on
  every run (a stream-static join);
- ``QUALITY_FRAMES`` (optional): ``{hop name: fn(frame) -> frame}``, what the hop's suite checks
  when it is not the table's rows as they are;
- ``split_ingested(parsed) -> (valid, invalid)`` when the pipeline has an ingest hop.

The engine is generic by hop kind (:mod:`spark_jobs.engine.hops`); nothing there changes for a
new pipeline.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from spark_jobs.model.errors import UsageError


@dataclass(frozen=True)
class PipelineCode:
    """A pipeline module, read through the names above."""

    name: str
    module: ModuleType

    def transform(self, hop, frame, spec, inputs: dict):
        transforms = getattr(self.module, "TRANSFORMS", {})
        if hop.name not in transforms:
            raise UsageError(f"{self.name} has no transform for hop {hop.name!r}: add it to TRANSFORMS in "
                             f"spark_jobs/pipelines/{self.name}.py")
        return transforms[hop.name](frame, spec, inputs)

    def static_inputs(self, spark, lake, hop) -> dict:
        read = getattr(self.module, "STATIC_INPUTS", {}).get(hop.name)
        return read(spark, lake) if read else {}

    def quality_frame(self, hop, frame):
        shape = getattr(self.module, "QUALITY_FRAMES", {}).get(hop.name)
        return shape(frame) if shape else frame

    def split_ingested(self, parsed):
        return self.module.split_ingested(parsed)


def pipeline_code(name: str) -> PipelineCode:
    try:
        return PipelineCode(name, importlib.import_module(f"spark_jobs.pipelines.{name}"))
    except ModuleNotFoundError as error:
        raise UsageError(f"pipeline {name!r} has a spec but no code: add spark_jobs/pipelines/{name}.py") from error
