"""Ask the source cluster for the offsets the planner needs, for many partitions at once.

All queries use ``read_committed``: the end offset is the last stable offset, so a plan never reaches into
an open transaction.  ``until`` is resolved with the broker's offsets-for-times: the first offset whose
timestamp is at or after the given time, or the end when every record is older.

:func:`next_record_timestamps` reads (with one consumer, never committing) the timestamp of the next record
at given positions, for ``status``; :func:`divergence_points` validates cursors against the leader's epochs.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_INVALID,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ListOffsetsResultInfo, OffsetSpec, TopicMetadata

from airmirror import names
from airmirror.errors import ReplicationFailure
from airmirror.kafka.client_log import logged
from airmirror.kafka.clients import NEW_TOPIC_WAIT_S, REQUEST_TIMEOUT_S
from airmirror.model import PartitionKey, PartitionOffsets

NEW_TOPIC_PAUSE_S = 0.2
"""How often :func:`list_offsets_info` asks again while a partition has no known leader (a topic created a moment
ago), for up to :data:`~airmirror.kafka.clients.NEW_TOPIC_WAIT_S`."""
LEADER_WAIT_S = 5.0
"""How long a lookup on the copy path asks again for a partition without a leader before it leaves the partition out
(:func:`list_offsets_info` with ``waiting``)."""
LEADERLESS = frozenset({KafkaError._NOENT, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION})
"""The errors of a partition whose leader is not known yet (``_NOENT``: "No leaders found")."""


def list_offsets(
    admin: AdminClient,
    keys: Iterable[PartitionKey],
    spec: OffsetSpec,
    *,
    waiting: dict[PartitionKey, str] | None = None,
) -> dict[PartitionKey, int]:
    """One ListOffsets round for every partition with the same spec (``waiting``: see :func:`list_offsets_info`)."""
    return {key: info.offset for key, info in list_offsets_info(admin, keys, spec, waiting=waiting).items()}


def list_offsets_info(
    admin: AdminClient,
    keys: Iterable[PartitionKey],
    spec: OffsetSpec,
    *,
    waiting: dict[PartitionKey, str] | None = None,
) -> dict[PartitionKey, ListOffsetsResultInfo]:
    """One ListOffsets round for every partition with the same spec: offset, timestamp and leader epoch.

    A partition without a leader (:data:`LEADERLESS`, or its leader did not answer in time) is asked about again,
    alone, every :data:`NEW_TOPIC_PAUSE_S`: a topic created a moment ago gets its leaders within a second, and a
    shared admin client's metadata cache may predate it ("No leaders found": librdkafka refreshes the cache only
    every few minutes, so it is refreshed here).  Without ``waiting``, it is asked for up to
    :data:`~airmirror.kafka.clients.NEW_TOPIC_WAIT_S` and then fails the call; with ``waiting``, for up to
    :data:`LEADER_WAIT_S`, and then it is left out of the result and put in ``waiting`` with the error, so that
    one sick partition holds up no other (the copy path: a partition without a leader is left where it stands).
    Any other error, and a topic that does not exist, fail at once with a
    :class:`~airmirror.errors.ReplicationFailure` naming the partition."""
    requests = {TopicPartition(k.topic, k.partition): spec for k in keys}
    found: dict[PartitionKey, ListOffsetsResultInfo] = {}
    deadline = time.monotonic() + (NEW_TOPIC_WAIT_S if waiting is None else LEADER_WAIT_S)
    while requests:
        futures = admin.list_offsets(
            requests, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=REQUEST_TIMEOUT_S
        )
        leaderless: dict[TopicPartition, KafkaException] = {}
        listed: set[str] | None = None  # one metadata request a round, however many partitions have no leader
        for tp, future in futures.items():
            try:
                info = future.result()
                if info.offset == OFFSET_INVALID:  # what a request its leader never answered gives
                    raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "no offset: its leader did not answer"))
                found[PartitionKey(tp.topic, tp.partition)] = info
            except KafkaException as error:
                code = error.args[0].code()
                if code == KafkaError._NOENT:
                    listed = set(admin.list_topics(timeout=REQUEST_TIMEOUT_S).topics) if listed is None else listed
                    if tp.topic not in listed:
                        raise ReplicationFailure(
                            f"cannot list offsets of {tp.topic}-{tp.partition}: the topic does not exist"
                        ) from error
                if code not in LEADERLESS and code != KafkaError._TIMED_OUT:
                    raise ReplicationFailure(f"cannot list offsets of {tp.topic}-{tp.partition}: {error}") from error
                leaderless[tp] = error
        if leaderless and time.monotonic() > deadline:
            if waiting is None:
                first, failure = next(iter(leaderless.items()))
                raise ReplicationFailure(
                    f"cannot list offsets of {first.topic}-{first.partition}: {failure}"
                ) from failure
            waiting.update((PartitionKey(tp.topic, tp.partition), e.args[0].str()) for tp, e in leaderless.items())
            return found
        requests = {tp: spec for tp in leaderless}
        if requests:
            time.sleep(NEW_TOPIC_PAUSE_S)
    return found


def has_no_leader(metadata: TopicMetadata, partition: int) -> bool:
    """Whether the cluster's metadata of a topic says ``partition`` has no leader now (-1, or an error of the
    partition); a topic whose metadata is not ready (a topic-level error) says nothing either way."""
    found = metadata.partitions.get(partition) if metadata.error is None else None
    return found is not None and (found.leader < 0 or found.error is not None)


def partition_offsets(
    admin: AdminClient,
    keys: list[PartitionKey],
    until_ms: int | None = None,
    start_ms: int | None = None,
    *,
    waiting: dict[PartitionKey, str] | None = None,
) -> dict[PartitionKey, PartitionOffsets]:
    """Log start, last stable offset, the leader's current epoch and, when asked, the offsets of ``until_ms``
    and ``start_ms``.  With ``waiting``, a partition without a leader is left out and put there
    (:func:`list_offsets_info`)."""
    starts = list_offsets(admin, keys, OffsetSpec.earliest(), waiting=waiting)
    keys = [key for key in keys if key in starts]
    latest = list_offsets_info(admin, keys, OffsetSpec.latest(), waiting=waiting)
    keys = [key for key in keys if key in latest]
    ends = {key: info.offset for key, info in latest.items()}
    untils = offsets_for_time(admin, keys, until_ms, ends, waiting=waiting)
    start_points = offsets_for_time(admin, keys, start_ms, ends, waiting=waiting)
    return {
        key: PartitionOffsets(
            starts[key], ends[key], untils.get(key), start_points.get(key), leader_epoch=latest[key].leader_epoch
        )
        for key in keys
        if (until_ms is None or key in untils) and (start_ms is None or key in start_points)
    }


def offsets_for_time(
    admin: AdminClient,
    keys: list[PartitionKey],
    timestamp_ms: int | None,
    ends: Mapping[PartitionKey, int],
    *,
    waiting: dict[PartitionKey, str] | None = None,
) -> dict[PartitionKey, int]:
    """First offset at or after ``timestamp_ms`` per partition (the end when every record is older)."""
    if timestamp_ms is None:
        return {}
    found = list_offsets(admin, keys, OffsetSpec.for_timestamp(timestamp_ms), waiting=waiting)
    return {key: offset if offset >= 0 else ends[key] for key, offset in found.items()}


NEXT_RECORD_TIMEOUT_S = 10.0


def next_record_timestamps(
    consumer_config: Mapping[str, Any], positions: Mapping[PartitionKey, int], timeout: float = NEXT_RECORD_TIMEOUT_S
) -> dict[PartitionKey, tuple[int, int]]:
    """``(offset, timestamp ms)`` of the first committed record at or after each partition's position.

    A partition with no committed record from its position to its end (or none read in time, or no
    timestamp) is left out.  Read-only: nothing is committed.
    """
    firsts = first_reads(consumer_config, {key: (offset, None) for key, offset in positions.items()}, timeout)
    return {key: (read.offset, read.timestamp_ms) for key, read in firsts.items() if read.timestamp_ms is not None}


def divergence_points(
    consumer_config: Mapping[str, Any],
    cursors: Mapping[PartitionKey, tuple[int, int | None]],
    timeout: float = NEXT_RECORD_TIMEOUT_S,
) -> dict[PartitionKey, int]:
    """Where the source log diverged below a cursor: for each ``(cursor, leader epoch of the record before
    it)``, the offset at which the current leader's log stops matching, when that is below the cursor.

    The consumer is assigned each cursor with its epoch, so librdkafka validates the position with the
    leader (KIP-320 OffsetForLeaderEpoch) before fetching.  When the leader's log ends that epoch below the
    cursor, librdkafka moves the position to that end offset (``auto.offset.reset`` is not ``error``), and the
    first record or end-of-partition it reports is there: that offset is the divergence point.  A position
    reported at or above the cursor validated.  A cursor whose epoch is unknown (``None``) is assigned without
    one, so the leader does not validate it: only a cursor past the end of the log is then reported, at the log
    start where librdkafka moves it.  A partition that reports nothing in time is left out: its range read validates
    again, and fails rather than read past a truncation.  Read-only.
    """
    firsts = first_reads(consumer_config, cursors, timeout)
    return {key: read.offset for key, read in firsts.items() if read.offset < cursors[key][0]}


def epoch_position(topic: str, partition: int, offset: int, epoch: int | None) -> TopicPartition:
    """A position to assign, carrying the leader epoch of the record before it when known, so that librdkafka
    validates it with the leader (KIP-320) before fetching."""
    if epoch is None:
        return TopicPartition(topic, partition, offset)
    return TopicPartition(topic, partition, offset, leader_epoch=epoch)


@dataclass(frozen=True)
class FirstRead:
    """What a partition reported first from a position: a committed record at ``offset`` (``timestamp_ms`` is
    its timestamp, ``None`` if it has none), or its end at ``offset`` (``timestamp_ms`` is ``None``)."""

    offset: int
    timestamp_ms: int | None


def first_reads(
    consumer_config: Mapping[str, Any], positions: Mapping[PartitionKey, tuple[int, int | None]], timeout: float
) -> dict[PartitionKey, FirstRead]:
    """The first committed record, or the end-of-partition event, at or after each ``(offset, leader epoch)``.

    One ``read_committed`` consumer is assigned every partition at its position; each partition is paused as
    soon as its first record (or its end) arrives, and the whole read stops after ``timeout`` seconds.  A
    partition that reports neither in time is left out.  Never commits.
    """
    if not positions:
        return {}
    consumer = Consumer(
        logged(
            {
                **consumer_config,
                "group.id": consumer_config.get("group.id") or names.reader_group("status"),
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                "max.partition.fetch.bytes": 65536,
                "queued.max.messages.kbytes": 1024,
            }
        )
    )
    found: dict[PartitionKey, FirstRead] = {}
    deadline = time.monotonic() + timeout
    try:
        consumer.assign(
            [epoch_position(k.topic, k.partition, offset, epoch) for k, (offset, epoch) in positions.items()]
        )
        while len(found) < len(positions) and (left := deadline - time.monotonic()) > 0:
            for message in consumer.consume(num_messages=len(positions) + 10, timeout=min(left, 1.0)):
                reported = reported_position(message)
                if reported is None or reported[0] not in positions or reported[0] in found:
                    continue
                key, offset = reported
                found[key] = FirstRead(offset, record_timestamp_ms(message))
                consumer.pause([TopicPartition(key.topic, key.partition)])
    finally:
        consumer.close()
    return found


def reported_position(message: Message) -> tuple[PartitionKey, int] | None:
    """The partition and offset of a committed record or of an end-of-partition event; ``None`` for any other
    event (an error; a client-level one names no partition)."""
    error = message.error()
    if error is not None and error.code() != KafkaError._PARTITION_EOF:
        return None
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    if topic is None or partition is None or offset is None:
        return None
    return PartitionKey(topic, partition), offset


def record_timestamp_ms(message: Message) -> int | None:
    """The timestamp of a record (``None`` if it has none, and for an event that is not a record)."""
    if message.error() is not None:
        return None
    kind, timestamp = message.timestamp()
    return None if kind == TIMESTAMP_NOT_AVAILABLE else timestamp
