"""How a run reports as it goes: progress lines (stderr by default), the first line of a
failure, and the fence a run checks between batches when its caller holds no lock."""

from __future__ import annotations

import sys
from collections.abc import Callable

Progress = Callable[[str], None]


def stderr_progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def unfenced() -> None:
    """No lock to check (a caller that holds none, as some tests do)."""


def first_line(error: BaseException | object) -> str:
    """The first line of an error (a JVM error's description where it has one), at most
    500 characters.
    """
    text = str(getattr(error, "desc", None) or error).strip()
    return text.splitlines()[0][:500] if text else type(error).__name__
