"""Benchmark data on real brokers: load a source topic, watch a target topic's end offsets, digest partitions."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol, cast

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

HEADER_EVERY = 10  # every 10th record carries headers (one of them with a null value)
NULL_KEY_EVERY = 97  # every 97th record has a null key
_INT = struct.Struct(">q")

Header = tuple[str, bytes | None]
"""A consumed record's header: librdkafka hands a consumed record's headers over as a list of these."""
ProducedHeaders = list[tuple[str, str | bytes | None]]
"""The headers a producer is given for one record."""


class Record(Protocol):
    """A consumed record as the digests and the expected copies read it: a confluent-kafka ``Message`` read by
    :func:`committed_messages`, or an :class:`Expected` record."""

    def key(self) -> bytes | None: ...

    def value(self) -> bytes | None: ...

    def headers(self) -> list[Header] | None: ...

    def timestamp(self) -> tuple[int, int]: ...


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create ``topic`` with ``partitions`` partitions (see :func:`create_topics`)."""
    create_topics(bootstrap, {topic: partitions})


def create_topics(
    bootstrap: str, topics: Mapping[str, int], config: dict[str, str] | None = None, node: int | None = None
) -> None:
    """Create ``topics`` (name -> partitions) in one request, with ``config`` (the brokers' defaults otherwise), each
    partition with one replica: on node ``node`` when given, where the cluster places it otherwise."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    settings = config or {}  # confluent-kafka refuses config=None
    new = [
        NewTopic(topic, count, 1, config=settings)
        if node is None
        else NewTopic(topic, count, replica_assignment=[[node]] * count, config=settings)
        for topic, count in topics.items()
    ]
    for future in admin.create_topics(new).values():
        future.result()


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    """Delete ``topics`` and wait for it (one that is gone already is no error)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held: futures fail once their client is destroyed
    for future in admin.delete_topics(topics, operation_timeout=60).values():
        try:
            future.result()
        except KafkaException as error:
            if error.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise


def partition_creation_s(bootstrap: str, topics: list[str], partitions: int) -> float:
    """Seconds from creating ``topics`` (``partitions`` each) until a topic created right after them accepts a
    write, then delete them all: how long the broker takes to bring up that many new partitions.

    A broker lists a new partition's leader before it has created the partition's log, and it creates the
    logs of one metadata update before it applies the next; so a copier that creates its own topic after the
    remote topics (airmirror's batch log, MM2's offset-syncs topic) waits this long for it on a first run."""
    probe = f"{topics[0]}-probe"
    started = time.monotonic()
    create_topics(bootstrap, dict.fromkeys(topics, partitions))
    create_topic(bootstrap, probe, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 300_000})
    failed: list[KafkaError] = []
    producer.produce(probe, b"probe", on_delivery=lambda error, _: failed.extend([error] if error else []))
    if producer.flush(300) or failed:
        raise RuntimeError(f"{probe}: the broker did not accept a write within 300 s: {failed}")
    seconds = time.monotonic() - started
    delete_topics(bootstrap, [*topics, probe])
    return seconds


def warm_up_cluster(bootstrap: str) -> None:
    """Create the broker's internal topics (``__consumer_offsets``, ``__transaction_state``), as on any cluster
    in service, so that no copier pays for their creation: one transaction with a record and an offset commit."""
    topic = "bench-warm-up"
    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-warm-up"})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(topic, b"warm-up")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-warm-up"})
    producer.send_offsets_to_transaction([TopicPartition(topic, 0, 1)], consumer.consumer_group_metadata(), 60)
    producer.commit_transaction(60)
    consumer.close()


def warm_up_transactions(bootstrap: str, seconds: float, partitions: int = 6) -> int:
    """Run small transactions (90 records over ``partitions`` partitions, an offset commit, a commit) back to back for
    ``seconds``, as a broker in service has run millions, so that the first live copier does not pay for the
    broker's JIT compiling its transaction paths (a fresh broker first answers a transaction's first produce in
    ~30 ms, a warm one in ~6 ms); returns the transactions committed."""
    topic = "bench-warm-up-transactions"
    create_topic(bootstrap, topic, partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic, "linger.ms": 5})
    producer.init_transactions(60)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic})
    value, committed = b"w" * 1024, 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        producer.begin_transaction()
        for index in range(90):
            producer.produce(topic, value, partition=index % partitions)
        producer.flush(60)
        offsets = [TopicPartition(topic, partition, committed) for partition in range(partitions)]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 60)
        producer.commit_transaction(60)
        committed += 1
    consumer.close()
    return committed


def load_topic(
    bootstrap: str,
    topic: str,
    partitions: int,
    records: int,
    size: int,
    *,
    first: int = 0,
    stamp_now: bool = False,
    values: Callable[[int], bytes] | None = None,
    headers: Callable[[int], ProducedHeaders | None] | None = None,
) -> int:
    """Produce ``records`` records of ``size``-byte values round-robin over the partitions, in order (an idempotent
    producer); returns payload bytes.

    Values are slices of a random block (incompressible, all different), or ``values(i)`` for record number ``i``
    when given (``size`` then unused); keys are the record number, except a null key every :data:`NULL_KEY_EVERY`
    records; every :data:`HEADER_EVERY`-th record has two headers, the second with a null value (or ``headers(i)``
    when given); timestamps are explicit, increasing and in the recent past (CreateTime), one millisecond apart, so
    ``records`` ms before now at the first record.  ``stamp_now`` stamps each record with its produce time instead
    (librdkafka's timestamp 0), for loads so large that the first timestamps would be hours old.  Raises
    ``RuntimeError`` if the broker rejected any record.
    """
    block = os.urandom(size + 65536)
    errors: list[KafkaError] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "on_delivery": lambda error, _: errors.append(error) if error is not None else None,
            # a batch retried on a loaded machine must not land after the next one: records stay in order
            "enable.idempotence": True,
            "linger.ms": 20,
            "batch.size": 1024 * 1024,
            "queue.buffering.max.kbytes": 512 * 1024,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    base_ts = int(time.time() * 1000) - records - 60_000
    payload = 0
    produce = producer.produce
    for i in range(first, first + records):
        key = None if i % NULL_KEY_EVERY == 0 else b"%012d" % i
        start = (i * 7919) % 65536
        value = block[start : start + size] if values is None else values(i)
        record_headers: ProducedHeaders | None
        if headers is None:
            record_headers = [("seq", b"%d" % i), ("empty", None)] if i % HEADER_EVERY == 0 else None
        else:
            record_headers = headers(i)
        payload += len(value) + (len(key) if key else 0)
        while True:
            try:
                produce(
                    topic,
                    value,
                    key,
                    partition=i % partitions,
                    timestamp=0 if stamp_now else base_ts + i - first,
                    headers=record_headers,
                )
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) or errors:
        raise RuntimeError(f"loading {topic}: records undelivered after 120 s or rejected ({errors[:1]})")
    return payload


def offsets_consumer(bootstrap: str, committed: bool) -> Consumer:
    """A consumer that only asks for end offsets: librdkafka's watermark query honours ``isolation.level`` (since
    1.7.1), so a read_committed one answers the last stable offset.  (The admin client's ``list_offsets``, polled
    from a thread, once aborted natively here.)"""
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "airmirror-bench-offsets",
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if committed else "read_uncommitted",
        }
    )


def end_offsets(consumer: Consumer, topic: str, partitions: int) -> list[int]:
    """Per-partition end offsets at ``consumer``'s isolation level (:func:`offsets_consumer`); 0 if missing."""
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in range(partitions)]
    except KafkaException:
        return [0] * partitions


WATCH_INTERVAL_S = 0.1
"""How often a :class:`TargetWatch` polls: a first-to-last-write window it measures is known to within this much, so a
copy whose every write fell within one poll has a window of this much, never of 0."""


@dataclass
class TargetWatch:
    """Polls a target topic every ``interval`` s in a thread, noting when records first land and all are there.

    ``expected[p]`` is the end offset partition ``p`` must reach, ``base[p]`` (default 0) its end offset before
    the copy.  ``first_write`` is the first poll that saw any record written (high watermark above ``base``),
    ``all_written`` the first
    that saw every partition's high watermark at its expected count, ``all_visible`` the first that saw every
    last stable offset there (read_committed consumers can read everything).
    """

    bootstrap: str
    topic: str
    expected: list[int]
    interval: float = WATCH_INTERVAL_S
    base: list[int] | None = None
    first_write: float | None = None
    all_written: float | None = None
    all_visible: float | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> TargetWatch:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        written_at, visible_at = (offsets_consumer(self.bootstrap, committed) for committed in (False, True))
        try:
            self._watch(written_at, visible_at)
        finally:
            written_at.close()
            visible_at.close()

    def _watch(self, written_at: Consumer, visible_at: Consumer) -> None:
        partitions = len(self.expected)
        base = self.base or [0] * partitions
        while not self._stop.is_set():
            now = time.monotonic()
            if self.all_written is None:
                written = end_offsets(written_at, self.topic, partitions)
                if self.first_write is None and any(w > b for w, b in zip(written, base, strict=True)):
                    self.first_write = now
                if all(w >= e for w, e in zip(written, self.expected, strict=True)):
                    self.all_written = now
            if self.all_written is not None:
                visible = end_offsets(visible_at, self.topic, partitions)
                if all(v >= e for v, e in zip(visible, self.expected, strict=True)):
                    self.all_visible = now
                    return
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - now)))

    def wait_visible(self, timeout: float, alive: Callable[[], bool] = lambda: True) -> bool:
        deadline = time.monotonic() + timeout
        while self.all_visible is None and time.monotonic() < deadline and alive():
            time.sleep(0.05)
        return self.all_visible is not None

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def consumed(messages: list[Message]) -> list[Record]:
    """Consumed messages as :class:`Record` objects: librdkafka gives a consumed message's headers as a list of
    ``(name, bytes or None)`` pairs (never the dict a producer may be given)."""
    return cast("list[Record]", messages)


def record_digest(messages: Sequence[Record], hasher: hashlib.blake2b) -> None:
    """Feed key, value, headers and timestamp of each message, length-prefixed (null != empty), to ``hasher``."""
    update = hasher.update
    for m in messages:
        for part in (m.key(), m.value()):
            if part is None:
                update(b"\xff")
            else:
                update(_INT.pack(len(part)))
                update(part)
        headers = m.headers()
        if headers:
            for name, value in headers:
                raw = name.encode()
                update(b"h" + _INT.pack(len(raw)) + raw)
                update(b"\xff" if value is None else _INT.pack(len(value)) + value)
        update(b"t" + _INT.pack(m.timestamp()[1]))


def verify_consumer(bootstrap: str) -> Consumer:
    """A read_committed consumer that reports each partition's end (``enable.partition.eof``), for digests."""
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "airmirror-bench-verify",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
        }
    )


def committed_messages(bootstrap: str, topic: str, partition: int) -> Iterator[list[Record]]:
    """Every committed record of one partition from its log start, in offset order, a batch of messages at a time."""
    consumer = verify_consumer(bootstrap)
    try:
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 30
        while True:
            # consume() waits for the whole count or the timeout: keep the timeout short
            messages = consumer.consume(10000, 0.2)
            if not messages:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{topic}-{partition}: no end of partition within 30 s")
                continue
            deadline = time.monotonic() + 30
            records: list[Message] = []
            for m in messages:
                error = m.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        yield consumed(records)
                        return
                    raise KafkaException(error)
                records.append(m)
            yield consumed(records)
    finally:
        consumer.close()


class _Kept(Enum):
    """:class:`Expected`'s default: the part as the message holds it."""

    KEPT = "kept"


class Expected:
    """A consumed message as a copy that changed it must hold it: its ``value`` or ``headers`` replaced (by default
    the message's own)."""

    def __init__(
        self,
        message: Record,
        *,
        value: bytes | _Kept | None = _Kept.KEPT,
        headers: list[Header] | _Kept | None = _Kept.KEPT,
    ) -> None:
        self._key, self._timestamp = message.key(), message.timestamp()
        self._value = message.value() if value is _Kept.KEPT else value
        self._headers = message.headers() if headers is _Kept.KEPT else headers

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[Header] | None:
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp


Reshape = Callable[[list[Record]], list[Record]]
"""What a copy does to a batch of consumed messages: the messages (:class:`Expected` or as consumed) it must hold."""


def reframed(messages: list[Record], schema_id: int) -> list[Record]:
    """Messages whose values, when framed by a schema-registry serializer (magic byte 0, 4-byte id), name
    ``schema_id`` instead: what a copy that translated schema ids must hold (bind ``schema_id`` with
    :func:`functools.partial`)."""
    frame = b"\0" + struct.pack(">I", schema_id)
    return [
        Expected(m, value=frame + value[5:]) if (value := m.value()) and len(value) >= 5 and value[0] == 0 else m
        for m in messages
    ]


def partition_digest(bootstrap: str, topic: str, partition: int, reshape: Reshape | None = None) -> tuple[int, str]:
    """``(record count, digest)`` of every committed record of one partition, in offset order; with ``reshape``, of
    the records it makes of them (a picklable function: digests run in other processes)."""
    hasher = hashlib.blake2b(digest_size=20)
    count = 0
    for records in committed_messages(bootstrap, topic, partition):
        if reshape is not None:
            records = reshape(records)
        record_digest(records, hasher)
        count += len(records)
    return count, hasher.hexdigest()


def topic_digest(bootstrap: str, topic: str, partitions: int, reshape: Reshape | None = None) -> list[tuple[int, str]]:
    """Per-partition ``(count, digest)`` (see :func:`partition_digest`), partitions digested in parallel processes."""
    context = multiprocessing.get_context("spawn")  # no fork of a process running librdkafka threads
    with ProcessPoolExecutor(max_workers=min(partitions, os.cpu_count() or 1), mp_context=context) as pool:
        return list(
            pool.map(
                partition_digest,
                [bootstrap] * partitions,
                [topic] * partitions,
                range(partitions),
                [reshape] * partitions,
            )
        )


def topics_digest(bootstrap: str, topics: list[str], partitions: int) -> list[tuple[int, str]]:
    """Per-partition ``(count, digest)`` of every partition of ``topics`` (topic by topic, then partition), all
    read by one consumer: for many small partitions, where a process per partition would cost more than the
    records."""
    hashers: dict[tuple[str | None, int | None], hashlib.blake2b] = {
        (topic, p): hashlib.blake2b(digest_size=20) for topic in topics for p in range(partitions)
    }
    counts = dict.fromkeys(hashers, 0)
    pending = set(hashers)
    consumer = verify_consumer(bootstrap)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for topic in topics for p in range(partitions)])
        deadline = time.monotonic() + 60
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(pending)} partitions of {topics[0]}... reached no end within 60 s")
            for m in consumer.consume(10000, 0.2):
                key = (m.topic(), m.partition())
                error = m.error()
                if error is None:
                    record_digest(consumed([m]), hashers[key])
                    counts[key] += 1
                elif error.code() == KafkaError._PARTITION_EOF:
                    pending.discard(key)
                else:
                    raise KafkaException(error)
    finally:
        consumer.close()
    return [(counts[key], hasher.hexdigest()) for key, hasher in hashers.items()]
