"""Data-quality gates with Spark and Great Expectations (docs/concepts/quality-gates.md): the
``drop`` policy inside a hop's write, and the check of the rows one run wrote. The suites
themselves, their policies and the results as files are :mod:`spark_jobs.control.suites`.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import os
import re
import time

from spark_jobs.control.removable.table_files import increment_gone
from spark_jobs.control.suites import EXAMPLES, load_suite, policy, results_dir, rule_name
from spark_jobs.engine.expectations import (
    evaluate,
    in_gx_order,
    results_of,
    suite_result,
    written_counts,
)
from spark_jobs.engine.rules import is_native, passes
from spark_jobs.logs.fs import filesystem, read_json, write_json, write_text
from spark_jobs.model import times
from spark_jobs.model.errors import UsageError
from spark_jobs.model.lake import Lake
from spark_jobs.model.spec import HopSpec

# -- drop: inside the hop's write ----------------------------------------------------------------


def split_by_rules(frame, rules: list[dict]):
    """``(kept, dropped)``: ``dropped`` holds the failing rows with ``reason`` (the first
    rule they fail).
    """
    from pyspark.sql import functions as F

    if not rules:
        return frame, None
    reason = None
    for rule in rules:
        label = F.lit(f"quality: {rule_name(rule)}")
        reason = (
            F.when(~passes(rule), label) if reason is None else reason.when(~passes(rule), label)
        )
    marked = frame.withColumn("_quality_reason", reason)
    kept = marked.where(F.col("_quality_reason").isNull()).drop("_quality_reason")
    dropped = marked.where(F.col("_quality_reason").isNotNull())
    return kept, dropped


def observe_drops(quarantine_rows, rules: list[dict]):
    """``(quarantine_rows, observation)``: the rows each rule dropped counted, by rule name, as the
    quarantine's rows (:func:`as_quarantine_rows`' shape) are written (``DataFrame.observe``: no
    job of its own). Observe the frame the write runs and nothing else: an observation keeps the
    metrics of the first job that ran its frame, and an emptiness check's job reads one row."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    observation = Observation()
    counts = [
        F.count_if(F.col("reason") == F.lit(f"quality: {rule_name(rule)}")).alias(rule_name(rule))
        for rule in rules
    ]
    return quarantine_rows.observe(observation, *counts), observation


def as_quarantine_rows(dropped, columns: list[str], keep: tuple[str, ...] = ()):
    """Dropped rows in the quarantine's shape: the row as JSON, the reason, and ``keep`` columns."""
    from pyspark.sql import functions as F

    return dropped.select(
        F.to_json(F.struct(*columns)).alias("raw_line"),
        F.col("_quality_reason").alias("reason"),
        *keep,
    )


def no_quarantine_rows(frame, keep: tuple[str, ...] = ()):
    """No rows, in :func:`as_quarantine_rows`' shape: a batch without drops still commits once."""
    from pyspark.sql import functions as F

    return frame.limit(0).select(
        F.lit(None).cast("string").alias("raw_line"),
        F.lit(None).cast("string").alias("reason"),
        *keep,
    )


# -- validation of a run's increment -------------------------------------------------------------


def increment(
    spark,
    table: str,
    version_before: int | None,
    version_after: int | None,
    keys: tuple[str, ...] = (),
):
    """The rows the commits in ``(version_before, version_after]`` inserted or updated
    (change data feed).

    With ``keys`` (a table kept current by MERGE), each key's last change only: a window that
    several batches of the run updated is one row, as it is in the table.
    """
    from pyspark.sql import functions as F

    if version_after is None or version_after == version_before:
        frame = spark.read.format("delta").load(table) if version_after is not None else None
        return frame.limit(0) if frame is not None else None
    changes = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", (version_before if version_before is not None else -1) + 1)
        .option("endingVersion", version_after)
        .load(table)
    )
    inserted = changes.where(F.col("_change_type").isin("insert", "update_postimage"))
    columns = [
        name
        for name in inserted.columns
        if name not in ("_change_type", "_commit_version", "_commit_timestamp")
    ]
    if not keys:
        return inserted.select(*columns)
    # A hash aggregate, not a sorted window: about a third less time on gold's increments. Its
    # output is hash-partitioned by the keys, so a uniqueness rule over them needs no shuffle.
    others = [name for name in columns if name not in keys]
    latest = inserted.groupBy(*keys).agg(
        F.max_by(F.struct(*others), F.col("_commit_version")).alias("_latest")
    )
    return latest.select(
        *[F.col(name) if name in keys else F.col(f"_latest.{name}") for name in columns]
    )


def validate_frame(frame, suite: dict) -> dict:
    """Run the suite on ``frame`` with GX: its validation result as a JSON-safe dict."""
    return gx_validation(frame, suite).to_json_dict()


def gx_validation(frame, suite: dict):
    """Run the suite on ``frame`` with GX: GX's ``ExpectationSuiteValidationResult``."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")  # no usage statistics sent anywhere
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    # progress is ours to print
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    asset = context.data_sources.add_spark(name="lakehouse").add_dataframe_asset(name="increment")
    batch = asset.add_batch_definition_whole_dataframe("run").get_batch(
        batch_parameters={"dataframe": frame}
    )
    gx_suite = context.suites.add(_gx_suite(gx, suite))
    # BASIC: failing counts and a few failing values; SUMMARY's value counts cost a job per rule.
    return batch.validate(
        gx_suite, result_format={"result_format": "BASIC", "partial_unexpected_count": EXAMPLES}
    )


def _gx_suite(gx, suite: dict):
    """GX's suite of ``suite``; a rule GX refuses (a wrong or missing argument) is a
    :class:`UsageError` naming the suite, the rule and GX's reason."""
    try:
        return gx.ExpectationSuite(
            **{key: suite[key] for key in ("name", "expectations", "meta") if key in suite}
        )
    except Exception as error:  # GX raises pydantic's errors and its own, with no common base
        for rule in suite.get("expectations", []):
            try:
                gx.ExpectationSuite(name="check", expectations=[rule])
            except Exception as refused:
                reason = " ".join(str(refused).split())
                raise UsageError(
                    f"quality suite {suite.get('name')}: GX refuses {rule_name(rule)}: "
                    f"{reason[:300]}: fix the rule in the suite's file"
                ) from None
        raise error


_MARK = "_lakehouse_rule"  # a meta key that matches GX's results back to the suite's rules


def _marked(suite: dict) -> list[dict]:
    """The suite's rules, each marked with its index (:data:`_MARK`)."""
    return [
        dict(rule, meta=dict(rule.get("meta", {}), **{_MARK: index}))
        for index, rule in enumerate(suite.get("expectations", []))
    ]


def validate(frame, suite: dict) -> tuple[int, dict]:
    """``(rows, result)``: the suite checked on ``frame``, the result as GX's JSON.

    The :data:`~spark_jobs.engine.rules.RULES` rules are evaluated in one pass
    (:func:`~spark_jobs.engine.expectations.evaluate`); only the others start GX. The results
    come in GX's order: rules whose metrics could not be computed first (as GX lists them),
    then the rest grouped by column (:func:`~spark_jobs.engine.expectations.in_gx_order`).
    """
    loaded = datetime.datetime.now(datetime.timezone.utc)
    types = dict(frame.dtypes)
    rules = _marked(suite)
    native = [rule for rule in rules if is_native(rule, types)]
    rows, native_results = evaluate(frame, native)
    results = {rule["meta"][_MARK]: result for rule, result in zip(native, native_results)}
    others = [rule for rule in rules if not is_native(rule, types)]
    gx_result = validate_frame(frame, dict(suite, expectations=others)) if others else None
    for result in (gx_result or {}).get("results", []):
        results[result["expectation_config"]["meta"][_MARK]] = result
    return rows, _document(suite, rules, results, gx_result, loaded)


def _document(
    suite: dict, rules: list[dict], results: dict, gx_result: dict | None, loaded: datetime.datetime
) -> dict:
    """The suite's result in GX's order from each marked rule's result (``results`` by mark)."""
    errors = [
        result
        for result in (gx_result or {}).get("results", [])
        if result["exception_info"].get("raised_exception")
        or any(
            isinstance(info, dict) and info.get("raised_exception")
            for info in result["exception_info"].values()
        )
    ]
    failed_first = {id(result) for result in errors}
    ordered = errors + [
        results[rule["meta"][_MARK]]
        for rule in in_gx_order(rules)
        if id(results[rule["meta"][_MARK]]) not in failed_first
    ]
    for result in ordered:
        result["expectation_config"]["meta"].pop(_MARK, None)
    document = suite_result(suite, ordered, loaded)
    if gx_result:
        document["meta"] = gx_result["meta"]  # GX's own batch markers and version
    return document


def suite_digest(suite: dict) -> str:
    """What identifies the suite's rules (counts taken under other rules do not apply)."""
    return hashlib.sha256(
        json.dumps(suite.get("expectations", []), sort_keys=True).encode()
    ).hexdigest()[:16]


def counted_rules(suite: dict | None, frame, keys: tuple[str, ...] = ()) -> list | None:
    """The aggregate columns that count ``suite`` on ``frame`` (the rows a batch writes, as the
    gate sees them) as they are written, or None when a rule cannot be counted so: not native
    on the frame's types, or needing the whole increment
    (:func:`~spark_jobs.engine.expectations.written_counts`)."""
    if suite is None or not suite.get("expectations"):
        return None
    types = dict(frame.dtypes)
    if not all(is_native(rule, types) for rule in suite["expectations"]):
        return None
    return written_counts(suite["expectations"], keys)


def validate_counted(suite: dict, totals: dict) -> tuple[int, dict] | None:
    """``(rows, result)`` as :func:`validate` gives for the rows counted as the run wrote them
    (``totals``: :func:`counted_rules`' counts, summed); None when a rule has failing rows,
    whose first values only the rows themselves give (the caller reads them back)."""
    rules = _marked(suite)
    if any(totals.get(f"u{index}") for index in range(len(rules))):
        return None
    loaded = datetime.datetime.now(datetime.timezone.utc)
    found = results_of(rules, totals, lambda index: [])
    results = {rule["meta"][_MARK]: result for rule, result in zip(rules, found)}
    return totals["rows"], _document(suite, rules, results, None, loaded)


def summarize(result: dict) -> list[dict]:
    """One line per rule of a GX result: policy, passed, observed value, failing count, examples."""
    rules = []
    for outcome in result["results"]:
        expectation = outcome["expectation_config"]
        detail = outcome.get("result") or {}
        rules.append(
            {
                "rule": rule_name(expectation),
                "policy": policy(expectation),
                "passed": bool(outcome.get("success")),
                "observed": detail.get("observed_value"),
                "failing": detail.get("unexpected_count"),
                "examples": (detail.get("partial_unexpected_list") or [])[:EXAMPLES],
                "error": _exception_message(outcome.get("exception_info")),
            }
        )
    return rules


def _exception_message(info) -> str | None:
    """GX's ``exception_info``: one flat dict, or one per metric; the first message raised."""
    if not isinstance(info, dict):
        return None
    found = (
        [info]
        if "raised_exception" in info
        else [value for value in info.values() if isinstance(value, dict)]
    )
    return next(
        (entry.get("exception_message") for entry in found if entry.get("raised_exception")), None
    )


def render_data_docs(result_path: str, page_path: str, time_column: str | None = None) -> str:
    """Write the GX Data Docs page of the result JSON at ``result_path`` to ``page_path`` (once:
    an existing page stays). The gates write only the JSON, so a hop task never imports GX for
    its page; the page is rendered where it is first read (``lakehouse quality``, the UI). A
    bound on ``time_column`` (the hop's, epoch milliseconds) shows as the time it is."""
    fs = filesystem(page_path)
    if fs.exists(page_path):
        return page_path
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    from great_expectations.core.expectation_validation_result import (
        ExpectationSuiteValidationResultSchema,
    )
    from great_expectations.core.run_identifier import RunIdentifier
    from great_expectations.render.renderer import ValidationResultsPageRenderer
    from great_expectations.render.view import DefaultJinjaPageView

    result = ExpectationSuiteValidationResultSchema().load(read_json(result_path))
    # The page's Run Name and Run Time: the lakehouse run it checked and when (GX shows
    # __none__ otherwise).
    checked = (result.meta.get("batch_markers") or {}).get("ge_load_time")
    run_time = (
        datetime.datetime.strptime(checked, "%Y%m%dT%H%M%S.%fZ").replace(tzinfo=datetime.UTC)
        if checked
        else None
    )
    run_name = result_path.rsplit("/", 1)[-1].removesuffix(".result.json").rsplit(".", 1)[0]
    result.meta["run_id"] = RunIdentifier(run_name=run_name, run_time=run_time)
    page = DefaultJinjaPageView().render(ValidationResultsPageRenderer().render(result))
    return write_text(page_path, offline_page(_times_shown(page, result.results, time_column)))


def _times_shown(page: str, results, time_column: str | None) -> str:
    """GX shows a bound as the number it is (``946684800000.0``): on the time column, the time
    (``2000-01-01 00:00:00 UTC``), the number in its title."""
    bounds = {
        value
        for outcome in results
        if time_column and outcome.expectation_config.kwargs.get("column") == time_column
        for key in ("min_value", "max_value")
        if isinstance(value := outcome.expectation_config.kwargs.get(key), int | float)
        and not isinstance(value, bool)
    }
    for bound in bounds:
        shown = times.iso(int(bound)).replace("T", " ").removesuffix(".000") + " UTC"
        texts = "|".join(
            re.escape(text) for text in {str(bound), str(float(bound)), str(int(bound))}
        )
        page = re.sub(
            rf'(<span class="badge badge-secondary" )>(?:{texts})</span>',
            rf'\1title="{int(bound)} ms since the epoch">{shown}</span>',
            page,
        )
    return page


_STATUS = {
    "text-success": ("ok", "\u2714", "passed"),
    "text-danger": ("bad", "\u2718", "failed"),
    "text-warning": ("warn", "\u26a0", "warning"),
}
# What the page shows instead of Bootstrap's and Font Awesome's (which it loads from CDNs that a
# page of Airflow's may not reach and an offline machine cannot), beside GX's own styles that the
# page holds: a few rules of layout.
_OWN_STYLE = """
body { font-family: system-ui, sans-serif; margin: 16px; color: #1f2933; }
table { border-collapse: collapse; margin: 8px 0; } td, th { border: 1px solid #d9e2ec; padding: 4px 8px; vertical-align: top; }
.ok { color: #1b873f; font-weight: bold; } .bad { color: #c62828; font-weight: bold; } .warn { color: #b26a00; }
.d-none { display: none; } ul.nav, ol.breadcrumb { list-style: none; padding-left: 0; }
.ge-breadcrumbs, .ge-breadcrumbs.d-none { display: block; } .sticky { position: static; }
footer { display: none; } .collapse:not(.show) { display: none; } nav.navbar { height: auto !important; margin-bottom: 12px; }
"""  # noqa: E501


def offline_page(page: str) -> str:
    """A GX Data Docs page that needs nothing from elsewhere: no CDN link or script, the logo from
    GX's package, a few rules of layout beside GX's own styles, each expectation's status icon a
    mark with its word (``✔ passed``), and its links back to the pipeline's quality results (the
    page is one of a list there, not of a Data Docs site of its own)."""
    from importlib.resources import files

    page = re.sub(r"<link[^>]+href=\"https?://[^>]*>\s*", "", page)
    page = re.sub(r"<script[^>]+src=\"https?://[^\"]*\"[^>]*>\s*</script>\s*", "", page)
    page = re.sub(r"<link[^>]*rel=\"shortcut icon\"[^>]*>\s*", "", page)

    def mark(match: re.Match) -> str:
        for css, (kind, symbol, word) in _STATUS.items():
            if css in match.group(1):
                return f'<span class="status {kind}" title="{word}">{symbol} {word}</span>'
        return ""

    page = re.sub(r'<i class="([^"]*\bfa[sr]?\b[^"]*)"[^>]*>\s*</i>', mark, page)
    page = re.sub(
        r'href="(?:\.\./)+(?:index\.html|expectations/[^"]*)"',
        'href="../quality" target="_top"',
        page,
    )
    static = files("great_expectations.render.view") / "static"
    logo = base64.b64encode((static / "images" / "logo-long-vector.svg").read_bytes()).decode()
    page = re.sub(
        r'src="https://great-expectations-web-assets[^"]*logo[^"]*"',
        f'src="data:image/svg+xml;base64,{logo}"',
        page,
    )
    return page.replace("</head>", f"<style>{_OWN_STYLE}</style>\n</head>", 1)


def _counted(record: dict, suite: dict, change: dict) -> dict | None:
    """The counts the run took as it wrote its rows (``record["counted"]``), when they are of
    this suite and of every row its versions hold (a count lost, or a write Delta skipped,
    leaves them short: then the rows are read back)."""
    counted = record.get("counted")
    if (
        not counted
        or counted.get("suite") != suite_digest(suite)
        or counted.get("rows") != record.get("rows_out")
    ):
        return None
    if change.get("version_after") in (None, change.get("version_before")):
        return None
    return counted


def check(spark, lake: Lake, hop: HopSpec, record: dict, data_docs: bool = False) -> dict | None:
    """Validate the rows ``record``'s run wrote to the hop's table; write the GX result JSON to
    ``_ops/quality/`` (and its Data Docs page with ``data_docs``); return the summary (None: the
    hop has no suite)."""
    suite = load_suite(lake.spec, hop)
    if suite is None:
        return None
    began = time.time()
    table = lake.table(hop)
    change = record["tables"].get(table) or {}
    counted = _counted(record, suite, change)
    found = validate_counted(suite, counted) if counted else None
    # A run that wrote no row has no increment to check: no Spark job (its commits' metrics say so).
    idle = found is None and not record.get("rows_out")
    if not (found or idle) and (
        gone := increment_gone(table, change.get("version_before"), change.get("version_after"))
    ):
        raise UsageError(
            f"run {record['run_id']}'s rows in {hop.name} cannot be read again: {gone} is gone "
            "(`lakehouse maintain` deletes what no rollback in the window needs): check a newer run"
        )
    frame = (
        None
        if found or idle
        else increment(
            spark, table, change.get("version_before"), change.get("version_after"), hop.table_keys
        )
    )
    name = f"{record['run_id']}.{hop.name}"
    summary = {
        "suite": suite.get("name"),
        "run_id": record["run_id"],
        "hop": hop.name,
        "versions": [change.get("version_before"), change.get("version_after")],
        "rows": 0,
        "counted_as_written": found is not None,
    }
    if found is None and frame is None:
        summary.update(
            gate="passed",
            rules=[],
            note="no rows written: nothing to check" if idle else "no table yet: nothing to check",
        )
    else:
        from spark_jobs.pipelines import pipeline_code

        try:
            summary["rows"], result = found or validate(
                pipeline_code(lake.spec).quality_frame(hop, frame), suite
            )
        # a rule GX refuses: the run's rows are written, not yet checked
        except UsageError as error:
            raise UsageError(
                f"{error}, then check run {record['run_id']}'s rows: `lakehouse quality "
                f"{lake.spec.name} --hop {hop.name} --run {record['run_id']}`"
            ) from None
        rules = summarize(result)
        for rule in rules:
            if rule["policy"] == "drop":
                rule["dropped"] = record.get("rows_dropped_by_rule", {}).get(rule["rule"], 0)
        failed = [rule["rule"] for rule in rules if not rule["passed"] and rule["policy"] == "fail"]
        summary.update(
            gate="failed" if failed else "passed",
            failed=failed,
            warned=[
                rule["rule"] for rule in rules if not rule["passed"] and rule["policy"] != "fail"
            ],
            rules=rules,
        )
        folder = results_dir(lake)
        summary["result"] = write_json(folder, f"{name}.result.json", result)
        summary["data_docs"] = page = f"{folder}/{name}.html"
        fs = filesystem(page)
        if fs.exists(page):
            fs.rm(page)  # a page of an earlier check of this run: rendered anew from this result
        if data_docs:
            render_data_docs(summary["result"], page, hop.time_column)
    # a MERGE's count, run in the hop's write
    spent_writing = counted.get("seconds", 0) if found else 0
    summary["seconds"] = round(time.time() - began + spent_writing, 3)
    write_json(results_dir(lake), f"{name}.json", summary)
    return summary
