"""What the control layer's unit tests share: the fixture lakes' scenarios, a log
folder's batches.
"""

from __future__ import annotations

from pathlib import Path

SCENARIOS = ["history", "replayed", "straddle"]


def numbered(folder: Path) -> list[int]:
    return sorted(int(path.name) for path in folder.iterdir() if path.name.isdigit())
