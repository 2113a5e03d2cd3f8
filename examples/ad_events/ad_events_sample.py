"""Sample events for ``lakehouse generate ad_events`` (plain Python, no Spark): the Yahoo
Streaming Benchmark's ad events, and the campaigns table silver joins, written once."""

from __future__ import annotations

import functools
import random
import uuid

from spark_jobs.authoring import files_in, write_text

CAMPAIGNS = 100
ADS_PER_CAMPAIGN = 10
_NAMESPACE = uuid.UUID("6f0e9a1c-2b7d-4f5e-9c3a-1d2e3f4a5b6c")
# Lines bronze must quarantine, mixed in by --bad-fraction.
BAD_LINES = (
    "this is not json",
    "[1, 2, 3]",
    '"a bare string"',
    '{"event_type": "view", "event_time": 1}',
    '{"ad_id": "x", "event_type": "view", "event_time": "yesterday"}',
    '{"ad_id": "x", "event_type": "hover", "event_time": 1}',
    '{"ad_id": "x", "event_time": 1}',
)


@functools.cache
def ad_ids() -> list[tuple[str, str]]:
    """``(ad_id, campaign_id)`` pairs, identical on every machine."""
    pairs = []
    for campaign in range(CAMPAIGNS):
        campaign_id = str(uuid.uuid5(_NAMESPACE, f"campaign-{campaign}"))
        for ad in range(ADS_PER_CAMPAIGN):
            pairs.append((str(uuid.uuid5(_NAMESPACE, f"ad-{campaign}-{ad}")), campaign_id))
    return pairs


def prepare(lake) -> str | None:
    """Write the campaigns CSV when the campaigns folder has none; return its path if written."""
    folder = lake.input("campaigns")
    if any(path.endswith(".csv") for path in files_in(folder)):
        return None
    path = f"{folder}/campaigns.csv"
    write_text(
        path, "ad_id,campaign_id\n" + "".join(f"{ad},{campaign}\n" for ad, campaign in ad_ids())
    )
    return path


def event(rng: random.Random, event_time_ms: int) -> dict:
    """One YSB event at ``event_time_ms``."""
    return {
        "user_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "page_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "ad_id": rng.choice(ad_ids())[0],
        "ad_type": rng.choice(("banner", "modal", "sponsored-search", "mail", "mobile")),
        "event_type": rng.choice(("view", "click", "purchase")),
        "event_time": event_time_ms,
        "ip_address": ".".join(str(rng.randrange(1, 255)) for _ in range(4)),
    }
