"""Where things are (the checkout, its virtualenv, the examples), free ports, the environment kept
around a change, and the ``lakehouse`` command run in a subprocess, killed mid-run or not."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
EXAMPLES = ROOT / "examples"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the launcher's own choice,
    include/scripts/metadata_db.py: below the ephemeral range)."""
    if str(ROOT / "include" / "scripts") not in sys.path:
        sys.path.insert(0, str(ROOT / "include" / "scripts"))
    from metadata_db import free_port as launcher_port

    return launcher_port()


@contextlib.contextmanager
def environment_kept(*names: str):
    """The variables ``names`` as they were before, whatever the block sets."""
    saved = {name: os.environ.get(name) for name in names}
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def lakehouse(
    *args: str, env: dict | None = None, check: bool = True, **kwargs
) -> subprocess.CompletedProcess:
    """Run the installed ``lakehouse`` console script in a subprocess."""
    done = subprocess.run(
        [str(VENV_BIN / "lakehouse"), *args],
        env=env or os.environ.copy(),
        capture_output=True,
        text=True,
        **kwargs,
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"lakehouse {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}"
        )
    return done


def killed_mid_run(
    argv: list[str], delay_s: float, after: Path | None = None
) -> tuple[bool, int, str]:
    """``lakehouse ARGV`` in a process group of its own (the CLI and its JVM), SIGKILLed
    ``delay_s`` seconds after ``after`` exists (after its start when ``None``) unless it ended
    first: whether it was killed, its exit code and its standard output."""
    import signal
    import time

    job = subprocess.Popen(
        [str(VENV_BIN / "lakehouse"), *argv],
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    deadline = time.time() + 300
    while (
        after is not None and job.poll() is None and not after.exists() and time.time() < deadline
    ):
        time.sleep(0.1)
    try:
        job.wait(timeout=delay_s)
        killed = False
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        killed = True
    out = job.stdout.read()
    job.stdout.close()
    return killed, job.returncode, out


def file_tree(home: Path) -> dict[str, tuple[int, int]]:
    return {
        str(path.relative_to(home)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in sorted(home.rglob("*"))
        if path.is_file() and "_ops/locks" not in str(path)
    }


# What a refused command writes: the record of its refusal, and its event in the event log.
REFUSAL_TRACES = ("_ops/refusals/", "_ops/events/")


def unrefused_tree(home: Path) -> dict[str, tuple[int, int]]:
    """:func:`file_tree` but the records of refusals and the event log: what a refused command
    must leave as it was."""
    return {
        path: stamp
        for path, stamp in file_tree(home).items()
        if not path.startswith(REFUSAL_TRACES)
    }


def refusals(home: Path) -> int:
    """How many refusals the lake has recorded."""
    return len(list(home.glob("_ops/refusals/*/*.json")))
