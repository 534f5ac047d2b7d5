"""Exactly-once copy of one planned range into the remote topic: the transactional write protocol.

Recovery protocol (one planned range = source ``topic``/``partition`` offsets ``[start, end)`` of batch N;
the records it writes are described in :mod:`airmirror.replication.spark.batch_log`):

1. The producer's ``transactional.id`` is ``names.transactional_id(source, target, topic, partition)``: the
   same for every attempt at that partition, whichever process, Spark task or Airflow retry runs it, and
   never shared with another flow.  ``init_transactions()`` therefore fences every older attempt (a zombie
   task can no longer commit) and aborts its open transaction, so none of its records ever becomes visible
   to read_committed consumers.
2. After fencing, the partition's newest committed :class:`~airmirror.replication.spark.batch_log.Progress` is
   read: a trusted anchor; else, on a task's first attempt, what the driver found just before the job
   (:mod:`airmirror.replication.spark.progress`: it fenced every attempt first, so nothing but this task can have
   committed since); else, on a retry, a scan of the batch log.  A missing anchor never means "not copied":
   Progress recorded for other incarnations of the source or the remote topic (see
   :mod:`airmirror.replication.incarnations`) is ignored: the range starts afresh.
   - progress of batch N, done: the range was copied by an earlier attempt; nothing is written.
   - progress of batch N, not done: an earlier attempt committed part of the range; the copy continues
     at ``progress.position``, with the next chunk number, and the read validates that position against the
     progress's source leader epoch (see :mod:`airmirror.replication.spark.range_reader`).
   - progress of an earlier batch whose position is <= ``start``, or none: the range has not been copied.
   - progress of an earlier batch beyond ``start``, and the range does not reset its source cursor: the
     target is ahead of the metadata DB (for example a DB restored from an old backup).  Writing would
     duplicate records, so the task fails with :class:`~airmirror.errors.ReplicationFailure` and writes
     nothing.
3. The range is copied as a sequence of *chunk* transactions.  A chunk holds the next records in source
   order (same partition, key, value, headers and timestamp as the source) until one of the
   :class:`TransactionBounds` is reached, checked between the reader's record batches: records, payload
   bytes, or time since the chunk's first record (at most a third of the producer's
   ``transaction.timeout.ms``).  Offset-sync runs are built from the delivery reports as they arrive,
   three integers per run (:class:`~airmirror.replication.offset_runs.RunBuilder`); no per-record state is kept, so a
   task's memory does not grow with its range, and what it buffers (reader prefetch, handed-over batches, producer
   queue) stays within ``airmirror.task.max.buffer.bytes`` (:mod:`airmirror.replication.spark.task_buffer`).
   Then, in the same transaction: the chunk's runs records, the new progress record and the anchor offset
   commit; then ``commit_transaction()``.  Read_committed consumers of the target see the copy advance chunk
   by chunk.  Any failure before the commit aborts the
   chunk (explicitly, or at the next attempt's ``init_transactions()``); the committed chunks stay.
4. The last chunk is the one that reaches the range's end (or the position the read got to when the
   source log was truncated below the plan, see :mod:`airmirror.replication.spark.range_reader`): its progress
   says ``done``.  A range with no committed record left to copy still commits one chunk, with no records,
   so that it is marked done.
5. The driver commits the metadata DB (cursor = the done position, offset-syncs, batch state) in one DB
   transaction only after every range of the batch has done progress for batch N.  If the driver dies
   first, the next run resumes batch N: step 2 skips the finished ranges and continues the others.

Hence every source record of a committed range lands in the target exactly once, in order, whatever fails
(a Spark task killed mid-chunk, the job killed between Kafka commit and DB commit, a broker restart, an
expired or deleted anchor group).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from airmirror.errors import ReplicationFailure
from airmirror.kafka.authorization import AccessScope, named, naming_refusals
from airmirror.replication.offset_runs import RunBuilder
from airmirror.replication.spark.batch_log import (
    Progress,
    encode_runs,
    progress_key,
    read_anchors,
    read_progress,
    runs_key,
    runs_parts,
)
from airmirror.replication.spark.range_reader import RangeReader
from airmirror.replication.spark.task_buffer import TaskBuffer, bounded

TRANSACTION_TIMEOUT_MS = 900_000
TRANSACTION_CALL_S = 30.0
HARD_DEADLINE_GRACE_S = 10.0
FLUSH_TIMEOUT_S = 300.0
FLUSH_POLL_S = 0.5


@dataclass(frozen=True)
class TransactionBounds:
    """When a chunk transaction ends: whichever of these its records reach first (see the module docstring)."""

    max_records: int
    max_bytes: int
    max_seconds: float


@dataclass(frozen=True)
class PartitionTask:
    """Everything a Spark task needs to copy one range; plain data, so it pickles to executors.  ``buffer``
    bounds what the task holds (:mod:`airmirror.replication.spark.task_buffer`).

    The client configurations can hold credentials, so they are left out of the repr.  The access scopes name
    the ACL behind a refusal (:mod:`airmirror.kafka.authorization`).
    """

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
    bounds: TransactionBounds
    source_topic_id: str | None
    remote_topic_id: str | None
    resets: bool
    start_epoch: int | None
    known: Progress | None
    source_access: AccessScope
    target_access: AccessScope
    buffer: TaskBuffer
    producer_config: dict[str, Any] = field(repr=False)
    target_consumer_config: dict[str, Any] = field(repr=False)
    source_consumer_config: dict[str, Any] = field(repr=False)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


class DeliveryTracker:
    """Pairs delivery reports with the source offsets of the records, in produce order, into runs.

    Per partition, an idempotent producer reports deliveries in produce order, so the n-th report of the
    remote partition belongs to the n-th record produced.  Pending source offsets are kept as runs of
    consecutive offsets, never one entry per record.
    """

    def __init__(self, task: PartitionTask) -> None:
        self.task = task
        self.runs = RunBuilder()
        self.pending: deque[list[int]] = deque()
        self.first_log_offset: int | None = None  # of the batch-log records delivered since it was last reset
        self.errors: list[tuple[int, KafkaError, int]] = []

    def sent(self, source_offsets: np.ndarray) -> None:
        """Note the source offsets of the records about to be produced, in order."""
        breaks = np.flatnonzero(np.diff(source_offsets) != 1) + 1
        bounds = np.concatenate(([0], breaks, [len(source_offsets)]))
        for begin, end in zip(bounds[:-1], bounds[1:]):
            self.pending.append([int(source_offsets[begin]), int(source_offsets[end - 1]) + 1])

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if message.topic() == self.task.log_topic:
            if error is not None:
                self.errors.append((-1, error, 0))
            elif self.first_log_offset is None:
                self.first_log_offset = message.offset()
            return
        head = self.pending[0]
        upstream = head[0]
        head[0] += 1
        if head[0] == head[1]:
            self.pending.popleft()
        if error is not None:
            self.errors.append((upstream, error, len(message.key() or b"") + len(message.value() or b"")))
        else:
            self.runs.add(upstream, message.offset())

    def raise_errors(self) -> None:
        if not self.errors:
            return
        upstream, error, size = self.errors[0]
        if error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
            raise record_too_large(self.task, upstream, size)
        topic = self.task.log_topic if upstream < 0 else self.task.remote_topic
        raise named(self.task.target_access, KafkaException(error), topic=topic)


def record_too_large(task: PartitionTask, offset: int, size: int) -> ReplicationFailure:
    target = task.flow.rsplit("->", 1)[-1]
    return ReplicationFailure(
        f"record {task.topic}-{task.partition}@{offset} ({size} bytes of key and value) is larger than the "
        f"target accepts for {task.remote_topic}: raise max.message.bytes of topic {task.remote_topic} on cluster "
        f"{target} (or of the source topic, when sync.topic.configs.enabled copies it), and "
        f"`{target}.producer.max.request.size` if it is lower (it is 20 MiB unless set, and at most a quarter of "
        "`airmirror.task.max.buffer.bytes`); then run the flow again"
    )


def producer_settings(task: PartitionTask, deliveries: DeliveryTracker) -> dict[str, Any]:
    """Transactional producer settings: the flow's target producer settings within the task buffer's producer
    limits (:func:`~airmirror.replication.spark.task_buffer.bounded`), plus the EOS invariants."""
    settings: dict[str, Any] = {
        "enable.sparse.connections": False,  # connect to every broker at once: see await_broker_connections
        "linger.ms": 20,
        "batch.size": 1024 * 1024,
        "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
        **bounded(task.producer_config, task.buffer.producer_limits(), "producer"),
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


def chunk_seconds(task: PartitionTask, settings: Mapping[str, Any]) -> float:
    """The time bound of a chunk: the configured one, at most a third of the transaction timeout."""
    return min(task.bounds.max_seconds, int(settings["transaction.timeout.ms"]) / 3000)


class RangeCopy:
    """One attempt at one range: fence, find the progress, copy the rest chunk by chunk."""

    def __init__(self, task: PartitionTask) -> None:
        self.task = task
        self.deliveries = DeliveryTracker(task)
        settings = producer_settings(task, self.deliveries)
        self.max_seconds = chunk_seconds(task, settings)
        self.producer = Producer(settings)
        self.group_metadata = anchor_group_metadata(task)

    def fence(self, first_attempt: bool) -> Progress:
        """Fence older attempts and return where this range stands (rule 2 of the module docstring)."""
        task = self.task
        await_broker_connections(self.producer, task.remote_topic)
        with hard_deadline(TRANSACTION_CALL_S, f"init_transactions of {task.name}"):
            self.producer.init_transactions(TRANSACTION_CALL_S)
        remote = (task.remote_topic, task.partition)
        if first_attempt:
            anchor = read_anchors(task.target_consumer_config, task.anchor_group, [remote])[remote]
            return resume_from(task, anchor if anchor is not None else task.known)
        found = read_progress(task.target_consumer_config, task.anchor_group, task.log_topic, task.flow, {remote: (task.topic, task.partition)})
        return resume_from(task, found[remote])

    def copy(self, reader: RangeReader, progress: Progress) -> Progress:
        """Copy ``reader``'s range from ``progress`` on; returns the final (done) progress."""
        if progress.done:
            return progress
        if progress.position != reader.start:
            reader.seek(progress.position, progress.leader_epoch)
        batches = reader.record_batches()
        while not progress.done:
            progress = self.copy_chunk(batches, reader, progress)
        return progress

    def copy_chunk(self, batches: Iterator[pa.RecordBatch], reader: RangeReader, progress: Progress) -> Progress:
        """One chunk transaction (rule 3); returns the progress it committed."""
        producer, bounds = self.producer, self.task.bounds
        producer.begin_transaction()
        try:
            records = copied_bytes = 0
            first_record_at: float | None = None
            exhausted = True
            for batch in batches:
                if batch.num_rows:
                    first_record_at = first_record_at or time.monotonic()
                    copied_bytes += self.produce_batch(batch)
                    records += batch.num_rows
                if first_record_at is not None and (
                    records >= bounds.max_records
                    or copied_bytes >= bounds.max_bytes
                    or time.monotonic() - first_record_at >= self.max_seconds
                ):
                    exhausted = False
                    break
            flush_all(producer, self.deliveries)
            committed = self.commit_chunk(progress, reader.reached, reader.reached_epoch, exhausted, records, copied_bytes)
        except BaseException:
            abort_quietly(producer)
            raise
        return committed

    def produce_batch(self, batch: pa.RecordBatch) -> int:
        """Produce a batch's records, in order, to the remote partition; returns their payload bytes.

        Key, value and headers go out as they came in; the source timestamp is kept, except that a record
        without one (-1) gets the produce time (librdkafka's timestamp 0).
        """
        task, producer = self.task, self.producer
        produce, poll = producer.produce, producer.poll
        topic, partition = task.remote_topic, task.partition
        offsets = batch.column("offset").to_numpy()
        self.deliveries.sent(offsets)
        for key, value, timestamp, headers, offset in zip(
            batch.column("key").to_pylist(),
            batch.column("value").to_pylist(),
            batch.column("timestamp").to_pylist(),
            header_lists(batch.column("headers")),
            offsets.tolist(),
        ):
            while True:
                try:
                    produce(topic, value, key, partition=partition, timestamp=max(timestamp, 0), headers=headers)
                    break
                except BufferError:
                    poll(0.05)
                except KafkaException as error:
                    if error.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE:
                        raise record_too_large(task, offset, len(key or b"") + len(value or b"")) from error
                    raise
        poll(0)
        return payload_bytes(batch)

    def commit_chunk(
        self, progress: Progress, reached: int, reached_epoch: int | None, done: bool, records: int, copied_bytes: int
    ) -> Progress:
        """Write the chunk's runs, its progress and the anchor, and commit the transaction."""
        task, producer = self.task, self.producer
        chunk = progress.chunk + 1
        runs = self.deliveries.runs.take()
        if sum(run.length for run in runs) != records:
            raise ReplicationFailure(f"{task.name}: {records} records produced but {sum(r.length for r in runs)} delivered")
        first_runs_offset = progress.first_runs_offset
        for part in runs_parts(task.batch_id, chunk, runs):
            producer.produce(task.log_topic, encode_runs(part), runs_key(task.flow, task.topic, task.partition, task.batch_id, chunk, part.part), partition=0)
        if runs and first_runs_offset is None:
            self.deliveries.first_log_offset = None
            flush_all(producer, self.deliveries)
            first_runs_offset = self.deliveries.first_log_offset
        committed = Progress(
            batch_id=task.batch_id,
            chunk=chunk,
            start=progress.start,
            end=progress.end,
            position=reached,
            done=done,
            records=progress.records + records,
            bytes=progress.bytes + copied_bytes,
            downstream_start=progress.downstream_start if progress.downstream_start is not None else (runs[0].downstream_start if runs else None),
            downstream_position=runs[-1].downstream_start + runs[-1].length if runs else progress.downstream_position,
            first_runs_offset=first_runs_offset,
            source_topic_id=progress.source_topic_id,
            remote_topic_id=progress.remote_topic_id,
            leader_epoch=reached_epoch if records else progress.leader_epoch,
        )
        encoded = committed.encode()
        producer.produce(task.log_topic, encoded.encode("utf-8"), progress_key(task.flow, task.topic, task.partition), partition=0)
        with hard_deadline(TRANSACTION_CALL_S, f"sending the anchor of chunk {chunk} of {task.name}"):
            producer.send_offsets_to_transaction(
                [TopicPartition(task.remote_topic, task.partition, committed.downstream_position, metadata=encoded)],
                self.group_metadata,
                TRANSACTION_CALL_S,
            )
        with hard_deadline(TRANSACTION_CALL_S, f"commit of chunk {chunk} of {task.name}"):
            producer.commit_transaction(TRANSACTION_CALL_S)
        return committed


def resume_from(task: PartitionTask, found: Progress | None) -> Progress:
    """Where this attempt starts, from the partition's newest committed progress (rule 2)."""
    same_incarnation = (
        found is not None and found.source_topic_id == task.source_topic_id and found.remote_topic_id == task.remote_topic_id
    )
    if found is not None and same_incarnation and found.batch_id == task.batch_id:
        return found
    if found is not None and same_incarnation and not task.resets and found.position > task.start:
        raise ReplicationFailure(
            f"{task.remote_topic}-{task.partition} on the target already holds source offsets up to "
            f"{found.position} (batch {found.batch_id}), beyond the metadata DB cursor {task.start}; "
            "refusing to write duplicates"
        )
    return Progress(
        batch_id=task.batch_id,
        chunk=-1,
        start=task.start,
        end=task.end,
        position=task.start,
        done=False,
        records=0,
        bytes=0,
        downstream_start=None,
        downstream_position=found.downstream_position if found is not None and found.remote_topic_id == task.remote_topic_id else 0,
        first_runs_offset=None,
        source_topic_id=task.source_topic_id,
        remote_topic_id=task.remote_topic_id,
        leader_epoch=task.start_epoch,
    )


@contextmanager
def hard_deadline(seconds: float, what: str) -> Iterator[None]:
    """End this process if the block is still running ``HARD_DEADLINE_GRACE_S`` after ``seconds``.

    After a transaction or group coordinator restarts, librdkafka's transactional calls have been seen to block
    far past their own timeout (``send_offsets_to_transaction`` waits for a coordinator it never looks up
    again), and Spark never times a task out, so one stuck call would hold the batch forever.  A call still
    running ``HARD_DEADLINE_GRACE_S`` past its own timeout is taken as stuck.  Exiting
    the Python worker fails the Spark task; its retry's ``init_transactions()`` fences the stuck producer and
    continues after the last committed chunk (the module docstring's rules), as after any killed worker.
    Used only inside copy tasks."""

    def expire() -> None:
        print(f"airmirror: {what} is stuck after {seconds + HARD_DEADLINE_GRACE_S:.0f}s; ending the worker", file=sys.stderr, flush=True)
        os._exit(70)

    timer = threading.Timer(seconds + HARD_DEADLINE_GRACE_S, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def fence_attempts(producer_config: Mapping[str, Any], transactional_ids: Iterable[str], access: AccessScope) -> None:
    """Fence every attempt still at work under these transactional ids: its open transaction is aborted and
    it can never commit again.  Used before a resumed batch changes ranges such an attempt may be copying.
    A refusal names the ACL to grant (``access``)."""
    for transactional_id in transactional_ids:
        producer = Producer({**producer_config, "transactional.id": transactional_id, "enable.sparse.connections": False})
        with naming_refusals(access, transactional_id=transactional_id):
            await_broker_connections(producer, None)
            producer.init_transactions(60)


def await_broker_connections(producer: Producer, topic: str | None) -> None:
    """Return once the producer is connected to the brokers by node id, not only by the bootstrap address.

    librdkafka drops its bootstrap connections after the first metadata response.  ``init_transactions()``
    called before a node connection is up finds no broker to ask for the transaction coordinator and
    retries 500 ms later.  A second metadata request can only be answered over a node connection, so
    after it the coordinator lookup goes out at once.
    """
    for _ in range(2):
        producer.list_topics(topic, 30)


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


def flush_all(producer: Producer, deliveries: DeliveryTracker) -> None:
    """Wait until every produced record is delivered; stop at the first failed delivery and raise it.

    A failed delivery makes the transaction abortable, and librdkafka then keeps the records queued behind
    it until the abort: waiting for them would only time out."""
    deadline = time.monotonic() + FLUSH_TIMEOUT_S
    while remaining := producer.flush(FLUSH_POLL_S):
        deliveries.raise_errors()
        if time.monotonic() > deadline:
            raise ReplicationFailure(f"{remaining} records still undelivered after {FLUSH_TIMEOUT_S:.0f}s")
    deliveries.raise_errors()


def anchor_group_metadata(task: PartitionTask) -> Any:
    consumer = Consumer({**task.target_consumer_config, "group.id": task.anchor_group, "enable.auto.commit": False})
    try:
        return consumer.consumer_group_metadata()
    finally:
        consumer.close()


def abort_quietly(producer: Producer) -> None:
    """Abort the open transaction if the producer still can; a fenced or dead producer needs no abort."""
    try:
        producer.abort_transaction(TRANSACTION_CALL_S)
    except KafkaException:
        pass


def copy_range(task: PartitionTask, first_attempt: bool) -> dict[str, Any]:
    """One Spark task of the copy job: read the task's range from the source and copy it; returns a summary.

    The read is opened first, so source records are already being fetched while the producer fences.  A refusal
    by either cluster names the ACL to grant (:mod:`airmirror.kafka.authorization`).
    """
    reader = RangeReader(
        task.source_consumer_config, task.topic, task.partition, task.start, task.end, task.start_epoch,
        access=task.source_access, buffer=task.buffer,
    )
    target = naming_refusals(
        task.target_access, topic=task.remote_topic, group=task.anchor_group, transactional_id=task.transactional_id
    )
    with reader, target:
        attempt = RangeCopy(task)
        progress = attempt.copy(reader, attempt.fence(first_attempt))
    return {"topic": task.topic, "partition": task.partition, "records": progress.records, "bytes": progress.bytes}
