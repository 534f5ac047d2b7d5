"""MM2's single-partition topics on a flow's target: ``heartbeats`` and ``{source}.checkpoints.internal``.

Contract:
- A missing topic is created with one partition and ``cleanup.policy=compact`` (MM2 keeps the newest record
  per key) by :func:`airmirror.kafka.topics.ensure_internal_topic`: its replication factor is the flow's
  ``{kind}.topic.replication.factor`` (MM2's default 3) and ``min.insync.replicas`` follows from it.  A factor
  the cluster cannot satisfy is an input error naming the key.
- Records are written to partition 0 and the call returns only once the target acknowledged every one of
  them; otherwise it raises :class:`~airmirror.errors.ReplicationFailure` (callers record nothing then).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient

from airmirror.config import FlowConfig
from airmirror.errors import ReplicationFailure
from airmirror.kafka.topics import ensure_internal_topic

DELIVERY_TIMEOUT_S = 60.0
COMPACTED = {"cleanup.policy": "compact"}


@dataclass(frozen=True)
class OutgoingRecord:
    """One record for partition 0: raw key and value bytes and a timestamp in epoch milliseconds."""

    key: bytes
    value: bytes
    timestamp: int


def ensure_topic(flow: FlowConfig, name: str, factor_key: str) -> None:
    """Create the compacted single-partition topic ``name`` on the flow's target unless it exists."""
    ensure_internal_topic(flow, AdminClient(flow.target_client("admin")), name, COMPACTED, factor_key)


def write_records(flow: FlowConfig, topic: str, records: Sequence[OutgoingRecord]) -> None:
    """Write ``records`` in order to partition 0 of ``topic`` on the target and wait for every acknowledgement."""
    if not records:
        return
    failures: list[str] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(error.str())

    producer = Producer({**flow.target_client("producer"), "enable.idempotence": True})
    for record in records:
        producer.produce(topic, record.value, record.key, partition=0, timestamp=record.timestamp, on_delivery=delivered)
    unsent = producer.flush(DELIVERY_TIMEOUT_S)
    if unsent or failures:
        reason = failures[0] if failures else f"{unsent} records unacknowledged after {DELIVERY_TIMEOUT_S:.0f}s"
        raise ReplicationFailure(f"cannot write {len(records)} records to '{topic}' on cluster '{flow.target}': {reason}")
