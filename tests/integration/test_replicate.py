"""One micro-batch against two real Kafka clusters and real Spark: selection, fidelity, increments, gaps."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, ResourceType

from airmirror.config import load_config
from airmirror.replication.options import BatchOptions
from airmirror.replication.pipeline import plan_batch, replicate_once, sync_flow_topics
from airmirror.store import MetadataStore
from tests.conftest import write_config
from tests.kafka_helpers import Record, create_topic, produce, read_partition, records_of, sample_records

pytestmark = pytest.mark.integration


def run(config: Path, spark, **options) -> object:
    flow = load_config(config).flow("a->b")
    store = MetadataStore.open(flow.metadata_db_url)
    try:
        return replicate_once(flow, store, BatchOptions(**options), lambda: spark)
    finally:
        store.dispose()


def test_selects_topics_and_copies_byte_for_byte(clusters, spark, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    create_topic(a, f"{prefix}.orders", 3, {"retention.ms": "86400000", "min.insync.replicas": "1"})
    create_topic(a, f"{prefix}.skip-internal")
    create_topic(a, f"b.{prefix}.cycle")
    create_topic(a, f"{prefix}.excluded")
    for p in range(3):
        produce(a, f"{prefix}.orders", p, sample_records(120, f"p{p}"))
    produce(a, f"b.{prefix}.cycle", 0, sample_records(3))
    config = write_config(
        tmp_path / "mm2.properties",
        clusters,
        f"a->b.enabled = true\ntopics = {prefix}.*, b\\.{prefix}.*\ntopics.exclude = .*excluded, .*-internal",
    )

    report = run(config, spark)

    remote = f"a.{prefix}.orders"
    assert sorted(m.remote_topic for m in report.topics.mappings) == [remote]
    target_admin = AdminClient({"bootstrap.servers": b})
    target_topics = target_admin.list_topics(timeout=10).topics
    assert len(target_topics[remote].partitions) == 3
    assert f"a.b.{prefix}.cycle" not in target_topics and f"a.{prefix}.excluded" not in target_topics
    configs = target_admin.describe_configs([ConfigResource(ResourceType.TOPIC, remote)])
    described = next(iter(configs.values())).result()
    assert described["retention.ms"].value == "86400000"
    assert described["min.insync.replicas"].value == "1"  # excluded by MM2's default list: broker default kept
    for p in range(3):
        assert records_of(b, remote, p) == records_of(a, f"{prefix}.orders", p)
    assert report.summary.records == 360


def test_second_run_copies_only_new_records_and_new_partitions(clusters, spark, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.events"
    create_topic(a, topic, 2)
    produce(a, topic, 0, sample_records(50, "first"))
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")
    assert run(config, spark).summary.records == 50
    idle = run(config, spark)
    assert idle.planned.ranges == [] and idle.summary is None

    produce(a, topic, 0, sample_records(30, "second"))
    source_admin = AdminClient({"bootstrap.servers": a})
    source_admin.create_partitions([NewPartitions(topic, 4)])[topic].result()
    produce(a, topic, 3, sample_records(5, "new-partition"))
    report = run(config, spark)
    assert report.summary.records == 35
    assert report.topics.grown == {f"a.{topic}": (2, 4)}
    for p in range(4):
        assert records_of(b, f"a.{topic}", p) == records_of(a, topic, p)


def test_aborted_transactions_are_never_copied(clusters, spark, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.payments"
    create_topic(a, topic)
    produce(a, topic, 0, sample_records(10, "c1"), transactional_id=f"{prefix}-tx")
    produce(a, topic, 0, sample_records(10, "aborted"), transactional_id=f"{prefix}-tx", abort=True)
    produce(a, topic, 0, sample_records(10, "c2"), transactional_id=f"{prefix}-tx")
    produce(a, topic, 0, sample_records(5, "aborted-tail"), transactional_id=f"{prefix}-tx", abort=True)
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")

    report = run(config, spark)

    copied = records_of(b, f"a.{topic}", 0)
    assert copied == records_of(a, topic, 0)
    assert len(copied) == 20 and all(b"aborted" not in (r.key or b"") for r in copied)
    assert report.summary.records == 20


def test_compacted_topic_keeps_survivors_and_tombstones(clusters, spark, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.profiles"
    create_topic(
        a,
        topic,
        1,
        {
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.001",
            "delete.retention.ms": "600000",
        },
    )
    base = int(time.time() * 1000)
    records = [Record(f"k{i % 5}".encode(), None if i == 39 else f"v{i}".encode(), (), base + i) for i in range(40)]
    produce(a, topic, 0, records)
    deadline = time.time() + 90
    while True:
        time.sleep(1)
        roll = Record(f"roll-{time.time()}".encode(), b"x", (), int(time.time() * 1000))
        produce(a, topic, 0, [roll])  # a unique key: rolls the segment so it can be cleaned, never compacted away
        source = read_partition(a, topic, 0)
        offsets = [o for o, _ in source]
        if len(offsets) < offsets[-1] + 1:  # the cleaner removed superseded records: offsets have holes
            break
        assert time.time() < deadline, "the broker never compacted the topic"
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")

    run(config, spark)

    copied = records_of(b, f"a.{topic}", 0)
    assert copied == records_of(a, topic, 0)
    assert Record(b"k4", None, (), base + 39) in copied


def test_retention_gap_is_recorded_not_retried(clusters, spark, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.logs"
    create_topic(a, topic)
    early, late = sample_records(10, "early"), sample_records(20, "late")
    produce(a, topic, 0, early)
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")
    run(config, spark)
    produce(a, topic, 0, late)
    source_admin = AdminClient({"bootstrap.servers": a})
    for future in source_admin.delete_records([TopicPartition(topic, 0, 25)]).values():
        future.result()

    report = run(config, spark)

    assert report.summary.records == 5
    assert [(r.gap().start, r.gap().end) for r in report.planned.ranges if r.gap()] == [(10, 25)]
    flow = load_config(config).flow("a->b")
    store = MetadataStore.open(flow.metadata_db_url)
    assert [(g.start, g.end) for g in store.gaps(flow.name)] == [(10, 25)]
    store.dispose()
    assert run(config, spark).planned.ranges == []
    assert records_of(b, f"a.{topic}", 0) == early + late[15:]


def test_resumed_batch_whose_start_was_deleted_records_a_gap(clusters, spark, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.expiring"
    create_topic(a, topic)
    records = sample_records(30)
    produce(a, topic, 0, records)
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")
    flow = load_config(config).flow("a->b")
    store = MetadataStore.open(flow.metadata_db_url)
    topics = sync_flow_topics(flow, store, BatchOptions())
    planned = plan_batch(flow, store, topics.mappings, BatchOptions())  # the job dies right after planning
    assert planned.batch_id is not None
    source_admin = AdminClient({"bootstrap.servers": a})
    for future in source_admin.delete_records([TopicPartition(topic, 0, 12)]).values():
        future.result()

    report = run(config, spark)

    assert report.planned.resumed and report.summary.records == 18
    assert [(g.start, g.end) for g in store.gaps(flow.name)] == [(0, 12)]
    assert records_of(b, f"a.{topic}", 0) == records[12:]
    store.dispose()
