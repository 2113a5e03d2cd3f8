"""``__pipeline__``: each hop of the spec mapped to its transform (written by ``lakehouse new
--format csv``).

The platform imports this file by its place beside ``__pipeline__.yaml``; the engine does the rest
(streams, backfills, checkpoints, quarantine, quality gates, rollback) by hop kind.
"""

from __future__ import annotations

from . import __pipeline___transforms as transforms

# {hop name: fn(frame, spec, inputs) -> frame}: the same call for the run-once stream
# and a backfill.
TRANSFORMS = {
    # The platform parses bronze's CSV rows by the spec's columns; this adds the derived columns.
    "bronze": lambda frame, spec, inputs: transforms.stamp(frame),
    "silver": lambda frame, spec, inputs: transforms.positive(frame),
    "gold": lambda frame, spec, inputs: transforms.per_minute(
        frame, spec.window, spec.allowed_lateness
    ),
}
