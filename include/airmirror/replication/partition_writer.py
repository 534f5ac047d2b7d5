"""Exactly-once copy of one planned range into the remote topic: the transactional write protocol.

Recovery protocol (one planned range = source ``topic``/``partition`` offsets ``[start, end)`` of batch N):

1. The producer's ``transactional.id`` is ``airmirror-{source}-{target}-{topic}-{partition}``: the same for
   every attempt at that partition, whichever process, Spark task or Airflow retry runs it.
   ``init_transactions()`` therefore fences every older attempt (a zombie task can no longer commit) and
   aborts its open transaction, so none of its records ever becomes visible to read_committed consumers.
2. After fencing, the partition's anchor (see :mod:`airmirror.replication.batch_log`) is read:
   - anchor batch == N: this range was already committed by an earlier attempt (the task or the job died
     after the Kafka commit).  Nothing is written; the logged result is returned.
   - anchor missing, or its upstream end <= ``start``: the range has not been copied; copy it.
   - anchor from another batch with upstream end > ``start``: the target is ahead of the metadata DB (for
     example a DB restored from an old backup).  Writing would duplicate records, so the task fails with
     :class:`~airmirror.errors.ReplicationFailure` and writes nothing.
3. The copy is one transaction: the records in source order (same partition, key, value, headers and
   timestamp as the source), then the batch-log record with the offset-sync runs built from the delivery
   reports, then the anchor offset commit, then ``commit_transaction()``.  Any failure before the commit
   aborts the transaction (explicitly, or implicitly at the next attempt's ``init_transactions()``).
4. The driver commits the metadata DB (cursor = ``end``, offset-syncs, batch state) in one DB transaction
   only after every range of the batch has an anchor for batch N.  If the driver dies first, the next run
   resumes batch N: step 2 returns the logged results for committed ranges and copies the rest.

Hence every source record of a committed range lands in the target exactly once, in order, whatever fails
(a Spark task killed mid-write, the job killed between Kafka commit and DB commit, a broker restart).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from airmirror.errors import ReplicationFailure
from airmirror.model import RangeResult
from airmirror.offset_runs import build_runs
from airmirror.replication.batch_log import (
    Anchor,
    encode_result,
    log_key,
    read_anchors,
    read_logged_result,
)
from airmirror.replication.range_reader import RangeReader

TRANSACTION_TIMEOUT_MS = 900_000
FLUSH_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class PartitionTask:
    """Everything a Spark task needs to copy one range; plain data, so it pickles to executors."""

    flow: str
    batch_id: int
    topic: str
    partition: int
    start: int
    end: int
    remote_topic: str
    transactional_id: str
    anchor_group: str
    log_topic: str
    producer_config: dict[str, Any]
    target_consumer_config: dict[str, Any]


class DeliveryLog:
    """Collects delivery reports: downstream offsets of copied records, the batch-log offset, errors."""

    def __init__(self, log_topic: str) -> None:
        self.log_topic = log_topic
        self.record_offsets: list[int] = []
        self.log_offset: int | None = None
        self.errors: list[KafkaError] = []

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.errors.append(error)
        elif message.topic() == self.log_topic:
            self.log_offset = message.offset()
        else:
            self.record_offsets.append(message.offset())

    def raise_errors(self) -> None:
        if self.errors:
            raise KafkaException(self.errors[0])


def producer_settings(task: PartitionTask, deliveries: DeliveryLog) -> dict[str, Any]:
    """Transactional producer settings: the flow's target producer settings plus the EOS invariants."""
    settings: dict[str, Any] = {
        "enable.sparse.connections": False,  # connect to every broker at once: see await_broker_connections
        "linger.ms": 20,
        "batch.size": 1024 * 1024,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1024 * 1024,
        "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
        "message.max.bytes": 20 * 1024 * 1024,
        **task.producer_config,
    }
    settings.update(
        {
            "transactional.id": task.transactional_id,
            "enable.idempotence": True,
            "acks": "all",
            "on_delivery": deliveries,
        }
    )
    return settings


def copy_partition(task: PartitionTask, batches: Iterable[pa.RecordBatch]) -> RangeResult:
    """Run the protocol of the module docstring for one range; returns the committed result."""
    deliveries = DeliveryLog(task.log_topic)
    producer = Producer(producer_settings(task, deliveries))
    await_broker_connections(producer, task.remote_topic)
    producer.init_transactions(60)
    anchor = read_anchors(task.target_consumer_config, task.anchor_group, [(task.remote_topic, task.partition)])[
        (task.remote_topic, task.partition)
    ]
    if anchor is not None and anchor.batch_id == task.batch_id:
        return read_logged_result(task.target_consumer_config, task.log_topic, anchor.log_offset)[2]
    if anchor is not None and anchor.upstream_end > task.start:
        raise ReplicationFailure(
            f"{task.remote_topic}-{task.partition} on the target already holds source offsets up to "
            f"{anchor.upstream_end} (batch {anchor.batch_id}), beyond the metadata DB cursor {task.start}; "
            "refusing to write duplicates"
        )
    producer.begin_transaction()
    try:
        upstream, copied_bytes = produce_records(producer, task, batches)
        flush_all(producer)
        deliveries.raise_errors()
        result = range_result(task, upstream, deliveries.record_offsets, copied_bytes)
        producer.produce(
            task.log_topic, encode_result(task.flow, task.batch_id, result), log_key(task.flow, task.topic, task.partition), partition=0
        )
        flush_all(producer)
        deliveries.raise_errors()
        assert deliveries.log_offset is not None
        position = result.downstream_end if result.downstream_end is not None else anchor_position(anchor)
        new_anchor = Anchor(task.batch_id, task.end, position, deliveries.log_offset)
        producer.send_offsets_to_transaction(
            [TopicPartition(task.remote_topic, task.partition, position, metadata=new_anchor.metadata())],
            anchor_group_metadata(task),
            60,
        )
        producer.commit_transaction(120)
        return result
    except BaseException:
        abort_quietly(producer)
        raise


def await_broker_connections(producer: Producer, topic: str) -> None:
    """Return once the producer is connected to the brokers by node id, not only by the bootstrap address.

    librdkafka drops its bootstrap connections after the first metadata response.  ``init_transactions()``
    called before a node connection is up finds no broker to ask for the transaction coordinator and
    retries 500 ms later.  A second metadata request can only be answered over a node connection, so
    after it the coordinator lookup goes out at once.
    """
    for _ in range(2):
        producer.list_topics(topic, 30)


def produce_records(producer: Producer, task: PartitionTask, batches: Iterable[pa.RecordBatch]) -> tuple[list[int], int]:
    """Produce every record, in order, to the remote partition; returns source offsets and payload bytes.

    Key, value and headers go out as they came in; the source timestamp is kept, except that a record
    without one (-1) gets the produce time (librdkafka's timestamp 0).
    """
    upstream: list[int] = []
    copied_bytes = 0
    produce, poll = producer.produce, producer.poll
    topic, partition = task.remote_topic, task.partition
    for batch in batches:
        if batch.num_rows == 0:
            continue
        upstream.extend(batch.column("offset").to_pylist())
        copied_bytes += payload_bytes(batch)
        for key, value, timestamp, headers in zip(
            batch.column("key").to_pylist(),
            batch.column("value").to_pylist(),
            batch.column("timestamp").to_pylist(),
            header_lists(batch.column("headers")),
        ):
            while True:
                try:
                    produce(topic, value, key, partition=partition, timestamp=max(timestamp, 0), headers=headers)
                    break
                except BufferError:
                    poll(0.05)
        poll(0)
    return upstream, copied_bytes


def header_lists(column: pa.ListArray) -> list[list[tuple[str, bytes | None]] | None]:
    """The headers column as the producer takes it: per record a list of (name, value) pairs, or None."""
    if column.null_count == len(column):
        return [None] * len(column)
    offsets = column.offsets.to_pylist()
    entries = column.values
    pairs = list(zip(entries.field("key").to_pylist(), entries.field("value").to_pylist()))
    return [
        pairs[offsets[i] : offsets[i + 1]] if valid else None
        for i, valid in enumerate(column.is_valid().to_pylist())
    ]


def payload_bytes(batch: pa.RecordBatch) -> int:
    """Bytes of keys and values in a batch (the payload figure shown in status and benchmarks)."""
    total = 0
    for name in ("key", "value"):
        lengths = pc.sum(pc.binary_length(batch.column(name))).as_py()
        total += lengths or 0
    return total


def flush_all(producer: Producer) -> None:
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    if remaining:
        raise ReplicationFailure(f"{remaining} records still undelivered after {FLUSH_TIMEOUT_S:.0f}s")


def range_result(task: PartitionTask, upstream: list[int], downstream: list[int], copied_bytes: int) -> RangeResult:
    if len(upstream) != len(downstream):
        raise ReplicationFailure(f"{len(upstream)} records produced but {len(downstream)} delivered")
    runs = tuple(build_runs(upstream, downstream))
    return RangeResult(
        topic=task.topic,
        partition=task.partition,
        start=task.start,
        end=task.end,
        records=len(upstream),
        bytes=copied_bytes,
        runs=runs,
        downstream_start=downstream[0] if downstream else None,
        downstream_end=downstream[-1] + 1 if downstream else None,
    )


def anchor_position(anchor: Anchor | None) -> int:
    """Anchor offset to commit when a range copied no records: keep the previous position."""
    return anchor.downstream_position if anchor is not None else 0


def anchor_group_metadata(task: PartitionTask) -> Any:
    consumer = Consumer({**task.target_consumer_config, "group.id": task.anchor_group, "enable.auto.commit": False})
    try:
        return consumer.consumer_group_metadata()
    finally:
        consumer.close()


def abort_quietly(producer: Producer) -> None:
    """Abort the open transaction if the producer still can; a fenced or dead producer needs no abort."""
    try:
        producer.abort_transaction(30)
    except KafkaException:
        pass


def copy_range(task: PartitionTask, source_consumer: Mapping[str, Any]) -> dict[str, Any]:
    """One Spark task of the copy job: read the task's range from the source and copy it; returns a summary.

    The read is opened first, so source records are already being fetched while the transaction is set up.
    """
    with RangeReader(source_consumer, task.topic, task.partition, task.start, task.end) as reader:
        result = copy_partition(task, reader.record_batches())
    return {"topic": result.topic, "partition": result.partition, "records": result.records, "bytes": result.bytes}
