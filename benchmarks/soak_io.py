"""The soak's measures, taken from outside a run: high watermarks, batch-log scans, the DB's size, ``airmirror
status``, and the record-by-record comparison of the copies (its faults are in :mod:`soak_faults`, its process
trees' peaks in :mod:`shared`).

Everything here talks to the local clusters, reads the metadata DB's size or runs the CLI; nothing imports the
product's replication code, so the soak judges airmirror only by what a user could see.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import OFFSET_BEGINNING, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka_io import Header, committed_messages, verify_consumer
from sqlalchemy import make_url

from airmirror import names

SOURCE, TARGET = "src", "tgt"
FLOW = f"{SOURCE}->{TARGET}"
CLI_ERROR = "airmirror: error: "
ERROR_LINES = 5
SCAN_TIMEOUT_S = 120.0
"""How long a batch-log scan may take to reach the end it was given before it fails."""
_NOT_YET_CREATED = {
    KafkaError._NOENT,  # librdkafka's "No leaders found" for a topic the cluster does not have
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
}


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


def stable_ends(admin: AdminClient, topic: str, partitions: int) -> list[int]:
    """Each partition's last stable offset (read_committed: what a committed transaction's records end at); 0 for a
    partition the cluster does not answer for."""
    request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    futures = admin.list_offsets(request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=5)
    ends = dict.fromkeys(range(partitions), 0)
    for partition, future in futures.items():
        with contextlib.suppress(KafkaException):
            ends[partition.partition] = max(0, future.result().offset)
    return list(ends.values())


def status_json(config: Path) -> dict[str, Any]:
    """``airmirror status CONFIG --flow FLOW --json`` as a document, or ``{"error": ...}`` saying why there is
    none."""
    status = subprocess.run(
        [sys.executable, "-m", "airmirror.cli", "status", str(config), "--flow", FLOW, "--json"],
        capture_output=True,
        text=True,
    )
    try:
        document: dict[str, Any] = json.loads(status.stdout)
    except ValueError:
        return {"error": f"status exited {status.returncode}: {status.stderr[-1000:]}"}
    return document


def error_line(stderr: str) -> str:
    """A failed process's error: its last ``airmirror: error:`` line, else its last lines."""
    lines = stderr.splitlines()
    errors = [line for line in lines if line.startswith(CLI_ERROR)]
    return errors[-1] if errors else "\n".join(lines[-ERROR_LINES:])


def parse_report(stdout: str) -> dict[str, Any] | str:
    """A run's JSON report (``--json``), or its stdout's last 2000 characters when that is not JSON."""
    try:
        report: dict[str, Any] = json.loads(stdout)
    except ValueError:
        return stdout[-2000:]
    return report


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


def pg_db_kb(url: str) -> float:
    """The size on disk of the PostgreSQL database at SQLAlchemy ``url`` (``pg_database_size``), in KiB."""
    with psycopg.connect(make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)) as db:
        size = db.execute("SELECT pg_database_size(current_database())").fetchone()
    return round((size[0] if size else 0) / 1024, 1)


HeaderChain = Callable[[list[Header] | None], list[Header] | None]
"""What a flow's transforms make of a record's headers: ``None`` when they drop the record
(``json_data.header_chain``)."""


Content = tuple[bytes | None, bytes | None, list[Header] | None, int]
"""A record's key, value, headers and timestamp."""


def records(bootstrap: str, topic: str, partition: int, chain: HeaderChain | None = None) -> Iterator[Content]:
    """Key, value, headers and timestamp of every committed record of one partition, in offset order, one at a time;
    with ``chain``, as a copy through it holds them."""
    for batch in committed_messages(bootstrap, topic, partition):
        for m in batch:
            headers = m.headers() if chain is None else chain(m.headers())
            if chain is None or headers is not None:
                yield m.key(), m.value(), headers, m.timestamp()[1]


def contents(bootstrap: str, topic: str, partition: int, chain: HeaderChain | None = None) -> list[Content]:
    """Every record :func:`records` reads of one partition."""
    return list(records(bootstrap, topic, partition, chain))


def digests(bootstrap: str, topic: str, partition: int, chain: HeaderChain | None = None) -> list[int]:
    """One hash per record of the partition, of what :func:`contents` holds of it (equal records, equal hashes,
    within this process): a long partition's contents at a fraction of the memory, never held whole."""
    return [
        hash((key, value, tuple(headers or ()), stamp))
        for key, value, headers, stamp in records(bootstrap, topic, partition, chain)
    ]


def compare_copies(
    source: str, target: str, topics: dict[str, int], chain: HeaderChain | None = None
) -> dict[str, Any]:
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
