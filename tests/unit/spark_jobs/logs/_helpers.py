"""What the log readers' unit tests share: a log file with its checksum beside it."""

from __future__ import annotations

import json


def _log_file(path, entries) -> None:
    path.write_text("v1\n" + "\n".join(json.dumps(entry) for entry in entries))
    (path.parent / f".{path.name}.crc").write_bytes(b"crc")
