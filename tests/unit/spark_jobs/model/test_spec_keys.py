"""``spark_jobs/model/spec_keys.py``: the spec reference lists every declared key with the spec's
defaults, and its example loads."""

from __future__ import annotations

import pytest

from spark_jobs.model.spec import load_spec

pytestmark = pytest.mark.unit


def test_the_spec_reference_lists_every_declared_key_with_the_specs_defaults(tmp_path):
    """docs/reference/spec.md's tables come from spark_jobs/model/spec_keys.py; each knob's
    default is the one PipelineSpec applies when the key is left out; its example loads."""
    import importlib.util

    from spark_jobs.model.spec import PipelineSpec
    from spark_jobs.model.spec_keys import HOP_KEYS, PIPELINE_KEYS, RETENTION_KEYS
    from testkit.paths import ROOT

    found = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(found)
    found.loader.exec_module(hooks)
    page = hooks.spec_page((ROOT / "docs" / "reference" / "spec.md").read_text())
    top, rest = page.split("## Retention keys")
    retention, hops = rest.split("## Hop keys")
    rows = {line.split("|")[1].strip(): line for line in top.splitlines() if line.startswith("| `")}
    assert {f"`{key.name}`" for key in PIPELINE_KEYS} == set(rows)
    assert {f"`{key.name}`" for key in RETENTION_KEYS} == {
        line.split("|")[1].strip() for line in retention.splitlines() if line.startswith("| `")
    }
    assert {f"`{key.name}`" for key in HOP_KEYS} == {
        line.split("|")[1].strip() for line in hops.splitlines() if line.startswith("| `")
    }
    defaults = PipelineSpec(name="x", landing=None, hops=())
    for key in (
        "schedule",
        "window",
        "allowed_lateness",
        "shuffle_partitions",
        "min_batches_to_retain",
    ):
        assert f"| `{getattr(defaults, key)}` |" in rows[f"`{key}`"], rows[f"`{key}`"]
    # each table between its pair of lines, written again in place
    assert page.count("<!-- end ") == 3
    spec_file = tmp_path / "shop.yaml"
    spec_file.write_text(page.split("```yaml")[1].split("```")[0])
    assert load_spec(spec_file).hop_names[-1] == "gold_merchant_revenue"
