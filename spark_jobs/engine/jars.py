"""Delta's JVM jars: resolved once from Maven Central into a local cache, never at run time.

The manifest is ``pom.xml``, package data of :mod:`spark_jobs.resources`. ``lakehouse setup``
(and ``make setup``) asks Maven for its dependencies and keeps the jars that pyspark does not
already ship, so no second Hadoop, Jackson or Scala lands on Spark's classpath. They go to the
user's cache (:func:`spark_jobs.model.settings.jars_dir`), never into the installed package.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from importlib.resources import as_file, files
from pathlib import Path

from spark_jobs.model.errors import SetupError
from spark_jobs.model.settings import jars_dir

_VERSIONED_JAR = re.compile(r"^(?P<artifact>.+?)-\d[\w.\-]*\.jar$")


@contextmanager
def manifest():
    """The manifest as a file Maven can read (a path inside the package, or a temporary copy)."""
    with as_file(files("spark_jobs.resources") / "jars" / "pom.xml") as path:
        yield path


def _artifact(jar_name: str) -> str:
    match = _VERSIONED_JAR.match(jar_name)
    return match.group("artifact") if match else jar_name


def _pyspark_artifacts() -> set[str]:
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SetupError("pyspark is not installed: run `make setup`")
    folder = Path(list(spec.submodule_search_locations)[0]) / "jars"
    return {_artifact(jar.name) for jar in folder.glob("*.jar")}


def cached_jars() -> list[Path]:
    """The cached jars, or a :class:`SetupError` telling how to resolve them."""
    folder = jars_dir()
    jars = sorted(folder.glob("*.jar")) if folder.is_dir() else []
    if not any(jar.name.startswith("delta-spark") for jar in jars):
        raise SetupError(
            f"Delta jars are missing from {folder}: run `lakehouse setup` (it "
            "resolves them with Maven)"
        )
    return jars


def resolve_jars() -> list[Path]:
    """Resolve the manifest with Maven into the cache; a no-op when the cache is complete."""
    with manifest() as pom:
        resolve(pom, jars_dir(), what="Delta's jars")
    return cached_jars()


def resolve(pom: Path, folder: Path, what: str, drop_shipped: bool = True) -> list[Path]:
    """The runtime jars ``pom`` names, resolved once with Maven into ``folder`` (a no-op when
    ``folder`` holds them already); without the ones pyspark ships when ``drop_shipped``."""
    stamp = folder / ".manifest"
    wanted = pom.read_text()
    if stamp.exists() and stamp.read_text() == wanted:
        return sorted(folder.glob("*.jar"))
    if shutil.which("mvn") is None:
        raise SetupError(
            f"Maven (mvn) is not on PATH: install it (e.g. apt-get install maven) to resolve {what}"
        )
    with tempfile.TemporaryDirectory() as scratch:
        command = [
            "mvn",
            "-q",
            "-B",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={scratch}",
            "-DincludeScope=runtime",
        ]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
            raise SetupError(
                f"{what} are not resolvable with Maven ({last[0][:300]}): check "
                f"the network and {pom}"
            )
        shipped = _pyspark_artifacts() if drop_shipped else set()
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for jar in sorted(Path(scratch).glob("*.jar")):
            if _artifact(jar.name) not in shipped:
                shutil.copy2(jar, folder / jar.name)
    stamp.write_text(wanted)
    return sorted(folder.glob("*.jar"))


def main() -> int:
    """Console entry point used by ``make setup``."""
    try:
        jars = resolve_jars()
    except SetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    print(f"{len(jars)} jars in {jars_dir()}: {', '.join(jar.name for jar in jars)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
