"""``ad_events``: the YSB pipeline's hops mapped to its pure transforms."""

from __future__ import annotations

from spark_jobs.authoring import UsageError, files_in

from . import ad_events_transforms as transforms

CAMPAIGNS_SCHEMA = "ad_id string, campaign_id string"


def read_campaigns(spark, lake) -> dict:
    """The campaigns table for silver, re-read on every run (a stream-static join)."""
    folder = lake.input("campaigns")
    if not any(path.endswith(".csv") for path in files_in(folder)):
        raise UsageError(
            f"no campaigns CSV in {folder}: add one with header ad_id,campaign_id "
            "(`lakehouse generate ad_events` writes a sample)"
        )
    campaigns = spark.read.option("header", True).schema(CAMPAIGNS_SCHEMA).csv(folder)
    _check_campaigns(campaigns, folder)
    return {"campaigns": campaigns}


def _check_campaigns(campaigns, where: str) -> None:
    """No silent wrong join: an empty table would leave every view without a campaign, and a
    duplicated ``ad_id`` would count its views twice."""
    from pyspark.sql import functions as F

    rows, ads, distinct = campaigns.agg(
        F.count(F.lit(1)), F.count("ad_id"), F.countDistinct("ad_id")
    ).first()
    if rows == 0:
        raise UsageError(f"the campaigns CSV in {where} has no rows: add rows ad_id,campaign_id")
    if ads != distinct:
        twice = [
            row.ad_id
            for row in campaigns.groupBy("ad_id").count().where("count > 1").limit(3).collect()
        ]
        raise UsageError(
            f"the campaigns CSV in {where} lists ad_id {', '.join(twice)} more than once: "
            "keep one campaign per ad"
        )


def with_window_seconds(frame):
    """Gold's rows plus ``window_seconds``, which its suite checks."""
    from pyspark.sql import functions as F

    return frame.withColumn(
        "window_seconds", F.unix_timestamp("window_end") - F.unix_timestamp("window_start")
    )


TRANSFORMS = {
    "bronze": lambda frame, spec, inputs: transforms.parse_events(frame),
    "silver": lambda frame, spec, inputs: transforms.enrich_views(frame, inputs["campaigns"]),
    "gold": lambda frame, spec, inputs: transforms.count_views(
        frame, spec.window, spec.allowed_lateness
    ),
}
STATIC_INPUTS = {"silver": read_campaigns}
QUALITY_FRAMES = {"gold": with_window_seconds}


def split_ingested(parsed):
    """Bronze rows and quarantine rows of a parsed increment."""
    return transforms.valid_events(parsed), transforms.invalid_lines(parsed)
