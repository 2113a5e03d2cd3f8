"""``shop``: each hop of the spec mapped to its transform. The platform imports this file by its
place beside ``shop.yaml``; the engine does the rest by hop kind (streams, backfills,
checkpoints, quarantine, quality gates, rollback)."""

from __future__ import annotations

from . import shop_transforms as transforms


def _paid(frames, spec, inputs):
    return transforms.paid_orders(
        frames["silver_orders"],
        frames["bronze_payments"],
        spec.hop("silver_paid").within,
        spec.allowed_lateness,
    )


# {hop name: fn(frame, spec, inputs) -> frame}; the join's frame is {upstream hop: frame}.
TRANSFORMS = {
    "bronze_orders": lambda frame, spec, inputs: transforms.parse_orders(frame),
    "bronze_payments": lambda frame, spec, inputs: transforms.parse_payments(frame),
    "silver_orders": lambda frame, spec, inputs: transforms.latest_orders(
        frame, spec.allowed_lateness
    ),
    "silver_paid": _paid,
    "gold_merchant_revenue": lambda frame, spec, inputs: transforms.merchant_revenue(
        frame, spec.window, spec.allowed_lateness
    ),
}


def split_ingested(parsed):
    """Either ingest hop's rows for its table and for its quarantine."""
    return transforms.split(parsed)
