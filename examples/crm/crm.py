"""``crm``: the customers' parsed events checked further, the orders' parse, and gold's join. The
two ``changes`` hops need no transform: the engine applies the feed by their spec (keys,
sequence, deletes, truncates, SCD type)."""

from __future__ import annotations

from spark_jobs.authoring import hop_table

from . import crm_transforms as transforms

POSITION = "struct<log:string,offset:decimal(38,0),serial:bigint>"
HISTORY = f"customer_id string, tier string, valid_from {POSITION}, valid_to {POSITION}"


def read_history(spark, lake):
    """The customers' history for gold's join, as it is when gold's batch runs."""
    return {"history": hop_table(spark, lake, "customers_history", HISTORY)}


# {hop name: fn(frame, spec, inputs) -> frame}
TRANSFORMS = {
    "bronze_customers": lambda frame, spec, inputs: transforms.check_changes(frame),
    "bronze_orders": lambda frame, spec, inputs: transforms.parse_orders(frame),
    "gold_orders": lambda frame, spec, inputs: transforms.tier_at_order(
        frame, inputs["history"], spec.allowed_lateness
    ),
}
STATIC_INPUTS = {"gold_orders": read_history}


def split_ingested(parsed):
    """The orders' rows for their table and for their quarantine (the customers' hop, which has a
    format, is split by the platform)."""
    return transforms.split(parsed)
