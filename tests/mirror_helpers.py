"""Flow runs, real consumer groups and MM2 byte helpers for the checkpoint, failover and heartbeat tests."""

from __future__ import annotations

import struct
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from airmirror.checkpoints.checkpoint_emitter import CheckpointReport, emit_checkpoints
from airmirror.client import OffsetAndMetadata
from airmirror.config import FlowConfig
from airmirror.kafka.retry import is_transient, retry_transient
from airmirror.replication.options import BatchOptions
from airmirror.replication.pipeline import ReplicateReport, replicate_once
from airmirror.store import MetadataStore
from airmirror.store.opening import open_flow
from tests.kafka_helpers import Record, create_topic, produce, read_partition


def kafka_string(text: str) -> bytes:
    """A Kafka protocol STRING built by hand: INT16 length, then UTF-8."""
    data = text.encode("utf-8")
    return struct.pack(">h", len(data)) + data


def opened(config: Path, flow_name: str = "a->b") -> AbstractContextManager[tuple[FlowConfig, MetadataStore]]:
    return open_flow(config, flow_name)


def replicate(config: Path, spark: Any, flow_name: str = "a->b", **options: Any) -> ReplicateReport:
    with opened(config, flow_name) as (flow, store):
        return replicate_once(flow, store, BatchOptions(**options), lambda: spark)


def checkpoint(config: Path, flow_name: str = "a->b") -> CheckpointReport:
    with opened(config, flow_name) as (flow, store):
        return emit_checkpoints(flow, store)


def unique_records(label: str, count: int, duplicate_key_every: int = 0) -> list[Record]:
    """Records whose values identify them; with ``duplicate_key_every`` n, every n-th record has the key
    ``dup`` (compaction keeps only the last of those), the others unique keys."""
    now = int(time.time() * 1000)
    return [
        Record(
            b"dup" if duplicate_key_every and i % duplicate_key_every == 0 else f"k{i}".encode(),
            f"{label}-{i}".encode(),
            (),
            now + i,
        )
        for i in range(count)
    ]


def group_consumer(bootstrap: str, group: str, **settings: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            **settings,
        }
    )


def transient(error: KafkaError | None) -> bool:
    """A consumer error event that clears by itself (a coordinator still loading on a fresh cluster)."""
    return error is not None and is_transient(KafkaException(error))


def consume_and_commit(bootstrap: str, group: str, topic: str, partition: int, count: int) -> list[Record]:
    """As ``group``, consume ``count`` records of one partition from its committed offset and commit."""
    consumer = group_consumer(bootstrap, group)
    consumer.assign([TopicPartition(topic, partition)])
    consumed: list[Record] = []
    deadline = time.monotonic() + 30
    try:
        while len(consumed) < count:
            assert time.monotonic() < deadline, f"only {len(consumed)} of {count} records of {topic}-{partition}"
            message = consumer.poll(1.0)
            if message is None or transient(message.error()):
                continue
            assert message.error() is None, message.error()
            consumed.append(Record(message.key(), message.value(), (), message.timestamp()[1]))
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return consumed


def commit_offsets(bootstrap: str, group: str, offsets: dict[tuple[str, int], int], metadata: str = "") -> None:
    """Commit explicit offsets for ``group`` as a consumer does (``metadata`` with each)."""
    consumer = group_consumer(bootstrap, group)
    partitions = [TopicPartition(t, p, o, metadata) for (t, p), o in offsets.items()]
    try:
        retry_transient(lambda: consumer.commit(offsets=partitions, asynchronous=False), f"commit offsets of {group}")
    finally:
        consumer.close()


def as_java_offsets(offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> dict[tuple[str, int], tuple[int, str]]:
    """The failover client's offsets in the shape of the ``java_translate_offsets`` fixture's."""
    return {(tp.topic, tp.partition): (o.offset, o.metadata) for tp, o in offsets.items()}


def group_offsets_on(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result()
    return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions}


def consume_rest(
    bootstrap: str, group: str, topics: list[str], timeout: float = 60.0
) -> dict[tuple[str, int], list[Record]]:
    """As ``group``, subscribe to ``topics`` and read every partition from its committed offset to the end.

    A partition without a committed offset fails the test (``auto.offset.reset=error``)."""
    partitions = {
        (topic, p)
        for topic, meta in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics.items()
        if topic in topics
        for p in meta.partitions
    }
    consumer = group_consumer(bootstrap, group, **{"auto.offset.reset": "error", "enable.partition.eof": True})
    consumer.subscribe(topics)
    read: dict[tuple[str, int], list[Record]] = {key: [] for key in partitions}
    at_end: set[tuple[str, int]] = set()
    deadline = time.monotonic() + timeout
    try:
        while at_end != partitions:
            assert time.monotonic() < deadline, f"partitions never reached their end: {partitions - at_end}"
            message = consumer.poll(1.0)
            if message is None:
                continue
            if transient(message.error()):
                continue
            key = (message.topic(), message.partition())
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                at_end.add(key)
                continue
            read[key].append(Record(message.key(), message.value(), (), message.timestamp()[1]))
    finally:
        consumer.close()
    return read


def produce_transactions(
    bootstrap: str, topic: str, transactional_id: str, transactions: list[tuple[str, int, bool]]
) -> None:
    """Write one transaction per ``(label, record count, aborted)`` to partition 0, in order."""
    for label, count, aborted in transactions:
        produce(bootstrap, topic, 0, unique_records(label, count), transactional_id=transactional_id, abort=aborted)


def compacted_topic_with_holes(bootstrap: str, topic: str, records: list[Record]) -> list[tuple[int, Record]]:
    """Create a compacted topic, write ``records`` (repeating keys) and wait until the cleaner removed some
    and the partition stopped changing.  Returns the surviving records with their offsets."""
    create_topic(
        bootstrap, topic, 1, {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.001"}
    )
    produce(bootstrap, topic, 0, records)
    deadline = time.monotonic() + 90
    previous: list[tuple[int, Record]] = []
    while True:
        survivors = read_partition(bootstrap, topic, 0)
        if survivors == previous and len(survivors) < survivors[-1][0] + 1:
            return survivors
        assert time.monotonic() < deadline, "the broker never compacted the topic"
        if len(survivors) == survivors[-1][0] + 1:
            now = int(time.time() * 1000)
            produce(bootstrap, topic, 0, [Record(f"roll-{now}".encode(), b"roll", (), now)])
        previous = survivors
        time.sleep(1.5)
