"""The metrics a committed batch sends (:func:`airmirror.dag_factory.metrics.publish_batch`), the schema ones in
particular, caught from Airflow's metrics layer; tests/airflow/test_metrics.py sends them over StatsD."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.sdk.observability import stats

from airmirror.config import FlowConfig, load_config
from airmirror.dag_factory import metrics
from airmirror.model import OffsetRun, PlannedRange, RangeResult
from airmirror.replication.pipeline import BatchSummary
from airmirror.store import MetadataStore

CLUSTERS = "clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n"
REGISTRIES = "a.schema.registry.url = http://source:8081\nb.schema.registry.url = http://target:8081\n"


class Caught:
    """Stands in for Airflow's ``stats``: every metric sent, as ``(kind, name, value, tags)``."""

    normalize_name_for_stats = staticmethod(stats.normalize_name_for_stats)

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, object, dict[str, str]]] = []

    def incr(self, name: str, count: int, *, tags: dict[str, str]) -> None:
        self.sent.append(("counter", name, count, tags))

    def gauge(self, name: str, value: int, *, tags: dict[str, str]) -> None:
        self.sent.append(("gauge", name, value, tags))

    def timing(self, name: str, value: object, *, tags: dict[str, str]) -> None:
        self.sent.append(("timer", name, value, tags))

    def named(self, name: str) -> list[tuple[str, object, dict[str, str]]]:
        return [(kind, value, tags) for kind, sent, value, tags in self.sent if sent == name]


@pytest.fixture
def caught(monkeypatch) -> Caught:
    catcher = Caught()
    monkeypatch.setattr(metrics, "stats", catcher)
    return catcher


@pytest.fixture
def store(tmp_path: Path):
    opened = MetadataStore.open(f"sqlite:///{tmp_path / 'metadata.db'}")
    yield opened
    opened.dispose()


def flow_of(tmp_path: Path, text: str) -> FlowConfig:
    config = tmp_path / "mm2.properties"
    config.write_text(text)
    return load_config(config, env={}).flow("a->b")


def committed(store: MetadataStore, flow: str, passed: dict[int, int]) -> BatchSummary:
    """A committed batch of ten records per partition of ``orders``, ``passed[p]`` of them with an unknown id."""
    plans = [PlannedRange(topic="orders", partition=p, start=0, end=10, remote_topic="a.orders") for p in passed]
    batch_id = store.begin_batch(flow, plans, {"trigger": "test"})
    results = [
        RangeResult(
            topic="orders",
            partition=p,
            start=0,
            end=10,
            records=10,
            bytes=100,
            runs=(OffsetRun(0, 10, 0),),
            downstream_start=0,
            downstream_end=10,
            schema_passed=count,
        )
        for p, count in passed.items()
    ]
    store.commit_batch(batch_id, results)
    return BatchSummary(batch_id, results)


def test_a_batch_counts_records_passed_per_partition_and_gauges_subjects_and_ids(tmp_path, store, caught):
    flow = flow_of(tmp_path, CLUSTERS + REGISTRIES)
    store.record_schema_ids(flow.name, {1: 101, 2: 102, 3: 103})
    summary = committed(store, flow.name, {0: 4, 1: 0})

    metrics.publish_batch(flow, store, summary)

    flow_tags = {"source": "a", "target": "b"}
    assert caught.named("airmirror.schema-records-passed") == [
        ("counter", 4, {**flow_tags, "topic": "orders", "partition": "0"})
    ]
    assert caught.named("airmirror.schema-subjects-synced") == [("gauge", 0, {**flow_tags, "mode": "translate"})]
    assert caught.named("airmirror.schema-ids-mapped") == [("gauge", 3, {**flow_tags, "mode": "translate"})]
    assert len(caught.named("airmirror.record-count")) == 2


def test_a_flow_with_schema_ids_off_sends_no_schema_metric(tmp_path, store, caught):
    flow = flow_of(tmp_path, CLUSTERS)
    metrics.publish_batch(flow, store, committed(store, flow.name, {0: 0}))

    assert caught.named("airmirror.record-count")
    assert not [sent for sent in caught.sent if sent[1].startswith("airmirror.schema-")]
