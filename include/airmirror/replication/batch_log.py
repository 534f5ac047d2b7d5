"""The batch log: how a committed Kafka transaction describes itself, so the metadata DB can always catch up.

Every partition copy commits ONE Kafka transaction on the target cluster that atomically contains:
1. the copied records, in source order, in the remote topic's same partition;
2. a *batch-log record* in the internal topic ``airmirror-batches.{source}.internal`` (target cluster,
   one partition) holding the :class:`~airmirror.model.RangeResult`: planned range, counts, downstream
   offsets and every offset-sync run;
3. an *anchor*: a transactional offset commit for the consumer group ``airmirror-eos-{source}-{target}``
   on the remote topic-partition.  Its committed offset is the downstream position after the copied records
   and its metadata names the batch id, the upstream end and the batch-log record's offset.

Because the three are one transaction, "the anchor says batch N" is equivalent to "batch N's records for
this partition are in the target exactly once".  Anchors are read after ``init_transactions()`` fenced any
older producer for the partition, so they are stable.
"""

from __future__ import annotations

import base64
import json
import struct
import time
import zlib
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from airmirror.kafka_retry import is_transient
from airmirror.model import OffsetRun, RangeResult

LOG_FORMAT_VERSION = 1
RUN_STRUCT = struct.Struct(">qqq")
LOG_TOPIC_CONFIG = {
    "cleanup.policy": "delete",
    "retention.ms": str(14 * 24 * 3600 * 1000),
    "max.message.bytes": str(16 * 1024 * 1024),
}


def batch_log_topic(source_alias: str) -> str:
    """Name of the batch-log topic on the target; ``.internal`` keeps it out of every replication flow."""
    return f"airmirror-batches.{source_alias}.internal"


def anchor_group(source_alias: str, target_alias: str) -> str:
    """The consumer group on the target whose transactional offset commits anchor each partition copy."""
    return f"airmirror-eos-{source_alias}-{target_alias}"


@dataclass(frozen=True)
class Anchor:
    """What the last committed transaction of a partition copy recorded."""

    batch_id: int
    upstream_end: int
    downstream_position: int
    log_offset: int

    def metadata(self) -> str:
        return json.dumps({"b": self.batch_id, "u": self.upstream_end, "m": self.log_offset})

    @classmethod
    def parse(cls, offset: int, metadata: str | None) -> Anchor | None:
        if offset < 0 or not metadata:
            return None
        fields = json.loads(metadata)
        return cls(int(fields["b"]), int(fields["u"]), offset, int(fields["m"]))


def encode_result(flow: str, batch_id: int, result: RangeResult) -> bytes:
    """Serialize a range result as a batch-log record value (runs packed and compressed)."""
    packed = b"".join(
        RUN_STRUCT.pack(r.upstream_start, r.upstream_end, r.downstream_start) for r in result.runs
    )
    body: dict[str, Any] = {
        "v": LOG_FORMAT_VERSION,
        "flow": flow,
        "batch": batch_id,
        "topic": result.topic,
        "partition": result.partition,
        "start": result.start,
        "end": result.end,
        "records": result.records,
        "bytes": result.bytes,
        "downstream_start": result.downstream_start,
        "downstream_end": result.downstream_end,
        "runs": base64.b64encode(zlib.compress(packed)).decode("ascii"),
    }
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def decode_result(value: bytes) -> tuple[str, int, RangeResult]:
    """Inverse of :func:`encode_result`: ``(flow, batch_id, result)``."""
    body = json.loads(value)
    if body.get("v") != LOG_FORMAT_VERSION:
        raise ValueError(f"unsupported batch-log record version {body.get('v')!r}")
    packed = zlib.decompress(base64.b64decode(body["runs"]))
    runs = tuple(OffsetRun(*RUN_STRUCT.unpack_from(packed, i)) for i in range(0, len(packed), RUN_STRUCT.size))
    result = RangeResult(
        topic=body["topic"],
        partition=body["partition"],
        start=body["start"],
        end=body["end"],
        records=body["records"],
        bytes=body["bytes"],
        runs=runs,
        downstream_start=body["downstream_start"],
        downstream_end=body["downstream_end"],
    )
    return body["flow"], body["batch"], result


def log_key(flow: str, topic: str, partition: int) -> bytes:
    return f"{flow}|{topic}|{partition}".encode("utf-8")


def read_anchors(
    consumer_config: dict[str, Any], group: str, partitions: list[tuple[str, int]], timeout: float = 60.0
) -> dict[tuple[str, int], Anchor | None]:
    """Committed anchors of ``group`` for remote ``(topic, partition)`` pairs (``None`` where absent).

    Retriable coordinator errors (a coordinator still loading after a broker start or restart) are retried
    until ``timeout``.
    """
    if not partitions:
        return {}
    consumer = Consumer({**consumer_config, "group.id": group, "enable.auto.commit": False})
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                committed = consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=timeout)
                errors = [tp.error for tp in committed if tp.error is not None]
                if errors:
                    raise KafkaException(errors[0])
                return {(tp.topic, tp.partition): Anchor.parse(tp.offset, tp.metadata) for tp in committed}
            except KafkaException as error:
                if not is_transient(error) or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def read_logged_result(consumer_config: dict[str, Any], log_topic: str, log_offset: int, timeout: float = 30.0) -> tuple[str, int, RangeResult]:
    """Fetch and decode the batch-log record at ``log_offset`` (read_committed)."""
    consumer = Consumer(
        {
            **consumer_config,
            "group.id": "airmirror-batch-log-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "error",
        }
    )
    try:
        consumer.assign([TopicPartition(log_topic, 0, log_offset)])
        message = consumer.poll(timeout)
        if message is None:
            raise TimeoutError(f"batch-log record {log_topic}@{log_offset} not readable within {timeout}s")
        if message.error() is not None:
            raise KafkaException(message.error())
        if message.offset() != log_offset:
            raise ValueError(f"batch-log record {log_topic}@{log_offset} is missing (got {message.offset()})")
        return decode_result(message.value())
    finally:
        consumer.close()
