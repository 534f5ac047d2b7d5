"""MM2's single-partition topics on a flow's target: ``heartbeats`` and ``{source}.checkpoints.internal``.

Contract:
- A missing topic is created with one partition and ``cleanup.policy=compact`` (MM2 keeps the newest record
  per key).  Its replication factor is the flow's ``{kind}.topic.replication.factor`` when that key is set, else
  the broker default (-1), so a single-broker cluster works without configuration.  A factor the cluster
  cannot satisfy is an input error naming the key.
- Records are written to partition 0 and the call returns only once the target acknowledged every one of
  them; otherwise it raises :class:`~airmirror.errors.ReplicationFailure` (callers record nothing then).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from airmirror.config import FlowConfig
from airmirror.errors import ConfigError, ReplicationFailure

ADMIN_TIMEOUT_S = 30.0
DELIVERY_TIMEOUT_S = 60.0
COMPACTED = {"cleanup.policy": "compact"}


@dataclass(frozen=True)
class OutgoingRecord:
    """One record for partition 0: raw key and value bytes and a timestamp in epoch milliseconds."""

    key: bytes
    value: bytes
    timestamp: int


def replication_factor(flow: FlowConfig, key: str) -> int:
    """The value of ``key`` (e.g. ``heartbeats.topic.replication.factor``) when set, else -1 (broker default)."""
    setting = flow.setting(key)
    return -1 if setting is None else int(setting.value)


def ensure_topic(flow: FlowConfig, name: str, factor_key: str) -> None:
    """Create the compacted single-partition topic ``name`` on the flow's target unless it exists."""
    admin = AdminClient(flow.target_client("admin"))
    if name in admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics:
        return
    factor = replication_factor(flow, factor_key)
    future = admin.create_topics([NewTopic(name, 1, factor, config=COMPACTED)], request_timeout=ADMIN_TIMEOUT_S)[name]
    try:
        future.result()
    except KafkaException as error:
        code = error.args[0].code()
        if code == KafkaError.TOPIC_ALREADY_EXISTS:
            return
        if code == KafkaError.INVALID_REPLICATION_FACTOR:
            raise ConfigError(
                f"cannot create '{name}' on cluster '{flow.target}' with replication factor {factor}: "
                f"{error.args[0].str()}",
                key=factor_key,
                line=flow.line_of(factor_key),
            ) from error
        raise ReplicationFailure(f"cannot create '{name}' on cluster '{flow.target}': {error}") from error


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
