"""Two secured local clusters and small clients with their settings, shared by the secured-broker tests.

``a`` is SASL_SSL with SCRAM-SHA-512 users, started with ``airmirror local-kafka start`` as a user would; ``b`` is
SASL_SSL with PLAIN users.  MM2 files for them hold only MM2's own security keys (:func:`security_lines`).
(tests/kafka_helpers.py takes a bootstrap string only, hence these clients.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from airmirror.devtools.local_kafka import LocalBroker, User, free_port, start_broker, stop_broker
from airmirror.kafka.retry import retry_transient
from tests.conftest import write_config
from tests.kafka_helpers import Record, sample_records

SOURCE_USER, TARGET_USER = ("mirror-a", "a-Secret:1"), ("mirror-b", "b-Secret=2")
SECRETS = (SOURCE_USER[1], TARGET_USER[1])
PARTITIONS = 2
RECORDS_PER_PARTITION = 300


def local_kafka(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "airmirror.cli", "local-kafka", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "AIRMIRROR_HOME": str(home)},
    )


def start_source_with_the_cli(name: str, home: Path) -> LocalBroker:
    port = free_port()
    user = ":".join(SOURCE_USER)
    flags = ["--port", str(port), "--security", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512", "--user", user]
    started = local_kafka(home, "start", name, *flags)
    assert started.returncode == 0, started.stderr
    assert started.stdout.splitlines()[1].startswith("security SASL_SSL; SCRAM-SHA-512 users mirror-a; CA certificate")
    assert SOURCE_USER[1] not in started.stdout
    # the same settings again: the running cluster, and its handle
    return start_broker(name, port, security="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", users=[user], home=home)


@contextmanager
def secured_clusters(home: Path, names: tuple[str, str]) -> Iterator[dict[str, LocalBroker]]:
    """``a``: SASL_SSL with SCRAM-SHA-512, ``b``: SASL_SSL with PLAIN (two users), stopped on exit."""
    try:
        with ThreadPoolExecutor(2) as pool:
            source = pool.submit(start_source_with_the_cli, names[0], home)
            target = pool.submit(
                start_broker,
                names[1],
                free_port(),
                security="SASL_SSL",
                sasl_mechanism="PLAIN",
                users=[TARGET_USER, ("reader", "reader-pw")],
                home=home,
            )
            yield {"a": source.result(), "b": target.result()}
    finally:
        for name in names:
            stop_broker(name, home=home)


# --- clients with the clusters' settings ---------------------------------------------------------------------


def create_topic(broker: LocalBroker, topic: str, partitions: int, replicas: int = 1, **config: str) -> None:
    admin = AdminClient(broker.client_config())
    admin.create_topics([NewTopic(topic, partitions, replicas, config=config)])[topic].result()


def produce(broker: LocalBroker, topic: str, partition: int, records: list[Record], **settings: str) -> None:
    producer = Producer({**broker.client_config(), "linger.ms": 5, **settings})
    failures: list[str] = []
    for r in records:
        producer.produce(
            topic,
            r.value,
            r.key,
            partition=partition,
            timestamp=r.timestamp,
            headers=list(r.headers) or None,
            on_delivery=lambda error, _: failures.append(error.str()) if error is not None else None,
        )
    assert producer.flush(60) == 0 and not failures, failures[:1]


def read_partition(broker: LocalBroker, topic: str, partition: int, user: str | None = None) -> list[Record]:
    """Every committed record of one partition (read_committed, to its end)."""
    consumer = Consumer(
        {
            **broker.client_config(user),
            "group.id": "airmirror-test-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    records: list[Record] = []
    try:
        while True:
            message = consumer.poll(30)
            assert message is not None, f"no end of {topic}-{partition} within 30 s"
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return records
                raise RuntimeError(message.error())
            records.append(
                Record(message.key(), message.value(), tuple(message.headers() or ()), message.timestamp()[1])
            )
    finally:
        consumer.close()


def records_in(broker: LocalBroker, topic: str) -> int:
    """How many records ``topic`` holds on ``broker`` (0 when it does not exist)."""
    topics = AdminClient(broker.client_config()).list_topics(timeout=30).topics
    if topic not in topics:
        return 0
    return sum(len(read_partition(broker, topic, partition)) for partition in topics[topic].partitions)


def commit_offsets(broker: LocalBroker, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit ``offsets`` for consumer group ``group`` as one of its consumers would (a fresh cluster's group
    coordinator may still be loading: transient errors are retried)."""
    consumer = Consumer({**broker.client_config(), "group.id": group, "enable.auto.commit": False})
    try:
        partitions = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
        retry_transient(lambda: consumer.commit(offsets=partitions, asynchronous=False), f"commit offsets of {group}")
    finally:
        consumer.close()


def group_offsets(broker: LocalBroker, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The offsets ``group`` has committed on ``broker`` for ``topic`` (partition -> offset, committed ones only)."""
    consumer = Consumer({**broker.client_config(), "group.id": group, "enable.auto.commit": False})
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in committed if tp.offset >= 0}


# --- the MM2 file -------------------------------------------------------------------------------------------


def security_lines(
    alias: str, broker: LocalBroker, password: str | None = None, ca: Path | None = None, *, pkcs12: bool = False
) -> str:
    """MM2's own keys for cluster ``alias``: SASL login as the cluster's first user (with ``password`` instead of
    its own if given) and the CA certificate as a PEM trust store (``ca`` instead of the cluster's if given), or
    with ``pkcs12`` the cluster's PKCS12 trust store and its password."""
    security = broker.security
    user = security.users[0]
    login = security.jaas_config(User(user.name, password if password is not None else user.password))
    tls = security.tls
    assert tls is not None
    if pkcs12:
        trust = [
            f"{alias}.ssl.truststore.type = PKCS12",
            f"{alias}.ssl.truststore.location = {tls.truststore}",
            f"{alias}.ssl.truststore.password = {tls.truststore_password}",
        ]
    else:
        trust = [f"{alias}.ssl.truststore.type = PEM", f"{alias}.ssl.truststore.location = {ca or tls.ca_certificate}"]
    return "\n".join(
        [
            f"{alias}.security.protocol = {security.protocol}",
            f"{alias}.sasl.mechanism = {security.sasl_mechanism}",
            f"{alias}.sasl.jaas.config = {login}",
            *trust,
        ]
    )


def mm2_file(
    tmp_path: Path, secured: dict[str, LocalBroker], prefix: str, target_lines: str | None = None, extra: str = ""
) -> Path:
    """Flow a->b of the ``prefix`` topics: source with its PKCS12 trust store, target ``target_lines`` (default: its
    own PEM CA), then ``extra``."""
    body = "\n".join(
        [
            "a->b.enabled = true",
            f"topics = {prefix}.*",
            "airmirror.spark.master = local[2]",
            security_lines("a", secured["a"], pkcs12=True),
            target_lines or security_lines("b", secured["b"]),
            extra,
        ]
    )
    return write_config(tmp_path / "mm2.properties", secured, body)


def source_topic(
    secured: dict[str, LocalBroker], prefix: str, records: int = RECORDS_PER_PARTITION
) -> tuple[str, dict[int, list[Record]]]:
    """Topic ``PREFIX.orders`` on the source, with ``records`` records in each of its partitions."""
    topic = f"{prefix}.orders"
    create_topic(secured["a"], topic, PARTITIONS)
    sent = {p: sample_records(records, prefix=f"{prefix}-{p}") for p in range(PARTITIONS)}
    for partition, batch in sent.items():
        produce(secured["a"], topic, partition, batch)
    return topic, sent
