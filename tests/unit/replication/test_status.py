"""A flow's schema figures in ``status`` (:func:`airmirror.replication.status.schema_figures`) from a real SQLite
metadata DB, and their JSON in ``status --json``; deleted source topics as stops
(:func:`airmirror.replication.status.deleted_source_topics`)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from airmirror.config import FlowConfig, load_config
from airmirror.config.schema_registries import SchemaIds
from airmirror.model import OffsetRun, PartitionKey, PartitionStats, PlannedRange, RangeResult, SyncedSubject
from airmirror.replication.status import FlowStatus, SchemaFigures, deleted_source_topics, schema_figures
from airmirror.store import MetadataStore

CLUSTERS = "clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n"
REGISTRIES = "a.schema.registry.url = http://source:8081\nb.schema.registry.url = http://target:8081\n"


def flow_of(tmp_path: Path, text: str) -> FlowConfig:
    config = tmp_path / "mm2.properties"
    config.write_text(text)
    return load_config(config, env={}).flow("a->b")


@pytest.fixture
def store(tmp_path: Path):
    opened = MetadataStore.open(f"sqlite:///{tmp_path / 'metadata.db'}")
    yield opened
    opened.dispose()


def commit_passed(store: MetadataStore, flow: str, partition: int, passed: int) -> None:
    """Commit a batch copying ten records of ``orders-{partition}``, ``passed`` of them with an unknown id."""
    plan = PlannedRange(topic="orders", partition=partition, start=0, end=10, remote_topic="a.orders")
    batch_id = store.begin_batch(flow, [plan], {"trigger": "test"})
    result = RangeResult(
        topic="orders",
        partition=partition,
        start=0,
        end=10,
        records=10,
        bytes=100,
        runs=(OffsetRun(0, 10, 0),),
        downstream_start=0,
        downstream_end=10,
        schema_passed=passed,
    )
    store.commit_batch(batch_id, [result])


def test_the_figures_count_synced_subjects_mapped_ids_and_records_passed(tmp_path: Path, store: MetadataStore):
    flow = flow_of(tmp_path, CLUSTERS + REGISTRIES)
    now = datetime.now(UTC)
    store.record_schema_subjects(
        flow.name,
        [SyncedSubject("orders-value", "a.orders-value", 2, now), SyncedSubject("orders-key", "a.orders-key", 1, now)],
    )
    store.record_schema_ids(flow.name, {1: 101, 2: 102, 5: 103})
    commit_passed(store, flow.name, 0, 3)
    commit_passed(store, flow.name, 1, 4)

    figures = schema_figures(flow, store)

    assert figures == SchemaFigures(SchemaIds.TRANSLATE, subjects=2, ids_mapped=3, records_passed=7)
    assert FlowStatus(flow.name, [], None, schemas=figures).as_dict()["schemas"] == {
        "mode": "translate",
        "subjects": 2,
        "ids_mapped": 3,
        "records_passed": 7,
    }


def test_a_flow_without_registries_is_off_with_zeros(tmp_path: Path, store: MetadataStore):
    flow = flow_of(tmp_path, CLUSTERS)
    store.record_schema_ids(flow.name, {1: 101})

    assert schema_figures(flow, store) == SchemaFigures()
    assert FlowStatus(flow.name, [], None).as_dict()["schemas"] == {
        "mode": "off",
        "subjects": 0,
        "ids_mapped": 0,
        "records_passed": 0,
    }


def test_keep_is_shown_as_keep(tmp_path: Path, store: MetadataStore):
    flow = flow_of(tmp_path, CLUSTERS + REGISTRIES + "a->b.airmirror.schema.ids = keep\n")

    assert schema_figures(flow, store) == SchemaFigures(SchemaIds.KEEP)


def stat(cursor: int, at: datetime) -> PartitionStats:
    return PartitionStats(
        cursor=cursor, records=cursor, bytes=cursor, last_batch_id=1, last_batch_at=at, gap_count=0, gap_offsets=0
    )


def test_a_copied_source_topic_the_cluster_no_longer_lists_is_one_stop_naming_every_cursor(tmp_path: Path):
    flow = flow_of(tmp_path, CLUSTERS)
    early, late = datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC)
    stats = {
        PartitionKey("orders", 0): stat(40, early),
        PartitionKey("orders", 1): stat(7, late),
        PartitionKey("kept", 0): stat(3, early),
    }

    (stop,) = deleted_source_topics(flow, stats, ["kept"])

    assert (stop.topic, stop.partition, stop.stopped_at) == ("orders", None, late)
    assert "source topic orders is gone from cluster a" in stop.reason
    assert "orders-0 at 40, orders-1 at 7" in stop.reason
    assert "a.orders keeps what was copied" in stop.reason


def test_a_topic_the_flow_no_longer_selects_is_not_reported_deleted(tmp_path: Path):
    flow = flow_of(tmp_path, CLUSTERS + "a->b.topics = kept\n")

    assert deleted_source_topics(flow, {PartitionKey("orders", 0): stat(4, datetime.now(UTC))}, ["kept"]) == []
