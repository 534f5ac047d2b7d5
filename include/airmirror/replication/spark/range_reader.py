"""Read exact source offset ranges ``[start, end)``, any number of partitions (one range each) with one consumer.

Contract, per range:
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
  then re-plans the partition from the divergence point (see :mod:`airmirror.replication.plan_arithmetic`);
  otherwise the read goes on from the same position.  An open range (below) does not fail the read: it ends
  where the read got to (:attr:`ReadState.ENDED_EARLY`, so it is ``done``) and the
  other ranges read on.
  :attr:`RangeReader.reached_epoch` is the epoch of the last record read.
- **Retention overtakes the read.**  The consumer's ``auto.offset.reset`` is forced to ``error``, so a read
  whose next offset retention (or ``DeleteRecords``) deleted after the range was planned is told so and never
  skips silently.  If the partition's log start is then above the read's position, the range ends where the read
  got to (:attr:`ReadState.ENDED_EARLY`, so it is ``done``, and it is in
  :attr:`RangesReader.ended`) and the other ranges read on: the batch commits the partition's cursor there, and the
  next plan records the deleted offsets as a gap and copies on from the log start (see
  :mod:`airmirror.replication.plan_arithmetic`), whether the range was untouched, half-copied or open.  An offset
  out of range with the log start at or below the position fails the read.
- **A deleted source topic.**  librdkafka reports nothing to a consumer whose assigned topic was deleted: its
  reads just stop.  So a read still short of its end (bounded) or of the end of its partition (open) that has heard
  nothing, no record and no end of partition, for :data:`STALL_CHECK_S` is checked: one metadata request of the
  cluster's topics for all such reads, at most every :data:`STALL_CHECK_S`.  A read whose topic is gone ends where
  it got to (:attr:`ReadState.ENDED_EARLY`; in :attr:`RangesReader.ended`) and the other
  ranges read on; the batch commits the partition's cursor there and the next plan treats the topic as any deleted
  one (see :mod:`airmirror.replication.incarnations`).
- **A partition without a leader** (its only replica's broker down, or frozen until the controller fences it): a
  bounded read that heard nothing for :data:`STALL_CHECK_S` and whose partition the same metadata request shows
  without a leader ends where it got to, as above, and the other ranges read on; the next plan leaves the partition
  where it stands until its leader is back (:mod:`airmirror.replication.plan_inputs`).  An open read waits on: its
  stream ends it by its own rules.
- **Open ranges.**  A range whose ``end`` is :data:`OPEN_END` (a streaming copy task's) is never read to its
  end: an end of partition is where the read caught up, not an early end, and :attr:`PartitionRead.reached`
  moves to it (past aborted records and transaction markers, as a bounded range's end does).  The caller
  decides when such a read stops.
- While no record arrives, the read yields empty rounds every :data:`POLL_TIMEOUT_S`, so the caller can
  keep its own time bounds.  Right after a round with records, the next round takes only what librdkafka has
  already fetched, without waiting: an empty round then says the read has caught up with what the brokers sent so
  far (a live stream commits then: group commit, rule 15 of :mod:`~airmirror.replication.spark.task_writer`).  A
  range that is read (or dropped) costs nothing more: its partition is unassigned.
- **Memory.**  What the read buffers is its share of a :class:`~airmirror.replication.spark.task_buffer.TaskBuffer`:
  librdkafka's prefetch is bounded by the buffer's consumer limits, and one handed-over batch holds at most
  :meth:`~airmirror.replication.spark.task_buffer.TaskBuffer.batch_records` records for the largest value read
  so far.  Nothing the read keeps grows with the range.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from airmirror import names
from airmirror.errors import ReplicationFailure
from airmirror.kafka.authorization import AccessScope, named, refuses_unused_group
from airmirror.kafka.client_log import logged
from airmirror.kafka.clients import REQUEST_TIMEOUT_S, ClientConfig
from airmirror.kafka.offsets import divergence_points, epoch_position, has_no_leader
from airmirror.model import PartitionKey
from airmirror.replication.spark.task_buffer import TaskBuffer, bounded

log = logging.getLogger(__name__)
POLL_TIMEOUT_S = 0.05  # how long a round waits for a first record before it yields empty (see consume)
EARLY_END_WAIT_S = 30.0
STALL_CHECK_S = 10.0
"""How long a read short of its end may hear nothing before the reader checks that its topic still exists (see the
module docstring), and how often it checks again."""
FETCH_QUEUE_BACKOFF_MS = 10
OPEN_END = 2**63 - 1
"""The ``end`` of an open range: read until the caller stops (the largest offset Kafka can hold)."""
DEFAULT_BUFFER = TaskBuffer()
"""A read's buffer unless the caller gives one: the default ``airmirror.task.max.buffer.bytes``."""


def partition_runs(messages: list[Message]) -> Iterator[tuple[tuple[str, int] | None, list[Message]]]:
    """The messages a consumer returned, in order, as runs of consecutive messages of one partition, each with
    its topic-partition (``None`` for an event of no partition)."""
    start = 0
    key: tuple[str, int] | None = None
    for index, message in enumerate(messages):
        topic, partition = message.topic(), message.partition()
        here = None if topic is None or partition is None else (topic, partition)
        if here != key or here is None:
            if index > start:
                yield key, messages[start:index]
            start, key = index, here
    if len(messages) > start:
        yield key, messages[start:]


def offset_of(message: Message) -> int:
    """The offset of a record, or of a partition-end event, that a consumer returned: librdkafka sets it on
    both (only an event of no partition has none, and callers ask only records and partition ends)."""
    offset = message.offset()
    if offset is None:
        raise ValueError(f"a message of {message.topic()}-{message.partition()} without an offset")
    return offset


def headers_of(message: Message) -> tuple[tuple[str, bytes | None], ...]:
    """A consumed record's headers: librdkafka gives a list of ``(name, value bytes or None)`` (the annotation
    also allows the forms ``produce()`` accepts, which a consumer never returns)."""
    headers = cast("list[tuple[str, bytes | None]] | None", message.headers())
    return tuple(headers) if headers else ()


def reader_config(consumer_config: ClientConfig, buffer: TaskBuffer, partitions: int = 1) -> dict[str, Any]:
    """The source consumer settings for range reads of ``partitions`` partitions: the flow's client settings
    within ``buffer``'s consumer limits (:func:`~airmirror.replication.spark.task_buffer.bounded`), plus fixed
    safety rules.  librdkafka keeps up to ``queued.min.messages`` records per partition, so the buffer's record
    count is shared among the partitions (its byte limit already holds for the consumer's one queue).

    A partition whose queue reached those limits is fetched again :data:`FETCH_QUEUE_BACKOFF_MS` later, not after
    librdkafka's default second: a copy that drains its queue in a few milliseconds would otherwise wait most
    of each second for its next fetch (measured: one task's loop copied 30 MB/s with the default, 85-115 MB/s
    with 1-10 ms).  A flow's own ``fetch.queue.backoff.ms`` wins."""
    config: dict[str, Any] = {
        "enable.sparse.connections": False,  # connect to the leader at once, so fetching starts sooner
        "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
        **bounded(consumer_config, buffer.consumer_limits(), "consumer"),
    }
    config["queued.min.messages"] = max(1, int(config["queued.min.messages"]) // max(1, partitions))
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


@dataclass(frozen=True)
class ReadRange:
    """One range to read: source ``topic``/``partition`` offsets ``[start, end)``; ``start_epoch`` is the leader
    epoch of the record before ``start`` when known."""

    topic: str
    partition: int
    start: int
    end: int
    start_epoch: int | None = None


class ReadState(Enum):
    """Where the read of one range stands; the module docstring's rules say when it moves."""

    READING = "reading"
    """Records are due: the read is short of its end, or an open read has not caught up."""
    CAUGHT_UP = "caught up"
    """An open read stands at its partition's end: nothing is due until a record comes."""
    SHORT_END = "short end"
    """A bounded read got an end of partition below its end: it waits, then asks the leader for the log's end."""
    READ = "read"
    """The read got to its end: as planned, lowered to a truncated log's end, or where it ended early before a
    rewind read it again."""
    ENDED_EARLY = "ended early"
    """The source log moved from under the read: the range ends where the read got to."""


class PartitionRead:
    """Where the read of one range stands (:attr:`state`, entered at :attr:`since`): :attr:`reached` is the next
    source offset to read and :attr:`reached_epoch` the leader epoch of the record before it; :attr:`heard_at` is
    when the partition last gave a record or an end."""

    def __init__(self, read_range: ReadRange) -> None:
        self.topic, self.partition = read_range.topic, read_range.partition
        self.start, self.end = read_range.start, read_range.end
        self.reached = min(read_range.start, read_range.end)  # an empty range is read at once
        self.reached_epoch = read_range.start_epoch
        self.heard_at = self.since = time.monotonic()
        self.state = ReadState.READ if self.reached >= self.end else ReadState.READING

    @property
    def done(self) -> bool:
        return self.state in (ReadState.READ, ReadState.ENDED_EARLY)

    @property
    def open(self) -> bool:
        """Whether the range has no end of its own (:data:`OPEN_END`)."""
        return self.end == OPEN_END

    def _enter(self, state: ReadState) -> None:
        if state is not self.state:
            self.state, self.since = state, time.monotonic()

    def stalled(self, now: float) -> bool:
        """Whether the read is short of its end and has heard nothing for :data:`STALL_CHECK_S`."""
        return self.state in (ReadState.READING, ReadState.SHORT_END) and now - self.heard_at >= STALL_CHECK_S

    def silent_for(self, seconds: float) -> bool:
        """Whether the read has heard nothing of its partition, no record and no end of partition, for ``seconds``."""
        return time.monotonic() - self.heard_at >= seconds

    def waited_short(self, seconds: float) -> bool:
        """Whether the read has stood at an end of partition below its end for more than ``seconds``."""
        return self.state is ReadState.SHORT_END and time.monotonic() - self.since > seconds

    def restart_at(self, position: int, epoch: int | None) -> None:
        """Read from ``position`` (the leader epoch of the record before it: ``epoch``) instead of the start."""
        self.start = self.reached = position
        self.reached_epoch = epoch
        self._enter(ReadState.READ if position >= self.end else ReadState.READING)

    def stands_at(self, reached: int, last: Message | None) -> None:
        """The read now stands at ``reached``, having taken records up to ``last`` (``None``: it took none)."""
        self.reached = reached
        if last is not None:
            self.heard_at, self.reached_epoch = time.monotonic(), last.leader_epoch()
        if reached >= self.end:
            self._enter(ReadState.READ)
        elif last is not None:
            self._enter(ReadState.READING)

    def end_of_partition(self, offset: int) -> None:
        """The consumer arrived at the partition's end, ``offset`` (see the module docstring's rules on where a read
        ends): an open read has caught up there; a bounded one is read, or waits for the rest of its range."""
        self.heard_at = time.monotonic()
        if self.open:
            self.reached = max(self.reached, offset)
            self._enter(ReadState.CAUGHT_UP)
        elif offset >= self.end:
            self.reached = self.end
            self._enter(ReadState.READ)
        else:
            self._enter(ReadState.SHORT_END)

    def lower_end(self, log_end: int) -> None:
        """The log now ends at ``log_end``, below the range's end (a truncation): the range ends there, or where the
        read got to; a read still short of it reads on."""
        self.end = max(self.reached, log_end)
        self._enter(ReadState.READ if self.reached >= self.end else ReadState.READING)

    def end_early(self) -> None:
        """The source log moved from under the read: the range ends where the read got to (its ``end``, so a rewind
        reads it again up to there only)."""
        self.end = self.reached
        self._enter(ReadState.ENDED_EARLY)

    def position(self) -> TopicPartition:
        """Where the read stands, with the epoch to validate it against when known."""
        return epoch_position(self.topic, self.partition, self.reached, self.reached_epoch)


ReadError = tuple[PartitionRead, KafkaError]
"""A read and the error librdkafka reported for its partition."""


class RangesReader:
    """An open read of several ranges (one per partition) with one consumer; use it as a context manager.

    The consumer is created and assigned at construction, so librdkafka fetches in the background while the
    caller gets ready (a writer fences its producer meanwhile).  :meth:`seek` moves a range's start (a resumed
    range), :meth:`drop` gives a range up (already copied), and :meth:`rounds` then yields the records.  A
    range's partition is unassigned as soon as it is read, so the consumer fetches only what is still wanted.
    ``buffer`` bounds what the read holds, whatever the number of ranges (the default setting's split unless
    given).
    """

    def __init__(
        self,
        consumer_config: ClientConfig,
        ranges: Sequence[ReadRange],
        *,
        access: AccessScope | None = None,
        buffer: TaskBuffer = DEFAULT_BUFFER,
    ) -> None:
        self.access = access
        self.reads = {(r.topic, r.partition): PartitionRead(r) for r in ranges}
        self._ended: set[tuple[str, int]] = set()  # kept, not scanned for: a stream asks every poll round
        if len(self.reads) != len(ranges):
            raise ValueError("a read holds at most one range per partition")
        self._consumer_config = consumer_config
        self._buffer = buffer
        self._largest_value = 0
        self._checked_at = float("-inf")
        self._consumer: Consumer | None = None
        pending = [read.position() for read in self.reads.values() if not read.done]
        if pending:
            self._consumer = Consumer(logged(reader_config(consumer_config, buffer, len(pending))))
            self._consumer.incremental_assign(pending)

    @property
    def ended(self) -> set[tuple[str, int]]:
        """The ranges that ended short of their planned end because the source log moved from under the read:
        retention deleted what it had yet to read, its topic or leader is gone, or (an open range) the log diverged
        below it (see the module docstring).  A range stays in it after a rewind (:meth:`seek`)."""
        return self._ended

    def seek(self, topic: str, partition: int, position: int, epoch: int | None) -> None:
        """Read ``topic``/``partition`` from ``position`` (``start <= position <= end``; ``epoch`` is the leader
        epoch of the record before it, when known) instead of its start."""
        read = self.reads[(topic, partition)]
        if not read.start <= position <= read.end:
            raise ValueError(f"{topic}-{partition}: {position} is outside [{read.start}, {read.end})")
        self._unassign(read)
        read.restart_at(position, epoch)
        self._assign(read)

    def drop(self, topic: str, partition: int) -> None:
        """Stop reading ``topic``/``partition``: its range needs nothing more (it was copied before)."""
        read = self.reads.pop((topic, partition))
        self._unassign(read)

    def _assign(self, read: PartitionRead) -> None:
        if self._consumer is not None and not read.done:
            self._consumer.incremental_assign([read.position()])

    def _unassign(self, read: PartitionRead) -> None:
        if self._consumer is not None and not read.done:
            self._consumer.incremental_unassign([TopicPartition(read.topic, read.partition)])

    def rounds(self) -> Iterator[dict[tuple[str, int], list[Message]]]:
        """The committed records of every range, in offset order per partition: one ``{(topic, partition):
        records}`` per poll of the consumer (empty while the read waits), until every range is read."""
        consumer = self._consumer
        wait_s = POLL_TIMEOUT_S
        while consumer is not None and (pending := [read for read in self.reads.values() if not read.done]):
            count = self._buffer.batch_records(self._largest_value)
            messages = consume(consumer, count, wait_s)
            wait_s = 0.0 if messages else POLL_TIMEOUT_S
            got, truncations, out_of_range = self._take(messages)
            if got:
                self._largest_value = max(self._largest_value, max(len(m) for records in got.values() for m in records))
            finished = [read for read in pending if read.done]
            if finished:
                consumer.incremental_unassign([TopicPartition(read.topic, read.partition) for read in finished])
            yield got
            for read, error in truncations:
                self._check_truncation(consumer, read, error)
            for read, error in out_of_range:
                self._end_if_overtaken(consumer, read, error)
            now = time.monotonic()
            if now - self._checked_at >= STALL_CHECK_S and (stalled := [r for r in pending if r.stalled(now)]):
                self._checked_at = now
                self._end_if_deleted(consumer, stalled)
            for read in pending:
                if read.waited_short(EARLY_END_WAIT_S):
                    self._lower_end_if_truncated(consumer, read)

    def _take(
        self, messages: list[Message]
    ) -> tuple[dict[tuple[str, int], list[Message]], list[ReadError], list[ReadError]]:
        """Sort one poll's messages into each range's records (see the module docstring's rules on where a read
        ends); returns them, the truncations and the offsets out of range librdkafka reported.  A poll returns a
        partition's messages in runs (:func:`partition_runs`); each run is taken at once (:meth:`_take_run`)."""
        got: dict[tuple[str, int], list[Message]] = {}
        truncated: dict[tuple[str, int], ReadError] = {}
        out_of_range: dict[tuple[str, int], ReadError] = {}
        for key, run in partition_runs(messages):
            read = None if key is None else self.reads.get(key)
            if key is None or read is None or read.done or key in truncated or key in out_of_range:
                continue
            taken = self._take_run(read, run, truncated, out_of_range)
            if taken:
                got.setdefault(key, []).extend(taken)
        return got, list(truncated.values()), list(out_of_range.values())

    def _take_run(
        self,
        read: PartitionRead,
        run: list[Message],
        truncated: dict[tuple[str, int], ReadError],
        out_of_range: dict[tuple[str, int], ReadError],
    ) -> list[Message]:
        """The records of one run of a partition's messages that its read wants, in order; the read then stands
        after the last of them, and the run's events (an end of partition, a truncation, an offset out of range) are
        handled in their place.  Once the read is done, the rest of the run is left."""
        taken: list[Message] = []
        reached, end = read.reached, read.end
        last: Message | None = None
        for message in run:
            if reached >= end:
                break
            error = message.error()
            if error is None:
                offset = message.offset()
                assert offset is not None  # a record has one
                if offset < reached:
                    continue  # fetched before a seek or a re-assignment
                if offset >= end:
                    reached = end
                    continue
                taken.append(message)
                reached, last = (end if offset == end - 1 else offset + 1), message
                continue
            read.stands_at(reached, last)
            last = None
            key = (read.topic, read.partition)
            if reports_truncation(error):
                truncated[key] = (read, error)
                return taken
            if error.code() == KafkaError._AUTO_OFFSET_RESET:
                out_of_range[key] = (read, error)
                return taken
            if error.code() != KafkaError._PARTITION_EOF:
                raise named(self.access, KafkaException(error), topic=read.topic)
            read.end_of_partition(offset_of(message))
            reached, end = read.reached, read.end
        read.stands_at(reached, last)
        return taken

    def _end_if_deleted(self, consumer: Consumer, stalled: list[PartitionRead]) -> None:
        """Reads that heard nothing for a while: end those whose topic is gone, and the bounded ones whose partition
        has no leader (see the module docstring)."""
        topics = consumer.list_topics(timeout=REQUEST_TIMEOUT_S).topics
        for read in stalled:
            metadata = topics.get(read.topic)
            if metadata is None or (
                metadata.error is not None and metadata.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
            ):
                log.warning(
                    "%s-%d: the topic is gone from the source cluster (deleted while this read stood at offset %d); "
                    "the range ends there and the next plan treats the topic as deleted",
                    read.topic,
                    read.partition,
                    read.reached,
                )
                self._end_early(read)
            elif not read.open and has_no_leader(metadata, read.partition):
                log.warning(
                    "%s-%d has no leader: the range ends where the read got to (offset %d) and the next plan takes "
                    "the partition up again once its leader is back; the other ranges read on",
                    read.topic,
                    read.partition,
                    read.reached,
                )
                self._end_early(read)

    def _end_early(self, read: PartitionRead) -> None:
        """End the range where the read got to: the source log moved from under it (see the module docstring)."""
        self._unassign(read)
        read.end_early()
        self._ended.add((read.topic, read.partition))

    def _end_if_overtaken(self, consumer: Consumer, read: PartitionRead, error: KafkaError) -> None:
        """librdkafka reported the read's position out of range: end the range there if retention deleted it (the
        log now starts above it), else fail the read (see the module docstring)."""
        log_start, _ = consumer.get_watermark_offsets(
            TopicPartition(read.topic, read.partition), timeout=REQUEST_TIMEOUT_S, cached=False
        )
        if log_start <= read.reached:
            raise named(self.access, KafkaException(error), topic=read.topic)
        log.warning(
            "%s-%d: retention deleted offsets %d to %d before this read got to them; the range ends at %d, and the "
            "next plan records the deleted offsets as a gap and copies on from offset %d",
            read.topic,
            read.partition,
            read.reached,
            log_start,
            read.reached,
            log_start,
        )
        self._end_early(read)

    def _check_truncation(self, consumer: Consumer, read: PartitionRead, error: KafkaError) -> None:
        """librdkafka reported a truncation at the read position: fail if the logs really diverged below it (an
        open range ends there instead), else read on from the same position without epoch validation (see the
        module docstring)."""
        key = PartitionKey(read.topic, read.partition)
        diverged = divergence_points(self._consumer_config, {key: (read.reached, read.reached_epoch)})
        if key in diverged and read.open:
            log.warning(
                "%s-%d: the source log diverged at offset %d, below offset %d (leader epoch %s) where this read "
                "stands: an unclean leader election truncated it (%s); the read stops there and the partition is "
                "copied again from offset %d once the stream ends",
                read.topic,
                read.partition,
                diverged[key],
                read.reached,
                read.reached_epoch,
                error.str(),
                diverged[key],
            )
            self._end_early(read)
            return
        if key in diverged:
            raise ReplicationFailure(
                f"{read.topic}-{read.partition}: the source log diverged at offset {diverged[key]}, below offset "
                f"{read.reached} (leader epoch {read.reached_epoch}) where this read stands: an unclean leader "
                f"election truncated it ({error.str()}); the next run ends this range at {read.reached} and then "
                f"copies the partition again from offset {diverged[key]}"
            )
        log.info(
            "%s-%d: librdkafka reported a truncation below %d (leader epoch %s), but the leader's log has not diverged "
            "there; reading on",
            read.topic,
            read.partition,
            read.reached,
            read.reached_epoch,
        )
        consumer.incremental_unassign([TopicPartition(read.topic, read.partition)])
        read.reached_epoch = None
        consumer.incremental_assign([read.position()])

    def _lower_end_if_truncated(self, consumer: Consumer, read: PartitionRead) -> None:
        """The read waited at an end of partition below ``end``: lower ``end`` to the log end if the log
        was truncated below it, else fail (see the module docstring)."""
        _, high = consumer.get_watermark_offsets(
            TopicPartition(read.topic, read.partition), timeout=REQUEST_TIMEOUT_S, cached=False
        )
        if high >= read.end:
            raise ReplicationFailure(
                f"{read.topic}-{read.partition}: the read stopped at offset {read.reached}, below the planned end "
                f"{read.end}, for {EARLY_END_WAIT_S:.0f}s although the leader reports the log end at {high}; "
                "the leader's high watermark is not advancing (check the partition's in-sync replicas)"
            )
        log.warning(
            "%s-%d: the log now ends at %d, below the planned end %d (truncated by an unclean leader election?); "
            "the range ends there and the next batch copies what the leader writes from that offset on",
            read.topic,
            read.partition,
            high,
            read.end,
        )
        read.lower_end(high)
        if read.done:
            consumer.incremental_unassign([TopicPartition(read.topic, read.partition)])

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def __enter__(self) -> RangesReader:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def consume(consumer: Consumer, count: int, wait_s: float = POLL_TIMEOUT_S) -> list[Message]:
    """One poll: up to ``count`` messages, returned as soon as the first is there (waiting up to ``wait_s`` for it),
    with what else is fetched already; a group refusal that only concerns the unused group id is left out.
    (``consume(count, wait_s)`` alone would wait for ``count`` messages or the whole ``wait_s``, adding up to
    ``wait_s`` to a light stream's every record.)"""
    if wait_s > 0:
        first = consumer.poll(wait_s)
        messages = [] if first is None else [first, *consumer.consume(count - 1, 0)] if count > 1 else [first]
    else:
        messages = consumer.consume(count, 0)
    return [m for m in messages if not refuses_unused_group(m.error())]


class RangeReader:
    """An open read of one range, ``topic``/``partition`` offsets ``[start, end)``: a :class:`RangesReader` of
    that range alone; use it as a context manager."""

    def __init__(
        self,
        consumer_config: ClientConfig,
        topic: str,
        partition: int,
        start: int,
        end: int,
        start_epoch: int | None = None,
        *,
        access: AccessScope | None = None,
        buffer: TaskBuffer = DEFAULT_BUFFER,
    ) -> None:
        self._reader = RangesReader(
            consumer_config, [ReadRange(topic, partition, start, end, start_epoch)], access=access, buffer=buffer
        )
        self._read = self._reader.reads[(topic, partition)]

    @property
    def reached(self) -> int:
        return self._read.reached

    @property
    def end(self) -> int:
        """The range's end: as planned, or lower once the read found the log truncated below it."""
        return self._read.end

    @property
    def reached_epoch(self) -> int | None:
        return self._read.reached_epoch

    def seek(self, position: int, epoch: int | None) -> None:
        """Read from ``position`` instead of the range's start (see :meth:`RangesReader.seek`)."""
        self._reader.seek(self._read.topic, self._read.partition, position, epoch)

    def messages(self) -> Iterator[list[Message]]:
        """The committed records with ``start <= offset < end``, in offset order, as lists of consumed messages
        (empty ones while the read waits)."""
        key = (self._read.topic, self._read.partition)
        for got in self._reader.rounds():
            yield got.get(key, [])

    def close(self) -> None:
        self._reader.close()

    def __enter__(self) -> RangeReader:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def reports_truncation(error: KafkaError) -> bool:
    """Whether a consumer error is librdkafka's failed leader-epoch validation.  Under
    ``auto.offset.reset=error`` it comes as ``_AUTO_OFFSET_RESET``, like an offset out of range, and only its
    text tells the two apart; an error not recognised this way still fails the read."""
    return (
        error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError._LOG_TRUNCATION)
        and "log truncation" in error.str().lower()
    )
