"""``spark_jobs/service/lineage.py``: what each kind of hop reads and writes, named as OpenLineage
names datasets (no JVM; before any run, so no table has columns yet). The crm example has landing
hops, changes hops (one keeps its deleted keys) and a hop reading a changes table; a topic-fed
copy of ad_events has a hop reading Kafka; a lake on S3 names its tables by bucket and key."""

from __future__ import annotations

import pytest
import yaml

from spark_jobs.service.lineage import dataset_name, hop_lineage
from testkit.lakes import example_copy, spec_copy

pytestmark = pytest.mark.unit


def _named(datasets) -> list[tuple[str, str, str]]:
    return [(each.namespace, each.name, each.role) for each in datasets]


def test_landing_and_table_hops_of_the_crm_example(tmp_path, monkeypatch):
    monkeypatch.setenv(
        "LAKEHOUSE_PIPELINES", str(example_copy(tmp_path / "pipelines", "crm").parent)
    )
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "lake"))
    raw = yaml.safe_load((tmp_path / "pipelines" / "crm" / "crm.yaml").read_text())
    hops = {hop["name"]: hop for hop in raw["hops"]}
    home = str(tmp_path / "lake")
    for name, hop in hops.items():
        found = hop_lineage("crm", name)
        upstreams = hop.get("upstreams") or ([hop["upstream"]] if "upstream" in hop else [])
        if hop["kind"] == "ingest":
            assert _named(found.inputs) == [("file", f"{home}/{hop['landing']}", "landing")]
        else:
            assert _named(found.inputs) == [
                ("file", f"{home}/{hops[up]['table']}", "table") for up in upstreams
            ]
        assert _named(found.outputs)[0] == ("file", f"{home}/{hop['table']}", "table"), name
        if hop.get("quarantine"):
            assert ("file", f"{home}/{hop['quarantine']}", "quarantine") in _named(found.outputs)
        assert all(not each.fields for each in found.outputs)  # no run yet, nothing read
        assert (found.rows_out, found.gate, found.rules) == (None, None, [])
    kept = [
        name
        for name in hops
        if any(o.role == "deleted_keys" for o in hop_lineage("crm", name).outputs)
    ]
    assert kept, "a changes hop of the example keeps its deleted keys"
    for name in kept:
        assert _named(hop_lineage("crm", name).outputs)[-1] == (
            "file",
            f"{home}/{hops[name]['table']}_deleted_keys",
            "deleted_keys",
        )


def test_a_topic_hop_reads_kafka_named_by_its_first_bootstrap_server(tmp_path, monkeypatch):
    hops = yaml.safe_load(
        (spec_copy(tmp_path / "base") / "ad_events" / "ad_events.yaml").read_text()
    )["hops"]
    hops[0].update(topic="ad_events_in")
    monkeypatch.setenv("LAKEHOUSE_PIPELINES", str(spec_copy(tmp_path / "pipelines", hops=hops)))
    monkeypatch.setenv("LAKEHOUSE_HOME", "s3a://lake-bucket/prod/lake")
    monkeypatch.setenv("LAKEHOUSE_KAFKA_BOOTSTRAP_SERVERS", "broker-1:9092,broker-2:9092")
    bronze = hop_lineage("ad_events", "bronze")
    assert _named(bronze.inputs) == [("kafka://broker-1:9092", "ad_events_in", "topic")]
    assert _named(bronze.outputs)[0] == (
        "s3://lake-bucket",
        f"prod/lake/{hops[0]['table']}",
        "table",
    )


@pytest.mark.parametrize(
    "path, named",
    [
        ("/data/lake/tables/x", ("file", "/data/lake/tables/x")),
        ("s3a://bucket/lake/tables/x", ("s3://bucket", "lake/tables/x")),
        ("s3://bucket/x", ("s3://bucket", "x")),
        ("gs://bucket/a/b", ("gs://bucket", "a/b")),
    ],
)
def test_paths_are_named_as_openlineage_names_datasets(path, named):
    assert dataset_name(path) == named
