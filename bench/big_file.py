"""One landing file of half a million lines (moved here from the test suite): bronze
reads it in one batch, quarantines its one truncated line and keeps every other one; the figure
is bronze's rows per second on it. A wrong count fails the suite (``AssertionError``)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

T0 = 1_780_000_000_000


def run(lines: int) -> dict:
    from pyspark.sql import functions as F

    from spark_jobs import service
    from spark_jobs.engine.session import build_session

    spark = build_session("lakehouse-bench")
    work = Path(tempfile.mkdtemp(prefix="bench-big-"))
    landing = work / "landing" / "ad_events"
    landing.mkdir(parents=True)
    text = [
        f'{{"ad_id":"ad-{n % 97}","event_type":"view","event_time":{T0 + n}}}' for n in range(lines)
    ]
    text[lines // 4] = '{"ad_id":"ad-1","event_type":"view","event_time":'  # one truncated line
    (landing / "big.json").write_text("\n".join(text) + "\n")
    saved = os.environ.get("LAKEHOUSE_HOME")
    os.environ["LAKEHOUSE_HOME"] = str(work)
    try:
        began = time.perf_counter()
        record = service.run(
            "ad_events", "bronze", quality="off", progress=lambda line: None
        ).records[0]
        seconds = time.perf_counter() - began
    finally:
        if saved is None:
            os.environ.pop("LAKEHOUSE_HOME", None)
        else:
            os.environ["LAKEHOUSE_HOME"] = saved
    assert (record.rows_in, record.rows_out, record.rows_quarantined) == (lines, lines - 1, 1), (
        record
    )
    bronze = spark.read.format("delta").load(str(work / "tables/bronze/ad_events"))
    assert bronze.agg(F.countDistinct("event_time")).first()[0] == lines - 1
    return {"lines": lines, "seconds": round(seconds, 2), "rows_per_second": round(lines / seconds)}


def markdown(result: dict) -> str:
    return (
        f"One file of {result['lines']:,} lines (one truncated): bronze kept "
        f"{result['lines'] - 1:,} rows and quarantined 1 in {result['seconds']} s "
        f"({result['rows_per_second']:,} lines/s, run-once with its start)."
    )
