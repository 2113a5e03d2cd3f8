"""``crm``: its ingest hop mapped to its parse. The two ``changes`` hops need no transform: the
engine applies the feed by their spec (keys, sequence, deletes, SCD type)."""

from __future__ import annotations

from . import crm_transforms as transforms

# {hop name: fn(frame, spec, inputs) -> frame}
TRANSFORMS = {
    "bronze_customers": lambda frame, spec, inputs: transforms.parse_changes(frame),
}


def split_ingested(parsed):
    """The ingest hop's rows for its table and for its quarantine."""
    return transforms.split(parsed)
