"""Single records on a flow's target: writing MM2's heartbeats and checkpoints, reading one record back.

Contract:
- :func:`write_records` writes to partition 0 and returns only once the target acknowledged every record;
  it takes the records as they come (an iterator is never materialized) and holds at most
  :data:`WRITE_QUEUE_RECORDS` unacknowledged ones, so its memory does not grow with their number; otherwise it
  raises :class:`~airmirror.errors.ReplicationFailure` (callers record nothing then).  The
  topics are MM2's compacted one-partition topics, created by
  :func:`airmirror.kafka.topics.ensure_internal_topic` with :data:`airmirror.kafka.topics.COMPACTED`.
- :func:`read_record_at` reads the committed record at exactly one offset, or raises.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from airmirror import names
from airmirror.errors import AccessDenied, ReplicationFailure
from airmirror.kafka.authorization import access_scope, named, refuses_unused_group
from airmirror.kafka.client_log import logged
from airmirror.kafka.clients import drop_producer, producer_client, warm_producer

if TYPE_CHECKING:
    from airmirror.config import FlowConfig

DELIVERY_TIMEOUT_S = 60.0
WRITE_QUEUE_RECORDS = 10_000  # the writer's producer queue, unless the flow's producer settings say otherwise
READ_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class OutgoingRecord:
    """One record for partition 0: raw key and value bytes (``None``: a tombstone) and a timestamp in epoch
    milliseconds."""

    key: bytes
    value: bytes | None
    timestamp: int


def write_records(
    flow: FlowConfig,
    topic: str,
    records: Iterable[OutgoingRecord],
    cluster: str | None = None,
    timeout: float = DELIVERY_TIMEOUT_S,
) -> int:
    """Write ``records`` in order to partition 0 of ``topic`` on the target (or on cluster ``cluster``) and wait
    up to ``timeout`` seconds for every acknowledgement; returns how many were written.  A refused write raises
    :class:`~airmirror.errors.AccessDenied` naming the ACL to grant."""
    alias = cluster or flow.target
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(error)

    producer: Producer | None = None
    written = 0
    for record in records:
        producer = producer or producer_client(flow, alias, WRITE_QUEUE_RECORDS)
        while True:
            try:
                producer.produce(
                    topic, record.value, record.key, partition=0, timestamp=record.timestamp, on_delivery=delivered
                )
                break
            except BufferError:
                producer.poll(0.05)
        written += 1
    if producer is None:
        return 0
    unsent = producer.flush(timeout)
    if unsent or failures:
        drop_producer(flow, alias)  # what it still holds is no concern of the next writer's
    if failures:
        refused = named(access_scope(flow, alias), KafkaException(failures[0]), topic=topic)
        if isinstance(refused, AccessDenied):
            raise refused
    if unsent or failures:
        reason = failures[0].str() if failures else f"{unsent} records unacknowledged after {timeout:.0f}s"
        raise ReplicationFailure(f"cannot write {written} records to '{topic}' on cluster '{alias}': {reason}")
    return written


def warm_writer(flow: FlowConfig, cluster: str | None = None) -> None:
    """Start connecting the producer :func:`write_records` will use for the target (or cluster ``cluster``)
    within this :func:`~airmirror.kafka.clients.shared_clients` block
    (:func:`~airmirror.kafka.clients.warm_producer`)."""
    warm_producer(flow, cluster or flow.target, WRITE_QUEUE_RECORDS)


def read_record_at(consumer_config: Mapping[str, Any], topic: str, partition: int, offset: int) -> Message:
    """The committed record at ``offset`` of ``topic``-``partition``.  Raises TimeoutError when nothing is
    readable within :data:`READ_TIMEOUT_S`, KafkaException on a read error and ValueError when the record is
    gone (compacted or deleted: the read lands on a later offset).  Never commits."""
    consumer = Consumer(
        logged(
            {
                **consumer_config,
                "group.id": names.reader_group("record"),
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
    )
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + READ_TIMEOUT_S
        message = consumer.poll(READ_TIMEOUT_S)
        while message is not None and refuses_unused_group(message.error()):
            message = consumer.poll(max(deadline - time.monotonic(), 0))
        if message is None:
            raise TimeoutError(f"nothing readable within {READ_TIMEOUT_S:.0f}s")
        if message.error() is not None:
            raise KafkaException(message.error())
        if message.offset() != offset:
            raise ValueError(f"the record is gone (read offset {message.offset()})")
        return message
    finally:
        consumer.close()
