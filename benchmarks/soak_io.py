"""The soak's reach into its clusters and processes: what it measures from outside a run, and the faults it injects.

Everything here talks to the local clusters or reads ``/proc`` through psutil; nothing imports the product's
replication code, so the soak judges airmirror only by what a user could see.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from confluent_kafka import OFFSET_BEGINNING, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kafka_io import committed_messages, load_topic, verify_consumer

from airmirror import names
from airmirror.devtools.local_kafka import LocalBroker

SOURCE, TARGET = "src", "tgt"
FLOW = f"{SOURCE}->{TARGET}"
SCAN_TIMEOUT_S = 120.0
"""How long a batch-log scan may take to reach the end it was given before it fails."""
_NOT_YET_CREATED = {
    KafkaError._NOENT,  # librdkafka's "No leaders found" for a topic the cluster does not have
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
}


BURST_RECORDS = 1_000_000
"""Records a burst writes into a fault's topic just before the window that injects the fault: enough that the
window's read of them is likely still behind when the fault strikes at its first copied record (a copy of this many
takes several seconds)."""
BURST_RECORD_SIZE = 100
LEASE_TTL_S = 60.0
"""The flow lease's time to live (``airmirror.store.flow_lease``): a driver frozen longer than this has lost it."""
FREEZE_MARGIN_S = 20.0


@dataclass(frozen=True)
class Clusters:
    """The soak's two clusters, as fault injectors get them."""

    source: LocalBroker
    target: LocalBroker


def restart_target(clusters: Clusters, driver: int) -> None:
    """Stop the target cluster's node and start it again with its data (it serves requests when this returns)."""
    clusters.target.restart(timeout=300)


def freeze_driver(clusters: Clusters, driver: int) -> None:
    """SIGSTOP the window's driver process alone (its Spark JVM and Python workers stream on) for longer than its
    lease lives, then SIGCONT it: it must finish its window and leave the flow to the next one."""
    os.kill(driver, signal.SIGSTOP)
    try:
        time.sleep(LEASE_TTL_S + FREEZE_MARGIN_S)
    finally:
        os.kill(driver, signal.SIGCONT)


def delete_topic(bootstrap: str, topic: str) -> None:
    """Delete ``topic`` and wait until the cluster no longer lists it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=30)[topic].result()
    deadline = time.monotonic() + 60
    while topic in admin.list_topics(timeout=10).topics:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic} still listed 60 s after its deletion")
        time.sleep(0.5)


def create_topics(bootstrap: str, topics: dict[str, int], config: dict[str, str]) -> None:
    """Create ``topics`` (name -> partitions), replication factor 1, with ``config``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(topic, count, 1, config=config) for topic, count in topics.items()]
    for future in admin.create_topics(new).values():
        future.result()


@dataclass
class BurstTopic:
    """A source topic of ``partitions`` that the soak writes only in bursts of :data:`BURST_RECORDS` (random values,
    stamped now), each just before a window that injects a fault into it."""

    topic: str
    partitions: int

    def burst(self, clusters: Clusters) -> None:
        load_topic(
            clusters.source.bootstrap, self.topic, self.partitions, BURST_RECORDS, BURST_RECORD_SIZE, stamp_now=True
        )


@dataclass
class DoomedTopic(BurstTopic):
    """A source topic deleted while the flow reads it.  :meth:`prepare` writes a burst and keeps the topic's records
    (``held``, per partition); :meth:`delete` deletes it.  Its remote topic must then hold, per partition, a prefix
    of what it held, each record once (:meth:`compare`)."""

    held: dict[int, list[int]] = field(default_factory=dict)
    chain: HeaderChain | None = None
    """The flow's transforms, when the soak runs them (:func:`contents`)."""

    def prepare(self, clusters: Clusters) -> None:
        self.burst(clusters)
        self.held = {p: digests(clusters.source.bootstrap, self.topic, p, self.chain) for p in range(self.partitions)}

    def delete(self, clusters: Clusters, driver: int) -> None:
        delete_topic(clusters.source.bootstrap, self.topic)

    def compare(self, target: str) -> dict:
        """Per partition, whether the remote partition is a prefix of what the source held; the records copied."""
        copied, unequal = 0, []
        for partition, held in self.held.items():
            copy = digests(target, f"{SOURCE}.{self.topic}", partition)
            copied += len(copy)
            if copy != held[: len(copy)]:
                unequal.append(f"{self.topic}-{partition}")
        held_records = sum(len(held) for held in self.held.values())
        return {
            "held": held_records,
            "copied": copied,
            "read_behind_when_deleted": copied < held_records,
            "unequal_partitions": unequal,
            "prefix": not unequal,
        }


@dataclass
class TrimmedTopic(BurstTopic):
    """A source topic whose log start a ``DeleteRecords`` moves past what the flow has read of a burst, as retention
    would: :meth:`prepare` writes the burst, :meth:`trim` deletes every partition's records below the middle of it."""

    middles: dict[int, int] = field(default_factory=dict)

    def prepare(self, clusters: Clusters) -> None:
        admin = AdminClient({"bootstrap.servers": clusters.source.bootstrap})
        before = self.ends(admin)
        self.burst(clusters)
        after = self.ends(admin)
        self.middles = {p: (before[p] + after[p]) // 2 for p in range(self.partitions)}

    def ends(self, admin: AdminClient) -> dict[int, int]:
        request = {TopicPartition(self.topic, p): OffsetSpec.latest() for p in range(self.partitions)}
        return {tp.partition: f.result().offset for tp, f in admin.list_offsets(request, request_timeout=30).items()}

    def trim(self, clusters: Clusters, driver: int) -> None:
        admin = AdminClient({"bootstrap.servers": clusters.source.bootstrap})
        request = [TopicPartition(self.topic, p, offset) for p, offset in self.middles.items()]
        for future in admin.delete_records(request, request_timeout=30).values():
            future.result()


def delete_remote_topic(topic: str) -> Callable[[Clusters, int], None]:
    """A fault that deletes the remote topic of source ``topic`` on the target: airmirror stops the topic (never
    recreating it) and names it in ``status`` and in every run's error until ``airmirror reset``."""

    def inject(clusters: Clusters, driver: int) -> None:
        delete_topic(clusters.target.bootstrap, f"{SOURCE}.{topic}")

    return inject


def delete_anchor_group(clusters: Clusters, driver: int) -> None:
    """Delete the flow's anchor group on the target (``names.anchor_group``): the next run's copy tasks must find
    each partition's progress by scanning the batch log.  Raises ``KafkaException`` if the broker refuses."""
    group = names.anchor_group(SOURCE, TARGET)
    admin = AdminClient({"bootstrap.servers": clusters.target.bootstrap})
    admin.delete_consumer_groups([group], request_timeout=30)[group].result()


@dataclass
class TreePeaks:
    """The peaks, over the samples taken, of a process tree's summed RSS, threads and open descriptors."""

    rss_mb: float = 0.0
    threads: int = 0
    fds: int = 0

    def sample(self, pid: int) -> None:
        """Add one sample of process ``pid`` and all its descendants; processes that end meanwhile are skipped, and
        a root that already ended adds nothing."""
        try:
            root = psutil.Process(pid)
            processes = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        rss = threads = fds = 0
        for process in processes:
            try:
                with process.oneshot():
                    rss += process.memory_info().rss
                    threads += process.num_threads()
                    fds += process.num_fds()
            except psutil.Error:
                continue
        self.rss_mb = max(self.rss_mb, round(rss / 2**20, 1))
        self.threads = max(self.threads, threads)
        self.fds = max(self.fds, fds)


def high_watermark_sum(admin: AdminClient, topics: dict[str, int]) -> int | None:
    """The sum of the high watermarks (read_uncommitted: written records count, committed or not) of every partition
    of ``topics`` (name -> partition count); a partition of a topic not created yet counts 0.  ``None`` when the
    cluster did not answer for every partition (a broker restarting)."""
    request = {TopicPartition(topic, p): OffsetSpec.latest() for topic, count in topics.items() for p in range(count)}
    total = 0
    try:
        futures = admin.list_offsets(request, isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=5)
        for future in futures.values():
            try:
                total += future.result().offset
            except KafkaException as error:
                if error.args[0].code() not in _NOT_YET_CREATED:
                    return None
    except KafkaException:
        return None
    return total


def settled_high_watermark_sum(admin: AdminClient, topics: dict[str, int], timeout: float = 180) -> int:
    """:func:`high_watermark_sum` once the cluster answers; ``TimeoutError`` if it does not within ``timeout`` s.
    After a failed attempt the client's metadata of ``topics`` is refreshed: after a broker restart librdkafka may
    otherwise look their leaders up in its stale cache until its periodic refresh, minutes later."""
    deadline = time.monotonic() + timeout
    while (total := high_watermark_sum(admin, topics)) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no high watermarks of {sorted(topics)} within {timeout} s")
        time.sleep(1)
        with contextlib.suppress(KafkaException):
            admin.list_topics(timeout=10)
    return total


@dataclass(frozen=True)
class LogScan:
    """What one scan of the batch log found: its records (tombstones included), the tombstones among them, and the
    seconds from creating the consumer to its end of log."""

    records: int
    tombstones: int
    seconds: float


def scan_batch_log(target: str) -> LogScan:
    """Read the flow's batch log (``names.batch_log_topic(SOURCE)`` on ``target``, one partition) from its log start
    to the high watermark a read_uncommitted query gives first, with a read_committed consumer (librdkafka answers
    a read_committed client's watermark query with the last stable offset instead), counting every record.

    Meant for a moment when no run writes the log: an open transaction holds the end back, and a scan that does not
    reach it within :data:`SCAN_TIMEOUT_S` raises ``TimeoutError``."""
    topic = names.batch_log_topic(SOURCE)
    partition = TopicPartition(topic, 0)
    admin = AdminClient({"bootstrap.servers": target})
    latest = admin.list_offsets(
        {partition: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=30
    )
    end = latest[partition].result().offset
    started = time.monotonic()
    records = tombstones = 0
    consumer = verify_consumer(target)
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        while time.monotonic() - started < SCAN_TIMEOUT_S:
            for message in consumer.consume(10000, 0.2):
                error = message.error()
                if error is None:
                    records += 1
                    tombstones += message.value() is None
                elif error.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(error)
                elif message.offset() >= end:
                    return LogScan(records, tombstones, round(time.monotonic() - started, 3))
    finally:
        consumer.close()
    raise TimeoutError(f"{topic}: offset {end} not reached within {SCAN_TIMEOUT_S} s")


def db_kb(db: Path) -> float:
    """The SQLite metadata DB's size on disk, its write-ahead log included, in KiB."""
    return round(sum(path.stat().st_size for path in (db, db.with_name(db.name + "-wal")) if path.exists()) / 1024, 1)


HeaderChain = Callable[[list | None], list | None]
"""What a flow's transforms make of a record's headers: ``None`` when they drop the record
(``json_data.header_chain``)."""


def records(bootstrap: str, topic: str, partition: int, chain: HeaderChain | None = None) -> Iterator[tuple]:
    """Key, value, headers and timestamp of every committed record of one partition, in offset order, one at a time;
    with ``chain``, as a copy through it holds them."""
    for batch in committed_messages(bootstrap, topic, partition):
        for m in batch:
            headers = m.headers() if chain is None else chain(m.headers())
            if chain is None or headers is not None:
                yield m.key(), m.value(), headers, m.timestamp()[1]


def contents(bootstrap: str, topic: str, partition: int, chain: HeaderChain | None = None) -> list[tuple]:
    """Every record :func:`records` reads of one partition."""
    return list(records(bootstrap, topic, partition, chain))


def digests(bootstrap: str, topic: str, partition: int, chain: HeaderChain | None = None) -> list[int]:
    """One hash per record of the partition, of what :func:`contents` holds of it (equal records, equal hashes,
    within this process): a long partition's contents at a fraction of the memory, never held whole."""
    return [
        hash((key, value, tuple(headers or ()), stamp))
        for key, value, headers, stamp in records(bootstrap, topic, partition, chain)
    ]


def compare_copies(source: str, target: str, topics: dict[str, int], chain: HeaderChain | None = None) -> dict:
    """Record-by-record comparison of every partition of ``topics`` (name -> partition count) on ``source``, as a
    copy through ``chain`` holds it, with its remote partition (``SOURCE.topic``) on ``target``, over what both still
    hold: the side holding fewer records
    must hold exactly the other side's newest ones (so none is missing or twice and both end at the same record),
    and a partition empty on one side must be empty on the other.  Returns the record counts, the unequal
    partitions (``topic-partition``) and ``equal``."""
    held, unequal = {"source_records": 0, "target_records": 0}, []
    for topic, count in topics.items():
        for partition in range(count):
            copy = contents(target, f"{SOURCE}.{topic}", partition)
            original = contents(source, topic, partition, chain)
            held["source_records"] += len(original)
            held["target_records"] += len(copy)
            common = min(len(copy), len(original))
            same = copy[len(copy) - common :] == original[len(original) - common :]
            if not same or (common == 0 and len(copy) != len(original)):
                unequal.append(f"{topic}-{partition}")
    return {**held, "unequal_partitions": unequal, "equal": not unequal}
