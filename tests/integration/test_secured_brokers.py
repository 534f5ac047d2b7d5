"""Secured local clusters of their own: SASL_SSL with SCRAM-SHA-512 (started with the CLI) and with PLAIN, and
two-node clusters whose brokers replicate to each other over SSL and over SASL_PLAINTEXT (SCRAM).

Checked: ``airmirror replicate`` with an MM2 file holding only MM2's own security keys copies a topic record
for record between two SASL_SSL clusters; a wrong target password and a target certificate of another CA each
fail the run with exit 1, having written nothing to it (and should name the target: expected to fail for now)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from airmirror.devtools.local_kafka import LocalBroker, User, free_port, start_broker, stop_broker
from airmirror.devtools.local_kafka.nodes import port_is_free
from tests.conftest import write_config
from tests.kafka_helpers import Record, sample_records

pytestmark = pytest.mark.integration

SOURCE, TARGET = "secured-a", "secured-b"
SOURCE_USER, TARGET_USER = ("mirror-a", "a-Secret:1"), ("mirror-b", "b-Secret=2")
PARTITIONS = 2
QUIET = logging.getLogger("tests.secured_brokers.refused_client")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False
RECORDS_PER_PARTITION = 300


def local_kafka(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "airmirror.cli", "local-kafka", *args],
        capture_output=True, text=True, timeout=300, env={**os.environ, "AIRMIRROR_HOME": str(home)},
    )


def airmirror(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "airmirror.cli", *args], capture_output=True, text=True, timeout=600)


def start_source_with_the_cli(home: Path) -> LocalBroker:
    port = free_port()
    user = ":".join(SOURCE_USER)
    flags = ["--port", str(port), "--security", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512", "--user", user]
    started = local_kafka(home, "start", SOURCE, *flags)
    assert started.returncode == 0, started.stderr
    assert started.stdout.splitlines()[1].startswith("security SASL_SSL; SCRAM-SHA-512 users mirror-a; CA certificate")
    assert SOURCE_USER[1] not in started.stdout
    # the same settings again: the running cluster, and its handle
    return start_broker(SOURCE, port, security="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", users=[user], home=home)


@pytest.fixture(scope="module")
def secured(test_home: Path) -> Iterator[dict[str, LocalBroker]]:
    """``a``: SASL_SSL with SCRAM-SHA-512, ``b``: SASL_SSL with PLAIN (two users), both used by this module only."""
    try:
        with ThreadPoolExecutor(2) as pool:
            source = pool.submit(start_source_with_the_cli, test_home)
            target = pool.submit(
                start_broker, TARGET, free_port(), security="SASL_SSL", sasl_mechanism="PLAIN",
                users=[TARGET_USER, ("reader", "reader-pw")], home=test_home,
            )
            yield {"a": source.result(), "b": target.result()}
    finally:
        for name in (SOURCE, TARGET):
            stop_broker(name, home=test_home)


# --- small clients with the clusters' settings (tests/kafka_helpers.py takes a bootstrap string only) -------


def create_topic(broker: LocalBroker, topic: str, partitions: int, replicas: int = 1, **config: str) -> None:
    admin = AdminClient(broker.client_config())
    admin.create_topics([NewTopic(topic, partitions, replicas, config=config)])[topic].result()


def produce(broker: LocalBroker, topic: str, partition: int, records: list[Record], **settings: str) -> None:
    producer = Producer({**broker.client_config(), "linger.ms": 5, **settings})
    failures: list[str] = []
    for r in records:
        producer.produce(
            topic, r.value, r.key, partition=partition, timestamp=r.timestamp, headers=list(r.headers) or None,
            on_delivery=lambda error, _: failures.append(error.str()) if error is not None else None,
        )
    assert producer.flush(60) == 0 and not failures, failures[:1]


def read_partition(broker: LocalBroker, topic: str, partition: int, user: str | None = None) -> list[Record]:
    """Every committed record of one partition (read_committed, to its end)."""
    consumer = Consumer({
        **broker.client_config(user), "group.id": "airmirror-test-reader", "enable.auto.commit": False,
        "isolation.level": "read_committed", "enable.partition.eof": True,
    })
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


# --- the MM2 file -------------------------------------------------------------------------------------------


def security_lines(alias: str, broker: LocalBroker, password: str | None = None, ca: Path | None = None) -> str:
    """MM2's own keys for cluster ``alias``: SASL login as the cluster's first user (with ``password`` instead of
    its own if given) and the CA certificate as a PEM trust store (``ca`` instead of the cluster's if given)."""
    security = broker.security
    user = security.users[0]
    login = security.jaas_config(User(user.name, password if password is not None else user.password))
    assert security.tls is not None
    return "\n".join([
        f"{alias}.security.protocol = {security.protocol}",
        f"{alias}.sasl.mechanism = {security.sasl_mechanism}",
        f"{alias}.sasl.jaas.config = {login}",
        f"{alias}.ssl.truststore.type = PEM",
        f"{alias}.ssl.truststore.location = {ca or security.tls.ca_certificate}",
    ])


def mm2_file(tmp_path: Path, secured: dict[str, LocalBroker], prefix: str, target_lines: str | None = None) -> Path:
    body = "\n".join([
        "a->b.enabled = true",
        f"topics = {prefix}.*",
        "airmirror.spark.master = local[2]",
        security_lines("a", secured["a"]),
        target_lines or security_lines("b", secured["b"]),
    ])
    return write_config(tmp_path / "mm2.properties", secured, body)


def source_topic(secured: dict[str, LocalBroker], prefix: str) -> tuple[str, dict[int, list[Record]]]:
    topic = f"{prefix}.orders"
    create_topic(secured["a"], topic, PARTITIONS)
    sent = {p: sample_records(RECORDS_PER_PARTITION, prefix=f"{prefix}-{p}") for p in range(PARTITIONS)}
    for partition, records in sent.items():
        produce(secured["a"], topic, partition, records)
    return topic, sent


# --- tests --------------------------------------------------------------------------------------------------


def test_clusters_accept_their_users_only(secured: dict[str, LocalBroker], prefix: str) -> None:
    target = secured["b"]
    create_topic(target, f"{prefix}.hello", 1)
    sent = sample_records(3, prefix=prefix)
    produce(target, f"{prefix}.hello", 0, sent)
    assert read_partition(target, f"{prefix}.hello", 0, user="reader") == sent
    assert target.security.protocol == "SASL_SSL" and target.security.tls is not None
    assert "b-Secret=2" not in repr(target) and target.security.tls.truststore_password not in repr(target)
    delivered: list[object] = []
    wrong = Producer({**target.client_config(), "sasl.password": "not-the-password", "logger": QUIET})
    wrong.produce(f"{prefix}.hello", b"nope", partition=0, on_delivery=lambda error, _: delivered.append(error))
    wrong.flush(5)
    assert None not in delivered and read_partition(target, f"{prefix}.hello", 0) == sent


def test_replicate_copies_between_sasl_ssl_clusters_record_for_record(
    secured: dict[str, LocalBroker], prefix: str, tmp_path: Path
) -> None:
    topic, sent = source_topic(secured, prefix)
    config = mm2_file(tmp_path, secured, prefix)
    started = time.monotonic()
    result = airmirror("replicate", str(config), "--flow", "a->b")
    assert result.returncode == 0, result.stderr
    print(f"replicate took {time.monotonic() - started:.1f} s:\n{result.stdout}")
    for partition, records in sent.items():
        assert read_partition(secured["b"], f"a.{topic}", partition) == records
    for secret in (SOURCE_USER[1], TARGET_USER[1]):
        assert secret not in result.stdout + result.stderr


@dataclass(frozen=True)
class FailedRun:
    """One ``airmirror replicate`` with bad target credentials, and what the target's remote topic holds after it."""

    result: subprocess.CompletedProcess[str]
    seconds: float
    records_on_target: int
    secret: str | None


@pytest.fixture(scope="module")
def failed_runs(secured: dict[str, LocalBroker], tmp_path_factory: pytest.TempPathFactory) -> dict[str, FailedRun]:
    """Each bad-target case, run once: a wrong password, and a trust store holding another cluster's CA."""
    other_ca = secured["a"].security.tls.ca_certificate
    assert other_ca.read_bytes() != secured["b"].security.tls.ca_certificate.read_bytes()
    cases = {
        "wrong-password": (security_lines("b", secured["b"], password="wrong-Password"), "wrong-Password"),
        "untrusted-certificate": (security_lines("b", secured["b"], ca=other_ca), None),
    }
    runs = {}
    for case, (target_lines, secret) in cases.items():
        prefix = f"t{uuid.uuid4().hex[:8]}"
        topic, _ = source_topic(secured, prefix)
        config = mm2_file(tmp_path_factory.mktemp(case), secured, prefix, target_lines)
        started = time.monotonic()
        result = airmirror("replicate", str(config), "--flow", "a->b")
        seconds = time.monotonic() - started
        runs[case] = FailedRun(result, seconds, records_in(secured["b"], f"a.{topic}"), secret)
        error = [line for line in result.stderr.splitlines() if line.startswith("airmirror: error:")]
        shown = error[-1] if error else result.stderr[-2000:]
        print(f"{case}: exit {result.returncode} after {seconds:.1f} s; {shown}")
    return runs


CASES = ["wrong-password", "untrusted-certificate"]


@pytest.mark.parametrize("case", CASES)
def test_bad_target_credentials_fail_the_run_and_write_nothing(failed_runs: dict[str, FailedRun], case: str) -> None:
    run = failed_runs[case]
    assert run.result.returncode == 1, run.result.stderr[-2000:]
    assert run.records_on_target == 0
    assert any(line.startswith("airmirror: error:") for line in run.result.stderr.splitlines())
    if run.secret is not None:
        assert run.secret not in run.result.stdout + run.result.stderr


@pytest.mark.parametrize(("case", "cause"), [("wrong-password", "Authentication failed"), ("untrusted-certificate", "certificate verify failed")])
def test_bad_target_credentials_fail_naming_the_target_cluster_and_the_cause(
    secured: dict[str, LocalBroker], failed_runs: dict[str, FailedRun], case: str, cause: str
) -> None:
    stderr = failed_runs[case].result.stderr
    errors = [line for line in stderr.splitlines() if line.startswith("airmirror: error:")]
    assert errors, stderr[-2000:]
    assert f"cannot reach cluster 'b' ({secured['b'].bootstrap}): " in errors[-1], errors[-1]
    assert cause in errors[-1], errors[-1]


# --- brokers replicating to each other over a secured listener ------------------------------------------------


def free_port_run(count: int) -> int:
    while True:
        first = free_port()
        if all(port_is_free(port) for port in range(first + 1, first + count)):
            return first


@pytest.mark.parametrize("protocol", ["SSL", "SASL_PLAINTEXT"])
def test_two_node_cluster_replicates_over_its_secured_listener(protocol: str, test_home: Path, prefix: str) -> None:
    name = f"secured-pair-{protocol.lower().replace('_', '-')}"
    try:
        pair = start_broker(name, free_port_run(2), brokers=2, security=protocol, home=test_home)
        topic = f"{prefix}.pair"
        create_topic(pair, topic, 1, replicas=2, **{"min.insync.replicas": "2"})
        sent = sample_records(50, prefix=prefix)
        produce(pair, topic, 0, sent, acks="all")
        assert read_partition(pair, topic, 0) == sent
        partition = AdminClient(pair.client_config()).list_topics(topic, timeout=10).topics[topic].partitions[0]
        assert sorted(partition.replicas) == sorted(partition.isrs) == [1, 2]
    finally:
        stop_broker(name, home=test_home)
