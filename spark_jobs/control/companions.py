"""A pipeline's own modules, beside its spec: ``<name>.py`` (its code, for the engine) and
``<name>_sample.py`` (its sample data, for ``lakehouse generate``). The one place the platform
imports a team's code; the model layer only reads specs."""

from __future__ import annotations

import hashlib
import importlib
import sys
import types

from spark_jobs.model.errors import UsageError
from spark_jobs.model.spec import PipelineSpec


def companion_module(spec: PipelineSpec, suffix: str = "") -> types.ModuleType | None:
    """The module ``<name><suffix>.py`` beside ``spec``'s file (its pipeline code, or with
    ``_sample`` its sample data), or None when there is none.

    The specs' folder is imported as a package of its own (one per folder), so a module there
    imports its siblings relatively (``from . import demo_transforms``).
    """
    if spec.source is None or not (spec.source.parent / f"{spec.name}{suffix}.py").exists():
        return None
    folder = spec.source.parent.resolve()
    package = "lakehouse_pipelines_" + hashlib.sha256(str(folder).encode()).hexdigest()[:12]
    if package not in sys.modules:
        module = types.ModuleType(package)
        module.__path__ = [str(folder)]
        sys.modules[package] = module
    try:
        return importlib.import_module(f"{package}.{spec.name}{suffix}")
    except (ImportError, SyntaxError) as error:
        raise UsageError(
            f"{spec.source.parent / f'{spec.name}{suffix}.py'}: cannot be imported "
            f"({type(error).__name__}: {error}): fix it"
        ) from error
