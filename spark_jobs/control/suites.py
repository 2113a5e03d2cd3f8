"""Data-quality gates (docs/concepts/quality-gates.md): a Great Expectations suite per hop, checked
on the rows one run wrote, with a policy per expectation.

- ``warn``: the result is recorded; the gate passes.
- ``drop``: rows failing the rule never reach the table: the hop's write sends them to the
  hop's quarantine table with the rule's name as the reason (written + quarantined = read).
  Only row-level rules can drop (:data:`ROW_RULES`).
- ``fail``: the gate fails; the stream DAG rolls the run back.

Suites are GX 1.x suite JSON files, ``quality/<hop>.json`` in the pipeline's folder (or
``$LAKEHOUSE_QUALITY/<pipeline>/<hop>.json``), with ``meta.policy`` on each expectation. This module
is the plain part (loading a suite, reading and printing results); :mod:`spark_jobs.engine.quality`
checks a run's rows with Spark and GX.
"""

from __future__ import annotations

import json
from pathlib import Path

from spark_jobs.logs.fs import filesystem, read_json
from spark_jobs.logs.ops import read_records
from spark_jobs.model.errors import LakehouseError, UsageError
from spark_jobs.model.lake import Lake
from spark_jobs.model.settings import quality_dir
from spark_jobs.model.spec import HopSpec, PipelineSpec

POLICIES = ("warn", "drop", "fail")
ROW_RULES = (
    "expect_column_values_to_not_be_null",
    "expect_column_values_to_be_in_set",
    "expect_column_values_to_be_between",
    "expect_column_values_to_match_regex",
)
EXAMPLES = 5  # failing values shown per rule


def suites_dir(name: str, spec_file: Path | None) -> Path:
    """The folder of pipeline ``name``'s suites: ``$LAKEHOUSE_QUALITY/<name>`` when set, else
    ``quality/`` in the pipeline's folder (``quality/<name>/`` beside a spec lying among others)."""
    shared = quality_dir()
    if shared is not None or spec_file is None:
        return (shared or Path("quality")) / name
    folder = spec_file.parent
    return folder / "quality" if folder.name == name else folder / "quality" / name


def suite_path(spec: PipelineSpec, hop: HopSpec) -> Path:
    return suites_dir(spec.name, spec.source) / f"{hop.name}.json"


def run_to_check(lake: Lake, hop: HopSpec, run: str | None = None) -> dict:
    """The record of the succeeded run whose rows ``lakehouse quality`` checks against ``hop``'s
    suite: ``run``, or the hop's last; a :class:`UsageError` naming the fix when the hop has no
    suite or no such run."""
    if load_suite(lake.spec, hop) is None:
        raise UsageError(f"hop {hop.name} has no quality suite: add {suite_path(lake.spec, hop)}")
    runs = [
        record
        for record in read_records(lake, hop.name)
        if record.get("status") == "succeeded" and record.get("mode") != "continuous"
    ]
    if run:
        runs = [record for record in runs if record["run_id"] == run]
        if not runs:
            raise UsageError(
                f"no succeeded run {run!r} of {hop.name}: see `lakehouse status {lake.spec.name}`"
            )
    elif not runs:
        raise UsageError(
            f"{hop.name} has no succeeded run to check yet: `lakehouse run {lake.spec.name}` first"
        )
    return runs[-1]


def rule_name(expectation: dict) -> str:
    """A short readable name: ``expect_column_values_to_not_be_null(campaign_id)``."""
    kwargs = expectation.get("kwargs", {})
    target = kwargs.get("column") or ",".join(kwargs.get("column_list", [])) or ""
    return f"{expectation['type']}({target})"


def load_suite(spec: PipelineSpec, hop: HopSpec) -> dict | None:
    """The hop's suite as a dict (None when the hop has none), its policies checked."""
    path = suite_path(spec, hop)
    if not path.exists():
        return None
    try:
        suite = json.loads(path.read_text())
    except ValueError as error:
        raise UsageError(
            f"quality suite {path} is not valid JSON ({error}): fix the file"
        ) from None
    for expectation in suite.get("expectations", []):
        policy = expectation.get("meta", {}).get("policy", "fail")
        if policy not in POLICIES:
            raise UsageError(
                f"quality suite {path}: {rule_name(expectation)} has policy {policy!r}; "
                f"use one of {', '.join(POLICIES)}"
            )
        if policy == "drop" and expectation["type"] not in ROW_RULES:
            raise UsageError(
                f"quality suite {path}: {rule_name(expectation)} cannot drop rows (it is not a "
                f"per-row rule); use warn or fail, or one of {', '.join(ROW_RULES)}"
            )
    return suite


def policy(expectation: dict) -> str:
    return expectation.get("meta", {}).get("policy", "fail")


def drop_rules(suite: dict | None) -> list[dict]:
    return [e for e in (suite or {}).get("expectations", []) if policy(e) == "drop"]


def hop_drop_rules(spec: PipelineSpec, hop: HopSpec, quarantine: str | None) -> list[dict]:
    """The hop's ``drop`` quality rules; a hop that drops rows needs a sink with a
    quarantine table.
    """
    rules = drop_rules(load_suite(spec, hop))
    if rules and quarantine is None:
        raise LakehouseError(
            f"quality suite {suite_path(spec, hop)} drops rows of {hop.name}, which has no "
            "quarantine table: give the hop `quarantine: tables/quarantine/<name>` in its spec "
            "(ingest and append hops only), or use warn/fail"
        )
    return rules


def results_dir(lake: Lake) -> str:
    return lake.path(f"_ops/quality/{lake.spec.name}")


def read_summary(lake: Lake, run_id: str, hop: str) -> dict | None:
    """The gate summary ``check`` wrote for a run and hop (None: not checked)."""
    return read_json(f"{results_dir(lake)}/{run_id}.{hop}.json")


def read_repair_summaries(lake: Lake, run_id: str, hop: str) -> list[dict]:
    """The gate summaries of the run's repairs of ``hop`` (run ids ``<run>.repair-N``,
    docs/concepts/run-and-backfill.md: "A join after a backfill"), in their order."""
    folder = results_dir(lake)
    fs = filesystem(folder)
    if not fs.exists(folder):
        return []
    prefix, suffix = f"{run_id}.repair-", f".{hop}.json"
    numbers = sorted(
        int(middle)
        for name in (path.rsplit("/", 1)[-1] for path in fs.ls(folder, detail=False))
        if name.startswith(prefix)
        and name.endswith(suffix)
        and (middle := name[len(prefix) : -len(suffix)]).isdigit()
    )
    return [
        summary
        for number in numbers
        if (summary := read_summary(lake, f"{run_id}.repair-{number}", hop)) is not None
    ]


def page_rendered(page: str | None) -> bool:
    """Whether a gate's Data Docs page exists yet (it is rendered where it is first read)."""
    return bool(page) and filesystem(page).exists(page)


def format_summary(summary: dict) -> str:
    lines = [
        f"{summary['hop']} quality gate {summary['gate'].upper()} for run {summary['run_id']}: "
        f"suite {summary['suite']}, {summary['rows']:,} rows (table versions "
        f"{summary['versions'][0]}..{summary['versions'][1]}), {summary['seconds']} s"
    ]
    for rule in summary.get("rules", []):
        verdict = "ok" if rule["passed"] else ("FAILED" if rule["policy"] == "fail" else "failed")
        observed = f" observed {rule['observed']}" if rule["observed"] is not None else ""
        failing = f" failing {rule['failing']:,}" if rule["failing"] else ""
        failing += f" dropped {rule['dropped']:,}" if rule.get("dropped") is not None else ""
        examples = f" e.g. {rule['examples']}" if rule["examples"] and not rule["passed"] else ""
        error = f" error: {rule['error']}" if rule.get("error") else ""
        lines.append(
            f"  {verdict:<7}{rule['policy']:<6}{rule['rule']}{observed}{failing}{examples}{error}"
        )
    page = summary.get("data_docs")
    if page_rendered(page):
        lines.append(f"  data docs: {page}")
    elif summary.get("result"):
        lines.append(
            f"  result: {summary['result']} (its Data Docs page is rendered where it is first "
            "read: `lakehouse quality`, or the pipeline's quality page in the Airflow UI)"
        )
    return "\n".join(lines)


def format_quarantine(document: dict) -> str:
    """``lakehouse quarantine``'s document as a person reads it."""
    lines = [
        f"quarantine of {document['pipeline']}"
        + (f", run {document['run_id']}" if document["run_id"] else "")
    ]
    for hop in document["hops"]:
        lines.append(f"  {hop['hop']}: {hop['rows']:,} rows (table version {hop['version']})")
        for reason in hop["reasons"]:
            lines.append(f"    {reason['rows']:>8,}  {reason['value']}")
            lines.extend(
                f"              {sample!r}" for sample in hop["samples"].get(reason["value"], [])
            )
        if hop["files"]:
            lines.append("    by file:")
            lines.extend(f"    {each['rows']:>8,}  {each['value']}" for each in hop["files"])
        spans: dict[tuple[str, str], list[str]] = {}
        for again in hop["ingest_again"]:
            spans.setdefault((again["start"], again["end"]), []).append(again["file"])
        for (start, end), files in spans.items():
            what = (
                f"once {', '.join(files)} {'is' if len(files) == 1 else 'are'} fixed"
                if files[0]
                else "once the rows or the rule are fixed"
            )
            lines.append(
                f"    {what}, ingest again (every hop, in order): "
                f"lakehouse backfill {document['pipeline']} --start {start} --end {end}"
            )
    return "\n".join(lines)
