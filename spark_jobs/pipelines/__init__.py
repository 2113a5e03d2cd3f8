"""Per-pipeline glue, as data: which pure transform each hop applies, its static inputs, what its
quality suite checks, and how an ingest hop splits parsed lines.

A pipeline's module is ``<name>.py`` beside its spec (a pipeline folder, as ``lakehouse new``
writes it). It is imported as part of a package made of that folder, so it imports its
siblings relatively (``from . import demo_transforms``); from the platform it imports
:mod:`spark_jobs.authoring` only. It defines:

- ``TRANSFORMS``: ``{hop name: fn(frame, spec, inputs) -> frame}``, the same call for streams and
  backfills; a join hop's ``frame`` is ``{upstream hop name: frame}``, in the spec's order;
- ``STATIC_INPUTS`` (optional): ``{hop name: fn(spark, lake) -> {name: DataFrame}}``, re-read on
  every run (a stream-static join);
- ``QUALITY_FRAMES`` (optional): ``{hop name: fn(frame) -> frame}``, what the hop's suite checks
  when it is not the table's rows as they are;
- ``split_ingested(parsed) -> (valid, invalid)`` when the pipeline has an ingest hop whose lines
  its transform parses (a hop with a ``format`` is split by the platform).

Sample data for ``lakehouse generate`` comes from ``<name>_sample.py`` beside the spec (plain
Python, no Spark: see :mod:`spark_jobs.control.writers.samples`).

The engine is generic by hop kind (:mod:`spark_jobs.engine.hops`); nothing there changes for a
new pipeline.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from types import ModuleType

from spark_jobs.control.companions import companion_module
from spark_jobs.model.errors import UsageError
from spark_jobs.model.spec import PipelineSpec


@dataclass(frozen=True)
class PipelineCode:
    """A pipeline module, read through the names above."""

    name: str
    module: ModuleType

    def check(self, spec) -> None:
        """A :class:`UsageError` naming the module and the fix when a hop of ``spec`` has no
        transform, or an ingest hop no ``split_ingested``: before any query starts."""
        transforms = getattr(self.module, "TRANSFORMS", {})
        missing = [
            hop.name
            for hop in spec.hops
            if hop.name not in transforms and not hop.transform_optional
        ]
        if missing:
            raise UsageError(
                f"{self.module.__file__}: TRANSFORMS has no transform for hop "
                f"{', '.join(missing)}: add `{missing[0]!r}: fn(frame, spec, inputs)` to it"
            )
        parsed_here = any(hop.ingests and hop.format is None for hop in spec.hops)
        if parsed_here and not callable(getattr(self.module, "split_ingested", None)):
            raise UsageError(
                f"{self.module.__file__}: the ingest hop needs split_ingested(parsed) -> (valid, "
                "invalid): define it"
            )

    def transform(self, hop, frame, spec, inputs: dict):
        transforms = getattr(self.module, "TRANSFORMS", {})
        if hop.name not in transforms and hop.transform_optional:
            return frame
        if hop.name not in transforms:
            raise UsageError(
                f"{self.module.__file__}: TRANSFORMS has no transform for hop {hop.name!r}: add it"
            )
        return transforms[hop.name](frame, spec, inputs)

    def static_inputs(self, spark, lake, hop) -> dict:
        read = getattr(self.module, "STATIC_INPUTS", {}).get(hop.name)
        return read(spark, lake) if read else {}

    def quality_frame(self, hop, frame):
        shape = getattr(self.module, "QUALITY_FRAMES", {}).get(hop.name)
        return shape(frame) if shape else frame

    def split_ingested(self, hop, parsed):
        """An ingest hop's (valid, invalid) rows: the platform's split for a hop with a format."""
        if hop.format is not None:
            from spark_jobs.transforms.formats import split_parsed

            return split_parsed(parsed)
        return self.module.split_ingested(parsed)

    def code_hash(self, spec: PipelineSpec) -> str:
        """A hash of the spec's file and the code its transforms can run: the loaded modules of
        the pipeline module's package (its siblings; the sample data left out) and of
        ``spark_jobs.transforms``. Equal hashes: the queries are the same, no plan to compare."""
        package = self.module.__name__.rpartition(".")[0]
        modules = sorted(
            (name, module)
            for name, module in list(sys.modules.items())
            if getattr(module, "__file__", None)
            and not name.endswith("_sample")
            and name.startswith((package + ".", "spark_jobs.transforms."))
        )
        digest = hashlib.sha256()
        for name, module in modules:
            # The loader's source: spark-submit ships the package as a zip, where no
            # file can be opened.
            source = module.__spec__.loader.get_source(module.__name__) if module.__spec__ else None
            digest.update(
                name.rpartition(".")[2].encode() + b"\0" + (source or module.__file__).encode()
            )
        if spec.source:
            digest.update(spec.source.read_bytes())
        return digest.hexdigest()[:16]


def pipeline_code(spec: PipelineSpec) -> PipelineCode:
    """The pipeline module of ``spec``, beside its file."""
    module = companion_module(spec)
    if module is None:
        where = spec.source.parent / f"{spec.name}.py" if spec.source else f"{spec.name}.py"
        raise UsageError(
            f"pipeline {spec.name!r} has a spec but no code: add {where} (`lakehouse new` writes a "
            "skeleton)"
        )
    return PipelineCode(spec.name, module)
