"""Read exactly one source offset range ``[start, end)`` of one partition, as Arrow record batches.

Contract:
- The consumer uses ``isolation.level=read_committed``: records of aborted transactions and transaction
  markers are never returned.  So the records returned are the committed records with
  ``start <= offset < end``, in offset order; there may be fewer than ``end - start``.
- ``end`` must not exceed the partition's last stable offset when the range was planned.  Reading stops at
  the first record at or beyond ``end``, or at the partition end (which, under read_committed, is the last
  stable offset and therefore ``>= end``).
- If retention deleted part of the range after it was planned, the consumer's ``auto.offset.reset`` is
  forced to ``error`` and the read fails loudly: the batch is then re-planned, which records the gap.
  Nothing is ever silently skipped.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from airmirror.replication.record_schema import RECORD_ARROW_SCHEMA

FETCH_BATCH = 5000
POLL_TIMEOUT_S = 1.0


def reader_config(consumer_config: Mapping[str, str]) -> dict[str, Any]:
    """The source consumer settings for range reads: the flow's client settings plus fixed safety rules."""
    config: dict[str, Any] = {
        "max.partition.fetch.bytes": 16 * 1024 * 1024,
        "fetch.max.bytes": 64 * 1024 * 1024,
        **consumer_config,
    }
    config.update(
        {
            "group.id": config.get("group.id") or "airmirror-range-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
        }
    )
    return config


def read_range(
    consumer_config: Mapping[str, str], topic: str, partition: int, start: int, end: int
) -> Iterator[pa.RecordBatch]:
    """Yield the committed records of ``topic``/``partition`` with ``start <= offset < end``."""
    if start >= end:
        return
    consumer = Consumer(reader_config(consumer_config))
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        done = False
        while not done:
            messages = consumer.consume(FETCH_BATCH, POLL_TIMEOUT_S)
            records: list[Message] = []
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        done = True
                        break
                    raise KafkaException(error)
                if message.offset() >= end:
                    done = True
                    break
                records.append(message)
            if records:
                yield to_record_batch(records)
    finally:
        consumer.close()


def to_record_batch(messages: list[Message]) -> pa.RecordBatch:
    """Convert consumed messages to one Arrow batch in :data:`RECORD_ARROW_SCHEMA`."""
    timestamps = [m.timestamp() for m in messages]
    headers = [m.headers() for m in messages]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([m.key() for m in messages], pa.binary()),
            pa.array([m.value() for m in messages], pa.binary()),
            pa.array([m.topic() for m in messages], pa.string()),
            pa.array([m.partition() for m in messages], pa.int32()),
            pa.array([m.offset() for m in messages], pa.int64()),
            pa.array([ts for _, ts in timestamps], pa.int64()),
            pa.array([kind for kind, _ in timestamps], pa.int32()),
            pa.array(
                [None if h is None else [{"key": k, "value": v} for k, v in h] for h in headers],
                RECORD_ARROW_SCHEMA.field("headers").type,
            ),
        ],
        schema=RECORD_ARROW_SCHEMA,
    )
