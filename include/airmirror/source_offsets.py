"""Ask the source cluster for the offsets the planner needs, for many partitions at once.

All queries use ``read_committed``: the end offset is the last stable offset, so a plan never reaches into
an open transaction.  ``until`` is resolved with the broker's offsets-for-times: the first offset whose
timestamp is at or after the given time, or the end when every record is older.

:func:`next_record_timestamps` reads (with one consumer, never committing) the timestamp of the next record
at given positions, for ``status``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from airmirror.errors import ReplicationFailure
from airmirror.model import PartitionKey
from airmirror.planner import PartitionOffsets

REQUEST_TIMEOUT_S = 30.0


def list_offsets(admin: AdminClient, keys: Iterable[PartitionKey], spec: OffsetSpec) -> dict[PartitionKey, int]:
    """One ListOffsets round for every partition with the same spec."""
    requests = {TopicPartition(k.topic, k.partition): spec for k in keys}
    if not requests:
        return {}
    futures = admin.list_offsets(
        requests, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=REQUEST_TIMEOUT_S
    )
    offsets: dict[PartitionKey, int] = {}
    for tp, future in futures.items():
        try:
            offsets[PartitionKey(tp.topic, tp.partition)] = future.result().offset
        except KafkaException as error:
            raise ReplicationFailure(f"cannot list offsets of {tp.topic}-{tp.partition}: {error}") from error
    return offsets


def partition_offsets(
    admin: AdminClient, keys: list[PartitionKey], until_ms: int | None = None, start_ms: int | None = None
) -> dict[PartitionKey, PartitionOffsets]:
    """Log start, last stable offset and, when asked, the offsets of ``until_ms`` and ``start_ms``."""
    starts = list_offsets(admin, keys, OffsetSpec.earliest())
    ends = list_offsets(admin, keys, OffsetSpec.latest())
    untils = offsets_for_time(admin, keys, until_ms, ends)
    start_points = offsets_for_time(admin, keys, start_ms, ends)
    return {
        key: PartitionOffsets(starts[key], ends[key], untils.get(key), start_points.get(key)) for key in keys
    }


def offsets_for_time(
    admin: AdminClient, keys: list[PartitionKey], timestamp_ms: int | None, ends: dict[PartitionKey, int]
) -> dict[PartitionKey, int]:
    """First offset at or after ``timestamp_ms`` per partition (the end when every record is older)."""
    if timestamp_ms is None:
        return {}
    found = list_offsets(admin, keys, OffsetSpec.for_timestamp(timestamp_ms))
    return {key: offset if offset >= 0 else ends[key] for key, offset in found.items()}


NEXT_RECORD_TIMEOUT_S = 10.0


def next_record_timestamps(
    consumer_config: Mapping[str, Any], positions: Mapping[PartitionKey, int], timeout: float = NEXT_RECORD_TIMEOUT_S
) -> dict[PartitionKey, tuple[int, int]]:
    """``(offset, timestamp ms)`` of the first committed record at or after each partition's position.

    One ``read_committed`` consumer is assigned every partition at its position; each partition is paused as
    soon as its first record (or its end) arrives, and the whole read stops after ``timeout`` seconds.  A
    partition with no committed record from its position to its end (or none read in time, or no timestamp)
    is left out.  Read-only: nothing is committed.
    """
    if not positions:
        return {}
    consumer = Consumer(
        {
            **consumer_config,
            "group.id": consumer_config.get("group.id") or "airmirror-status-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "max.partition.fetch.bytes": 65536,
            "queued.max.messages.kbytes": 1024,
        }
    )
    found: dict[PartitionKey, tuple[int, int]] = {}
    pending = set(positions)
    deadline = time.monotonic() + timeout
    try:
        consumer.assign([TopicPartition(k.topic, k.partition, offset) for k, offset in positions.items()])
        while pending and (left := deadline - time.monotonic()) > 0:
            for message in consumer.consume(num_messages=len(pending) + 10, timeout=min(left, 1.0)):
                key = PartitionKey(message.topic(), message.partition())
                if key not in pending:
                    continue
                error = message.error()
                if error is not None and error.code() != KafkaError._PARTITION_EOF:
                    continue
                if error is None:
                    kind, timestamp = message.timestamp()
                    if kind != TIMESTAMP_NOT_AVAILABLE:
                        found[key] = (message.offset(), timestamp)
                pending.discard(key)
                consumer.pause([TopicPartition(key.topic, key.partition)])
    finally:
        consumer.close()
    return found
