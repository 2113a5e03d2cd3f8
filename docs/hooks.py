"""The manual's pages that are generated from the code, so they cannot drift.

The reference pages are committed, so that they read right where users read them (the
repository's web view as well as the built manual), and ``make reference`` (``python
docs/hooks.py``) writes them again; ``tests/unit/test_docs.py`` and the manual's build fail when
a committed page differs from what the code generates, as Airflow's providers keep theirs:

- ``reference/cli.md``: every ``lakehouse`` command and flag, from the CLI's own parser;
- the key tables of ``reference/spec.md`` (between its ``<!-- ... keys -->`` and ``<!-- end ...
  keys -->`` lines): from :mod:`spark_jobs.model.spec_keys`, the defaults from
  :class:`spark_jobs.model.spec.PipelineSpec`;
- ``reference/settings.md``: every environment variable the package reads, from
  :data:`spark_jobs.model.settings.SETTINGS` and a scan of the sources for ``LAKEHOUSE_*`` names;
- ``images/architecture.svg``: the package's modules by layer (``docs/architecture_svg.py``).

As an MkDocs hook it also fills the figures of ``benchmarks.md`` (where it says ``<!-- figures
-->``) when the manual is built: each benchmark's newest recorded run in ``bench/runs/``,
rendered by the benchmark's own Markdown (they carry the runs' times, which the repository's
pages do not).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _importable() -> None:
    """The checkout's packages (``bench``) importable: MkDocs restores ``sys.path`` after
    loading a hook.
    """
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def _commands(
    parser: argparse.ArgumentParser, prefix: str = "lakehouse"
) -> list[tuple[str, argparse.ArgumentParser]]:
    found = []
    for action in parser._actions:  # argparse keeps its subcommands only here
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                nested = _commands(sub, f"{prefix} {name}")
                found += nested or [(f"{prefix} {name}", sub)]
    return found


def cli_page() -> str:
    from spark_jobs.cli import build_parser

    lines = [
        "# CLI reference",
        "",
        "Generated from the `lakehouse` command's own parser by `make "
        "reference`. Every command takes",
        "`--json` (one JSON",
        "document on stdout, and no progress lines). Without it, the long commands (run, backfill,",
        "rollback, refresh) print their steps on stderr, each with the seconds since the command",
        "began. Errors you can fix print one `error: ...` line naming the fix and exit 2; a failed",
        "run or gate exits 1; a reader that closes the pipe (`| head`) ends the "
        "command quietly (141).",
        "",
    ]
    for name, sub in _commands(build_parser()):
        lines += [
            f"## `{name}`",
            "",
            (sub.description or "").strip(),
            "",
            "```",
            sub.format_usage().strip(),
            "```",
            "",
            "| argument | meaning |",
            "|---|---|",
        ]
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            flags = ", ".join(f"`{flag}`" for flag in action.option_strings) or f"`{action.dest}`"
            meaning = (action.help or "").replace("|", "\\|")
            if action.choices and not isinstance(action, argparse._SubParsersAction):
                meaning += f" (one of {', '.join(map(str, action.choices))})"
            if action.default not in (None, False, argparse.SUPPRESS) and action.option_strings:
                meaning += f" (default: `{action.default}`)"
            lines.append(f"| {flags} | {meaning.strip()} |")
        lines.append("")
    return "\n".join(lines)


def names_in_sources() -> dict[str, list[str]]:
    """Every ``LAKEHOUSE_*`` name the package, its Airflow plugin and the launcher name,
    with the files.
    """
    found: dict[str, set[str]] = {}
    for folder in ("spark_jobs", "plugins/lakehouse_airflow", "include/scripts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "resources" in path.parts:
                continue
            for name in set(re.findall(r"\bLAKEHOUSE_[A-Z][A-Z0-9_]*[A-Z0-9]\b", path.read_text())):
                found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return {name: sorted(files) for name, files in sorted(found.items())}


def settings_page() -> str:
    from spark_jobs.model.settings import SETTINGS

    lines = [
        "# Settings",
        "",
        "Every environment variable the platform reads, generated from its one declaration in",
        "`spark_jobs/model/settings.py` by `make reference` "
        "(`tests/unit/test_docs.py` checks that this",
        "page is current and that the sources name no other `LAKEHOUSE_*` variable). Airflow's own",
        "settings (`AIRFLOW__*`) and the",
        "standard `AWS_*` variables of an S3 lake are Airflow's and AWS's.",
        "",
        "| variable | default | meaning |",
        "|---|---|---|",
    ]
    for setting in SETTINGS:
        lines.append(
            f"| `{setting.name}` | {f'`{setting.default}`' if setting.default else '-'} "
            f"| {setting.meaning} |"
        )
    return "\n".join(lines) + "\n"


def _default(name: str) -> str:
    from dataclasses import MISSING, fields

    from spark_jobs.model.spec import PipelineSpec

    field = next((field for field in fields(PipelineSpec) if field.name == name), None)
    if field is None or field.default in (None, MISSING):
        return "none"
    return f"`{field.default}`" if field.default != "" else "empty"


def spec_page(markdown: str) -> str:
    """``reference/spec.md`` with its key tables from :mod:`spark_jobs.model.spec_keys`, each
    between its ``<!-- NAME keys -->`` and ``<!-- end NAME keys -->`` lines."""
    from spark_jobs.model.spec_keys import HOP_KEYS, PIPELINE_KEYS, RETENTION_KEYS

    pipeline = ["| key | default | meaning |", "|---|---|---|"] + [
        f"| `{key.name}` | {'required' if key.required else _default(key.name)} | {key.meaning} |"
        for key in PIPELINE_KEYS
    ]
    hop = ["| key | kinds | meaning |", "|---|---|---|"] + [
        f"| `{key.name}` | {key.kinds}{' (required)' if key.required else ''} | {key.meaning} |"
        for key in HOP_KEYS
    ]
    retention = ["| key | meaning |", "|---|---|"] + [
        f"| `{key.name}` | {key.meaning} |" for key in RETENTION_KEYS
    ]
    for marker, table in (("pipeline", pipeline), ("retention", retention), ("hop", hop)):
        region = re.compile(rf"<!-- {marker} keys -->\n.*?<!-- end {marker} keys -->", re.S)
        filled = "\n".join([f"<!-- {marker} keys -->", *table, f"<!-- end {marker} keys -->"])
        markdown, found = region.subn(lambda _match, filled=filled: filled, markdown)
        if found != 1:
            raise ValueError(
                f"reference/spec.md needs one '<!-- {marker} keys -->' ... '<!-- end "
                f"{marker} keys -->' pair"
            )
    return markdown


DOCS = ROOT / "docs"


def architecture_svg() -> str:
    """The architecture page's drawing (:mod:`architecture_svg`, beside this file)."""
    import importlib.util

    here = Path(__file__).resolve().parent
    spec = importlib.util.spec_from_file_location("architecture_svg", here / "architecture_svg.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.drawing(ROOT)


def reference_pages() -> dict[str, str]:
    """Each committed reference page as the code generates it now, by its path under docs/."""
    _importable()
    return {
        "reference/cli.md": cli_page() + "\n",
        "reference/settings.md": settings_page(),
        "reference/spec.md": spec_page((DOCS / "reference" / "spec.md").read_text()),
        "images/architecture.svg": architecture_svg(),
    }


def stale_pages() -> list[str]:
    """The committed reference pages that differ from what the code generates."""
    return [
        path
        for path, text in reference_pages().items()
        if not (DOCS / path).is_file() or (DOCS / path).read_text() != text
    ]


def figures() -> str:
    """Each benchmark's newest recorded full run, rendered by the benchmark's own Markdown."""
    from bench.__main__ import SECTIONS
    from bench.soak import newest_parts

    runs = sorted((ROOT / "bench" / "runs").glob("*.json"))
    documents = [json.loads(path.read_text()) for path in runs]
    lines = []
    for key, title, render in SECTIONS:
        newest = next((document for document in reversed(documents) if key in document), None)
        lines += [f"## {title}", ""]
        if newest is None:
            lines += [
                'No recorded run holds this benchmark yet: `make bench BENCH_ARGS="--only '
                f'{key}"` measures it.',
                "",
            ]
            continue
        machine = newest["machine"]
        # each soak part from its newest run
        shown = newest_parts(documents) if key == "soak" else newest[key]
        lines += [
            f"Recorded run of {newest['started']} on {machine['cpus']} cores ({machine['cpu']}), "
            f"Spark master {machine['spark_master']}.",
            "",
            render(shown),
            "",
        ]
    return "\n".join(lines)


def on_pre_build(config):
    from mkdocs.exceptions import PluginError  # here: the tests read this file without MkDocs

    if stale := stale_pages():
        raise PluginError(
            f"generated reference pages are stale ({', '.join(stale)}): run `make reference`"
        )


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri == "benchmarks.md":
        _importable()
        return markdown.replace("<!-- figures -->", figures())
    return markdown


if __name__ == "__main__":  # `make reference`: write the reference pages again
    for path, text in reference_pages().items():
        (DOCS / path).write_text(text)
        print(f"wrote docs/{path}")
