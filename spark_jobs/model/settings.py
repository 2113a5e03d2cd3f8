"""Where the platform finds a team's pipelines and keeps its caches, read from the environment.

Each setting is declared once here (its name, its default and what it means) and read through
the functions below; the manual's settings reference is generated from :data:`SETTINGS`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from spark_jobs.model.errors import UsageError


@dataclass(frozen=True)
class Setting:
    """One environment variable: its name, its default (empty: none) and one line of meaning."""

    name: str
    default: str
    meaning: str

    def value(self) -> str:
        return os.environ.get(self.name) or self.default


PIPELINES = Setting(
    "LAKEHOUSE_PIPELINES", "",
    "The folders of your pipelines, separated by `:`. Each holds pipeline folders (`orders/orders.yaml` beside "
    "its code, suites and tests, as `lakehouse new` writes them) or spec files side by side.")
QUALITY = Setting(
    "LAKEHOUSE_QUALITY", "",
    "A folder of quality suites, `<pipeline>/<hop>.json`, used instead of each pipeline folder's `quality/`.")
CACHE = Setting(
    "LAKEHOUSE_CACHE", "",
    "Where the platform keeps what it builds once: the JVM jars, the Spark drivers' class-data archive, the "
    "package zip shipped to Spark executors (default `$XDG_CACHE_HOME/lakehouse`, else `~/.cache/lakehouse`).")
JARS_DIR = Setting("LAKEHOUSE_JARS_DIR", "", "The folder of the JVM jars (default `<cache>/jars`).")
JVM_DIR = Setting("LAKEHOUSE_JVM_DIR", "", "The folder of the class-data sharing archive (default `<cache>/jvm`).")

SETTINGS = (PIPELINES, QUALITY, CACHE, JARS_DIR, JVM_DIR)


def pipelines_dirs() -> tuple[Path, ...]:
    """The folders of ``$LAKEHOUSE_PIPELINES``, absolute; a :class:`UsageError` naming the
    setting when it is not set (the platform has no pipelines of its own)."""
    folders = tuple(Path(part).expanduser().resolve() for part in PIPELINES.value().split(os.pathsep) if part)
    if not folders:
        raise UsageError(f"no pipelines folder: set {PIPELINES.name} to the folder of your pipelines "
                         "(`lakehouse new NAME` writes one there)")
    return folders


def quality_dir() -> Path | None:
    """``$LAKEHOUSE_QUALITY``, or None: each pipeline's suites are in its own folder."""
    value = QUALITY.value()
    return Path(value).expanduser().resolve() if value else None


def cache_dir() -> Path:
    """``$LAKEHOUSE_CACHE``, else ``$XDG_CACHE_HOME/lakehouse``, else ``~/.cache/lakehouse``."""
    value = CACHE.value()
    if value:
        return Path(value).expanduser().resolve()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "lakehouse"


def jars_dir() -> Path:
    return Path(JARS_DIR.value()) if JARS_DIR.value() else cache_dir() / "jars"


def jvm_dir() -> Path:
    return Path(JVM_DIR.value()) if JVM_DIR.value() else cache_dir() / "jvm"
