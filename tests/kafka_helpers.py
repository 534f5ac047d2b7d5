"""Test helpers that talk to real Kafka brokers: create topics, produce known records, read them back."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


@dataclass(frozen=True)
class Record:
    """Everything a byte-for-byte copy must preserve."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def end_offset(bootstrap: str, topic: str, partition: int, *, committed: bool = False) -> int:
    """The partition's end: its high watermark, counting records of open transactions, or with ``committed`` its
    last stable offset; 0 while the topic does not exist."""
    isolation = "read_committed" if committed else "read_uncommitted"
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "airmirror-test-end-offset", "isolation.level": isolation}
    )
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
    except KafkaException:
        return 0
    finally:
        consumer.close()


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result()


def await_partition(producer: Producer, topic: str, partition: int, timeout: float = 30.0) -> None:
    """Wait until the producer's metadata holds ``partition`` of ``topic`` when it knows the topic but not yet the
    partition (added a moment ago: the broker applies new partitions a little later, and librdkafka fails records
    to a partition its metadata lacks)."""
    deadline = time.monotonic() + timeout
    while True:
        known = producer.list_topics(topic, timeout=10).topics.get(topic)
        if known is None or known.error is not None or partition in known.partitions or time.monotonic() > deadline:
            return
        time.sleep(0.2)


def produce(
    bootstrap: str,
    topic: str,
    partition: int,
    records: list[Record],
    transactional_id: str | None = None,
    abort: bool = False,
) -> None:
    """Produce records to one partition; with ``transactional_id`` inside one transaction (aborted if asked)."""
    config = {"bootstrap.servers": bootstrap, "linger.ms": 5}
    if transactional_id:
        config["transactional.id"] = transactional_id
    producer = Producer(config)
    await_partition(producer, topic, partition)
    if transactional_id:
        producer.init_transactions(30)
        producer.begin_transaction()
    failures: list[str] = []

    def delivered(error, _message) -> None:
        if error is not None:
            failures.append(error.str())

    for r in records:
        producer.produce(
            topic,
            r.value,
            r.key,
            partition=partition,
            timestamp=r.timestamp,
            headers=list(r.headers) or None,
            on_delivery=delivered,
        )
    assert producer.flush(60) == 0, f"records to {topic}-{partition} unsent after 60 s"
    assert not failures, f"records to {topic}-{partition} failed: {failures[0]}"
    if transactional_id:
        if abort:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)


def committed_reader(bootstrap: str) -> Consumer:
    """A read_committed consumer that reports the end of each partition and commits nothing."""
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "airmirror-test-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )


def ends_of(bootstrap: str, topic: str, partition: int) -> str:
    """The partition's last stable offset and high watermark, as a read that heard nothing can tell them."""
    ends = []
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "airmirror-test-ends", "isolation.level": isolation}
        )
        try:
            ends.append(consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5)[1])
        except KafkaException as error:
            ends.append(f"unknown: {error}")
        finally:
            consumer.close()
    return f"last stable offset {ends[0]}, high watermark {ends[1]}"


def read_partition(bootstrap: str, topic: str, partition: int, timeout: float = 20.0) -> list[tuple[int, Record]]:
    """Every committed record of a partition, with its offset (read_committed, to the end)."""
    consumer = committed_reader(bootstrap)
    consumer.assign([TopicPartition(topic, partition, 0)])
    out: list[tuple[int, Record]] = []
    try:
        while True:
            message = consumer.poll(timeout)
            if message is None:
                raise TimeoutError(
                    f"no end of {topic}-{partition} within {timeout}s ({ends_of(bootstrap, topic, partition)})"
                )
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise RuntimeError(message.error())
            out.append(
                (
                    message.offset(),
                    Record(message.key(), message.value(), tuple(message.headers() or ()), message.timestamp()[1]),
                )
            )
    finally:
        consumer.close()


def records_by_partition(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> dict[int, list[Record]]:
    """Every committed record of every partition of ``topic`` (read_committed, to the end), with one consumer:
    reading hundreds of partitions one consumer each would take minutes."""
    consumer = committed_reader(bootstrap)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list[Record]] = {p: [] for p in range(partitions)}
    pending = set(out)
    deadline = time.monotonic() + timeout
    try:
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no end of {topic} partitions {sorted(pending)[:10]} within {timeout}s")
            for message in consumer.consume(1000, 1.0):
                if message.error() is not None:
                    if message.error().code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(message.error())
                    pending.discard(message.partition())
                    continue
                out[message.partition()].append(
                    Record(message.key(), message.value(), tuple(message.headers() or ()), message.timestamp()[1])
                )
    finally:
        consumer.close()
    return out


def records_of(bootstrap: str, topic: str, partition: int) -> list[Record]:
    return [r for _, r in read_partition(bootstrap, topic, partition)]


def recent_ms() -> int:
    """A timestamp one hour ago: recent enough that no broker's 7-day retention deletes the test records."""
    return int(time.time() * 1000) - 3_600_000


def sample_records(n: int, prefix: str = "r", base_ts: int | None = None) -> list[Record]:
    """Records with every feature a copy must keep: null keys, null values, duplicate/null headers, timestamps."""
    base_ts = recent_ms() if base_ts is None else base_ts
    out = []
    for i in range(n):
        key = None if i % 7 == 0 else f"{prefix}-key-{i}".encode()
        value = None if i % 11 == 5 else f"{prefix}-value-{i}-".encode() + bytes(range(256))[: i % 256]
        headers: tuple[tuple[str, bytes | None], ...] = ()
        if i % 3 == 0:
            headers = (("h", b"\x00\x01" + str(i).encode()), ("h", None), ("trace", f"t{i}".encode()))
        out.append(Record(key, value, headers, base_ts + i * 10))
    return out


class SteadyProducer(threading.Thread):
    """Writes keyed, numbered records round-robin over ``partitions`` at a steady pace until stopped:
    ``burst`` records, then a ``pause`` of that many seconds."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, *, burst: int = 60, pause: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.partitions = partitions
        self.burst = burst
        self.pause = pause
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
        self.halt = threading.Event()
        self.sent = 0

    def run(self) -> None:
        while not self.halt.is_set():
            for _ in range(self.burst):
                partition = self.sent % self.partitions
                self.producer.produce(
                    self.topic, f"value-{self.sent}".encode() * 20, f"key-{self.sent}".encode(), partition=partition
                )
                self.sent += 1
            self.producer.poll(0)
            time.sleep(self.pause)
        assert self.producer.flush(60) == 0

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=120)


def recreate_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    """Delete ``topic`` and create it again (retrying while the broker still finishes the deletion)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=30)[topic].result()
    delete_topic_and_wait(admin, topic)
    deadline = time.monotonic() + 60
    while True:
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30)[topic].result()
            return
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def delete_topic_and_wait(admin: AdminClient, topic: str) -> None:
    deadline = time.monotonic() + 60
    while topic in admin.list_topics(timeout=10).topics:
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic} was not deleted")
        time.sleep(0.2)
