"""Class-data sharing for the Spark driver's JVM: a few seconds off every job's start.

A Spark driver loads about 10,000 classes before it runs anything, and every hop task,
backfill day and rollback is a new driver. ``make setup`` runs a short training job once with
``-XX:ArchiveClassesAtExit`` (JDK 13+, :mod:`spark_jobs.engine.jvm_archive`): the JVM writes
the classes it loaded, parsed and verified, to an archive that every later driver maps at start
(``-XX:SharedArchiveFile``).

The archive is only valid for the JVM and the class path that wrote it, so its name carries a
key of both (the java binary, its ``release`` file, pyspark's jars with their sizes and
modification times, Spark's conf folder); a
driver whose key has no archive starts without one. Only classes of the JVM's own loaders are
archived: Spark's, not Delta's, which ``--jars`` loads through Spark's class loader. A warning
of the JVM goes to stderr (by default it would go to stdout, where ``--json`` output goes).

Beside the archive, every driver gets :data:`LEAN_OPTIONS` (the serial collector, C2 for
hotter methods only): a driver's CPU on small increments is mostly the JIT warming up.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from spark_jobs.model import settings
from spark_jobs.model.settings import jvm_dir


def archive_dir() -> Path:
    """``$LAKEHOUSE_JVM_DIR`` or ``jvm/`` in the user's cache."""
    return jvm_dir()


def _java() -> Path | None:
    java_home = os.environ.get("JAVA_HOME")
    found = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    return Path(found).resolve() if found and os.path.exists(found) else None


def _spark_home() -> Path:
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    return Path(list(spec.submodule_search_locations)[0])


def archive_key() -> str | None:
    """What the archive depends on, hashed; ``None`` when no Java is reachable."""
    java = _java()
    if java is None:
        return None
    digest = hashlib.sha256(str(java).encode())
    stat = java.stat()
    digest.update(f"{stat.st_size} {stat.st_mtime_ns}".encode())
    release = java.parent.parent / "release"
    if release.exists():
        digest.update(release.read_bytes())
    spark_home = _spark_home()
    digest.update(str(spark_home).encode())
    # The JVM refuses an archive when a jar's size or modification time differs from when it
    # was written (a reinstalled virtualenv at the same path), so both are in the key.
    for jar in sorted((spark_home / "jars").glob("*.jar")):
        stat = jar.stat()
        digest.update(f"{jar.name} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    conf_dir = Path(os.environ.get("SPARK_CONF_DIR") or spark_home / "conf")
    digest.update(f"{conf_dir} {conf_dir.is_dir() and any(conf_dir.iterdir())}".encode())
    return digest.hexdigest()[:16]


def installation() -> str:
    """A short name of this Spark installation (its folder): the cache is the user's, shared by
    every virtualenv of theirs, and each keeps an archive of its own."""
    return hashlib.sha256(str(_spark_home()).encode()).hexdigest()[:8]


def archive_path() -> Path | None:
    key = archive_key()
    return archive_dir() / f"spark-driver-{installation()}-{key}.jsa" if key else None


def archive_options(archive: Path, flag: str) -> str:
    return f"-XX:{flag}={archive} -Xshare:auto -Xlog:disable -Xlog:all=warning:stderr"


# A driver lives for a few runs of small increments (a DAG run's hops, or the warm driver's next
# runs), so most of its CPU is the JIT's warm-up, not the work. Measured interleaved (one
# process per sample, a session then three runs of 30 files x 200 events, the JVM's CPU-s,
# 3 samples each): 77.5 by default, 66 with C2 compiling only methods 10x hotter, 69 with the
# serial collector (one GC thread instead of G1's), 58 with both; 2 M events no slower
# (docs/operations.md). ``LAKEHOUSE_JVM_LEAN=off`` gives the JVM's defaults.
LEAN_OPTIONS = (
    "-XX:+UseSerialGC -XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
    "-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000"
)


def sharing() -> bool:
    """Whether drivers map a class-data sharing archive (``LAKEHOUSE_JVM_SHARING=off``: no)."""
    return settings.JVM_SHARING.value() != "off"


def driver_java_options() -> str:
    """The driver's extra JVM options: the archive when this machine has one, and the lean JIT
    and GC options (each can be turned off)."""
    options = []
    if sharing():
        archive = archive_path()
        if archive and archive.exists():
            options.append(archive_options(archive, "SharedArchiveFile"))
    if settings.JVM_LEAN.value() != "off":
        options.append(LEAN_OPTIONS)
    return " ".join(options)
