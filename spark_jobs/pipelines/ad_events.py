"""``ad_events``: the YSB pipeline's hops mapped to its pure transforms."""

from __future__ import annotations

from spark_jobs.logs.fs import filesystem
from spark_jobs.model.errors import UsageError
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import HopSpec, PipelineSpec
from spark_jobs.transforms import ad_events as transforms

CAMPAIGNS_SCHEMA = "ad_id string, campaign_id string"


def static_inputs(spark, lake: Lake, hop: HopSpec) -> dict:
    """The campaigns table for silver, re-read on every run (a stream-static join)."""
    if hop.name != "silver":
        return {}
    folder = lake.input("campaigns")
    fs = filesystem(folder)
    if not fs.exists(folder) or not any(p.endswith(".csv") for p in fs.ls(folder, detail=False)):
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

    rows, ads, distinct = campaigns.agg(F.count(F.lit(1)), F.count("ad_id"), F.countDistinct("ad_id")).first()
    if rows == 0:
        raise UsageError(f"the campaigns CSV in {where} has no rows: add rows ad_id,campaign_id")
    if ads != distinct:
        twice = [row.ad_id for row in campaigns.groupBy("ad_id").count().where("count > 1").limit(3).collect()]
        raise UsageError(f"the campaigns CSV in {where} lists ad_id {', '.join(twice)} more than once: "
                         "keep one campaign per ad")


def transform(hop: HopSpec, frame, spec: PipelineSpec, inputs: dict):
    """Apply the hop's transform; the same call serves streams and backfills."""
    if hop.name == "bronze":
        return transforms.parse_events(frame)
    if hop.name == "silver":
        return transforms.enrich_views(frame, inputs["campaigns"])
    if hop.name == "gold":
        return transforms.count_views(frame, spec.window, spec.allowed_lateness)
    raise UsageError(f"ad_events has no transform for hop {hop.name!r}")


def quality_frame(hop: HopSpec, frame):
    """What the hop's quality suite checks: the rows, plus gold's ``window_seconds``."""
    from pyspark.sql import functions as F

    if hop.name == "gold":
        return frame.withColumn("window_seconds", F.unix_timestamp("window_end") - F.unix_timestamp("window_start"))
    return frame


def split_ingested(parsed):
    """Bronze rows and quarantine rows of a parsed increment."""
    return transforms.valid_events(parsed), transforms.invalid_lines(parsed)
