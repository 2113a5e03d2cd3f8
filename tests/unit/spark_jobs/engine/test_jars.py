"""``spark_jobs/engine/jars.py``: jars that cannot be resolved are a clear error (Maven
offline, no JVM).
"""

from __future__ import annotations

import contextlib

import pytest

pytestmark = pytest.mark.unit


def test_unresolvable_jars_is_a_clear_error(tmp_path, monkeypatch):
    from spark_jobs.engine import jars
    from spark_jobs.model.errors import SetupError

    bad = tmp_path / "pom.xml"
    with jars.manifest() as pom:
        bad.write_text(
            pom.read_text().replace("<version>4.4.0</version>", "<version>0.0.0-none</version>")
        )
    monkeypatch.setattr(jars, "manifest", lambda: contextlib.nullcontext(bad))
    monkeypatch.setenv("LAKEHOUSE_JARS_DIR", str(tmp_path / "jars"))
    # Maven offline with an empty local repository (its settings under a user.home of our own):
    # nothing resolves whether or not this machine reaches a repository.
    settings = tmp_path / "home" / ".m2" / "settings.xml"
    settings.parent.mkdir(parents=True)
    settings.write_text(
        f"<settings><offline>true</offline><localRepository>{tmp_path / 'm2'}</localRepository></settings>"  # noqa: E501
    )
    monkeypatch.setenv("MAVEN_OPTS", f"-Duser.home={tmp_path / 'home'}")
    with pytest.raises(SetupError, match="not resolvable"):
        jars.resolve_jars()
    assert not list((tmp_path / "m2").rglob("*.jar")), "Maven downloaded something offline"
