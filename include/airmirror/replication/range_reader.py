"""Read exactly one source offset range ``[start, end)`` of one partition, as Arrow record batches.

Contract:
- The consumer uses ``isolation.level=read_committed``: records of aborted transactions and transaction
  markers are never returned.  So the records returned are the committed records with
  ``start <= offset < end``, in offset order; there may be fewer than ``end - start``.
- ``end`` must not exceed the partition's last stable offset when the range was planned.  Reading stops at
  the record at ``end - 1`` without waiting for more, else at the first record beyond it, or at the
  partition end (which, under read_committed, is the last stable offset and therefore ``>= end``): the
  range then ends in aborted records or transaction markers.
- If retention deleted part of the range after it was planned, the consumer's ``auto.offset.reset`` is
  forced to ``error`` and the read fails loudly: the batch is then re-planned, which records the gap.
  Nothing is ever silently skipped.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from airmirror.replication.record_schema import HEADER_ARROW_TYPE, RECORD_ARROW_SCHEMA

FETCH_BATCH = 10_000
POLL_TIMEOUT_S = 0.05  # consume() returns after FETCH_BATCH records or this long, so a small tail never waits


def reader_config(consumer_config: Mapping[str, str]) -> dict[str, Any]:
    """The source consumer settings for range reads: the flow's client settings plus fixed safety rules."""
    config: dict[str, Any] = {
        "enable.sparse.connections": False,  # connect to the leader at once, so fetching starts sooner
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


class RangeReader:
    """An open read of ``topic``/``partition`` offsets ``[start, end)``; use it as a context manager.

    The consumer is created and assigned at construction, so librdkafka fetches in the background while
    the caller gets ready (a writer sets up its transaction meanwhile); :meth:`record_batches` then yields
    the records.
    """

    def __init__(self, consumer_config: Mapping[str, str], topic: str, partition: int, start: int, end: int) -> None:
        self.topic, self.partition, self.start, self.end = topic, partition, start, end
        self._consumer: Consumer | None = None
        if start < end:
            self._consumer = Consumer(reader_config(consumer_config))
            self._consumer.assign([TopicPartition(topic, partition, start)])

    def record_batches(self) -> Iterator[pa.RecordBatch]:
        """The committed records with ``start <= offset < end``, in offset order, as Arrow batches."""
        consumer = self._consumer
        if consumer is None:
            return
        last = self.end - 1
        done = False
        while not done:
            messages = consumer.consume(FETCH_BATCH, POLL_TIMEOUT_S)
            records = messages
            for index, message in enumerate(messages):
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    records, done = messages[:index], True
                    break
                offset = message.offset()
                if offset >= last:
                    records, done = messages[: index + (offset == last)], True
                    break
            if records:
                yield to_record_batch(records, self.topic, self.partition)

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def __enter__(self) -> RangeReader:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def to_record_batch(messages: list[Message], topic: str, partition: int) -> pa.RecordBatch:
    """Convert consumed messages, all of ``topic``/``partition``, to one Arrow batch in :data:`RECORD_ARROW_SCHEMA`."""
    count = len(messages)
    timestamps = [m.timestamp() for m in messages]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([m.key() for m in messages], pa.binary()),
            pa.array([m.value() for m in messages], pa.binary()),
            pa.repeat(pa.scalar(topic, pa.string()), count),
            pa.repeat(pa.scalar(partition, pa.int32()), count),
            pa.array([m.offset() for m in messages], pa.int64()),
            pa.array([ts for _, ts in timestamps], pa.int64()),
            pa.array([kind for kind, _ in timestamps], pa.int32()),
            headers_array([m.headers() for m in messages]),
        ],
        schema=RECORD_ARROW_SCHEMA,
    )


def headers_array(headers: list[list[tuple[str, bytes | None]] | None]) -> pa.Array:
    """Per-record header lists (``None`` for a record without headers) as the schema's list-of-struct column."""
    if not any(headers):
        return pa.nulls(len(headers), HEADER_ARROW_TYPE)
    offsets = [0]
    names: list[str] = []
    values: list[bytes | None] = []
    for record_headers in headers:
        for name, value in record_headers or ():
            names.append(name)
            values.append(value)
        offsets.append(len(names))
    entries = pa.StructArray.from_arrays(
        [pa.array(names, pa.string()), pa.array(values, pa.binary())], fields=list(HEADER_ARROW_TYPE.value_type)
    )
    missing = pa.array([h is None for h in headers], pa.bool_())
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), entries, type=HEADER_ARROW_TYPE, mask=missing)
