"""Read exactly one source offset range ``[start, end)`` of one partition, as Arrow record batches.

Contract:
- The consumer uses ``isolation.level=read_committed``: records of aborted transactions and transaction
  markers are never returned.  So the records returned are the committed records with
  ``start <= offset < end``, in offset order; there may be fewer than ``end - start``.
- ``end`` must not exceed the partition's last stable offset when the range was planned.  Reading stops at
  the record at ``end - 1`` without waiting for more, else at the first record beyond it, or at an
  end-of-partition at or beyond ``end`` (the range then ends in aborted records or transaction markers).
- **An end of partition below ``end`` is not the end of the range.**  It happens with a new leader whose
  high watermark still lags, with follower fetching, or after a truncation.  The read keeps waiting, for up
  to :data:`EARLY_END_WAIT_S`; then it asks the leader for the partition's end again.  If the log now ends
  below ``end`` (an unclean leader election truncated it), the range ends where the read got to:
  :attr:`RangeReader.reached` says where, and the records the new leader will write at those offsets are
  copied by the next batch.  Otherwise the read fails with a :class:`~airmirror.errors.ReplicationFailure`
  naming the partition and both offsets.  The read never silently stops short.
- **Leader epochs.**  A range that starts with a known ``start_epoch`` (the source leader epoch of the
  record before ``start``) is assigned with it, so librdkafka validates the start with the leader before
  fetching (KIP-320).  When librdkafka reports a truncation (:func:`reports_truncation`), the position is
  checked again the planner's way (:func:`~airmirror.kafka.offsets.divergence_points`: the epoch may only
  have ended on a transaction marker at the position).  If the leader's log really diverged below it (an
  unclean leader election after the range was planned), the read fails with a
  :class:`~airmirror.errors.ReplicationFailure` naming the partition; the next run ends the range there and
  then re-plans the partition from the divergence point (see :mod:`airmirror.replication.planner`); otherwise the read
  goes on from the same position.  :attr:`RangeReader.reached_epoch` is the epoch of the last record read.
- If retention deleted part of the range after it was planned, the consumer's ``auto.offset.reset`` is
  forced to ``error`` and the read fails loudly: the batch is then re-planned, which records the gap.
  Nothing is ever silently skipped.
- While no record arrives, the read yields empty batches every :data:`POLL_TIMEOUT_S`, so the caller can
  keep its own time bounds.
- **Memory.**  What the read buffers is its share of a :class:`~airmirror.replication.spark.task_buffer.TaskBuffer`:
  librdkafka's prefetch is bounded by the buffer's consumer limits, and one handed-over batch holds at most
  :meth:`~airmirror.replication.spark.task_buffer.TaskBuffer.batch_records` records for the largest value read
  so far.  Nothing the read keeps grows with the range.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from airmirror import names
from airmirror.errors import ReplicationFailure
from airmirror.kafka.authorization import AccessScope, named, refuses_unused_group
from airmirror.kafka.clients import REQUEST_TIMEOUT_S
from airmirror.kafka.offsets import divergence_points, epoch_position
from airmirror.model import PartitionKey
from airmirror.replication.spark.record_schema import HEADER_ARROW_TYPE, RECORD_ARROW_SCHEMA
from airmirror.replication.spark.task_buffer import TaskBuffer, bounded

log = logging.getLogger(__name__)
POLL_TIMEOUT_S = 0.05  # consume() returns after a batch's records or this long, so a small tail never waits
EARLY_END_WAIT_S = 30.0
EMPTY_BATCH = pa.RecordBatch.from_pylist([], schema=RECORD_ARROW_SCHEMA)


def reader_config(consumer_config: Mapping[str, str], buffer: TaskBuffer) -> dict[str, Any]:
    """The source consumer settings for range reads: the flow's client settings within ``buffer``'s consumer
    limits (:func:`~airmirror.replication.spark.task_buffer.bounded`), plus fixed safety rules."""
    config: dict[str, Any] = {
        "enable.sparse.connections": False,  # connect to the leader at once, so fetching starts sooner
        **bounded(consumer_config, buffer.consumer_limits(), "consumer"),
    }
    # librdkafka refuses a fetch.max.bytes below message.max.bytes: a flow's lower fetch lowers both
    config["message.max.bytes"] = min(int(config["message.max.bytes"]), int(config["fetch.max.bytes"]))
    config.update(
        {
            "group.id": config.get("group.id") or names.reader_group("range"),
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
    the caller gets ready (a writer sets up its transaction meanwhile); :meth:`seek` moves the start (a
    resumed range), and :meth:`record_batches` then yields the records.  :attr:`reached` is the source
    position the read got to: ``end`` once the range was read, less only after a truncation (see the
    module docstring).  ``buffer`` bounds what the read holds (the default setting's split unless given).
    """

    def __init__(
        self,
        consumer_config: Mapping[str, str],
        topic: str,
        partition: int,
        start: int,
        end: int,
        start_epoch: int | None = None,
        *,
        access: AccessScope | None = None,
        buffer: TaskBuffer = TaskBuffer(),
    ) -> None:
        self.topic, self.partition, self.start, self.end = topic, partition, start, end
        self.access = access
        self.reached, self.reached_epoch = start, start_epoch
        self._consumer_config = consumer_config
        self._buffer = buffer
        self._largest_value = 0
        self._consumer: Consumer | None = None
        if start < end:
            self._consumer = Consumer(reader_config(consumer_config, buffer))
            self._consumer.assign([self._position()])

    def seek(self, position: int, epoch: int | None) -> None:
        """Read from ``position`` (``start <= position <= end``; ``epoch`` is the leader epoch of the record
        before it, when known) instead of ``start``."""
        if not self.start <= position <= self.end:
            raise ValueError(f"{self.topic}-{self.partition}: {position} is outside [{self.start}, {self.end})")
        self.start = self.reached = position
        self.reached_epoch = epoch
        if self._consumer is not None:
            self._consumer.assign([self._position()])

    def _position(self) -> TopicPartition:
        """Where the read stands, with the epoch to validate it against when known."""
        return epoch_position(self.topic, self.partition, self.reached, self.reached_epoch)

    def record_batches(self) -> Iterator[pa.RecordBatch]:
        """The committed records with ``start <= offset < end``, in offset order, as Arrow batches (empty
        ones while the read waits)."""
        for messages in self.messages():
            yield to_record_batch(messages, self.topic, self.partition) if messages else EMPTY_BATCH

    def messages(self) -> Iterator[list[Message]]:
        """The same records as :meth:`record_batches`, as lists of consumed messages (empty ones while the read
        waits), for readers that want each record as Python values rather than Arrow columns."""
        consumer = self._consumer
        if consumer is None or self.start >= self.end:
            self.reached = self.end
            return
        early_end_since: float | None = None
        while self.reached < self.end:
            last = self.end - 1
            count = self._buffer.batch_records(self._largest_value)
            messages = [m for m in consumer.consume(count, POLL_TIMEOUT_S) if not refuses_unused_group(m.error())]
            records = messages
            truncation: KafkaError | None = None
            for index, message in enumerate(messages):
                error = message.error()
                if error is not None:
                    if reports_truncation(error):
                        truncation, records = error, messages[:index]
                        break
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise named(self.access, KafkaException(error), topic=self.topic)
                    records = messages[:index]
                    if message.offset() >= self.end:
                        self.reached = self.end
                    elif early_end_since is None:
                        early_end_since = time.monotonic()
                    break
                offset = message.offset()
                if offset >= last:
                    records = messages[: index + (offset == last)]
                    self.reached = self.end
                    break
            if records:
                self._largest_value = max(self._largest_value, max(map(len, records)))
                early_end_since = None
                if self.reached < self.end:
                    self.reached = records[-1].offset() + 1
                self.reached_epoch = records[-1].leader_epoch()
            yield records
            if truncation is not None:
                self._check_truncation(consumer, truncation)
            if early_end_since is not None and time.monotonic() - early_end_since > EARLY_END_WAIT_S:
                self._lower_end_if_truncated(consumer)
                early_end_since = None

    def _check_truncation(self, consumer: Consumer, error: KafkaError) -> None:
        """librdkafka reported a truncation at the read position: fail if the logs really diverged below it,
        else read on from the same position without epoch validation (see the module docstring)."""
        key = PartitionKey(self.topic, self.partition)
        diverged = divergence_points(self._consumer_config, {key: (self.reached, self.reached_epoch)})
        if key in diverged:
            raise ReplicationFailure(
                f"{self.topic}-{self.partition}: the source log diverged at offset {diverged[key]}, below offset "
                f"{self.reached} (leader epoch {self.reached_epoch}) where this read stands: an unclean leader "
                f"election truncated it ({error.str()}); the next run ends this range at {self.reached} and then "
                f"copies the partition again from offset {diverged[key]}"
            )
        log.info(
            "%s-%d: librdkafka reported a truncation below %d (leader epoch %s), but the leader's log has not diverged "
            "there; reading on", self.topic, self.partition, self.reached, self.reached_epoch,
        )
        self.reached_epoch = None
        consumer.assign([self._position()])

    def _lower_end_if_truncated(self, consumer: Consumer) -> None:
        """The read waited at an end of partition below ``end``: lower ``end`` to the log end if the log
        was truncated below it, else fail (see the module docstring)."""
        _, high = consumer.get_watermark_offsets(TopicPartition(self.topic, self.partition), timeout=REQUEST_TIMEOUT_S, cached=False)
        if high >= self.end:
            raise ReplicationFailure(
                f"{self.topic}-{self.partition}: the read stopped at offset {self.reached}, below the planned end "
                f"{self.end}, for {EARLY_END_WAIT_S:.0f}s although the leader reports the log end at {high}; "
                "the leader's high watermark is not advancing (check the partition's in-sync replicas)"
            )
        log.warning(
            "%s-%d: the log now ends at %d, below the planned end %d (truncated by an unclean leader election?); "
            "the range ends there and the next batch copies what the leader writes from that offset on",
            self.topic, self.partition, high, self.end,
        )
        self.end = max(self.reached, high)

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def __enter__(self) -> RangeReader:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def reports_truncation(error: KafkaError) -> bool:
    """Whether a consumer error is librdkafka's failed leader-epoch validation.  Under
    ``auto.offset.reset=error`` it comes as ``_AUTO_OFFSET_RESET``, like an offset out of range, and only its
    text tells the two apart; an error not recognised this way still fails the read."""
    return error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError._LOG_TRUNCATION) and "log truncation" in error.str().lower()


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
