"""Secured local clusters of their own: SASL_SSL with SCRAM-SHA-512 (started with the CLI) and with PLAIN, and
two-node clusters whose brokers replicate to each other over SSL and over SASL_PLAINTEXT (SCRAM).

Checked, with an MM2 file holding only MM2's own security keys (the source's CA in a PKCS12 trust store, the
target's in a PEM file): replicate, status, heartbeat, checkpoint with group offset sync and translate between two
SASL_SSL clusters, record for record; a copy killed with kill -9 mid-write resumes exactly once; a wrong target
password and a target certificate of another CA each fail the run with exit 1, naming the target cluster and the
cause, having written nothing to it.  (The DAG run is in tests/airflow/test_secured_flow_run.py.)"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from airmirror.devtools.local_kafka import LocalBroker, free_port, start_broker, stop_broker
from airmirror.devtools.local_kafka.nodes import port_is_free
from airmirror.mm2.wire_formats import Checkpoint, Heartbeat
from tests.cli_helpers import airmirror_process
from tests.kafka_helpers import Record, recent_ms, sample_records
from tests.polling import wait_until
from tests.secured_clusters import (
    PARTITIONS,
    RECORDS_PER_PARTITION,
    SECRETS,
    commit_offsets,
    create_topic,
    group_offsets,
    mm2_file,
    produce,
    read_partition,
    records_in,
    secured_clusters,
    security_lines,
    source_topic,
)

pytestmark = pytest.mark.integration

SOURCE, TARGET = "secured-a", "secured-b"
QUIET = logging.getLogger("tests.secured_brokers.refused_client")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False


airmirror = airmirror_process


@pytest.fixture(scope="module")
def secured(test_home: Path) -> Iterator[dict[str, LocalBroker]]:
    with secured_clusters(test_home, (SOURCE, TARGET)) as clusters:
        yield clusters


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


def run_json(*args: str) -> dict:
    """One verb of the CLI with ``--json``: its exit 0, its JSON, and no secret in its output."""
    result = airmirror(*args, "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    assert not any(secret in result.stdout + result.stderr for secret in SECRETS)
    return json.loads(result.stdout)


def test_every_feature_runs_between_sasl_ssl_clusters(
    secured: dict[str, LocalBroker], prefix: str, tmp_path: Path
) -> None:
    """replicate, status, heartbeat, checkpoint with group offset sync and translate, with MM2's own keys only
    (the source trusts its CA through a PKCS12 trust store, the target through a PEM file)."""
    source, target = secured["a"], secured["b"]
    topic, sent = source_topic(secured, prefix)
    group = f"{prefix}-billing"
    commit_offsets(source, group, {(topic, 0): 120, (topic, 1): RECORDS_PER_PARTITION})
    config = str(mm2_file(tmp_path, secured, prefix, extra="sync.group.offsets.enabled = true"))

    started = time.monotonic()
    copied = run_json("replicate", config, "--flow", "a->b")
    print(f"replicate took {time.monotonic() - started:.1f} s: {copied}")
    for partition, records in sent.items():
        assert read_partition(target, f"a.{topic}", partition) == records

    status = run_json("status", config, "--flow", "a->b")
    assert status["total_lag"] == 0
    assert {(p["topic"], p["partition"], p["cursor"]) for p in status["partitions"]} == {
        (topic, p, RECORDS_PER_PARTITION) for p in range(PARTITIONS)
    }

    heartbeat = run_json("heartbeat", config, "--flow", "a->b")
    [written] = [Heartbeat.decode(r.key, r.value) for r in read_partition(target, heartbeat["topic"], 0)]
    assert (written.source_alias, written.target_alias) == ("a", "b")

    checkpoints = run_json("checkpoint", config, "--flow", "a->b")
    assert checkpoints["written"] == PARTITIONS, checkpoints
    translated = run_json("translate", config, "--flow", "a->b", "--group", group)
    expected = {p["partition"]: p["target_offset"] for p in translated["partitions"]}
    assert None not in expected.values() and set(expected) == set(range(PARTITIONS)), translated
    assert group_offsets(target, group, f"a.{topic}", PARTITIONS) == expected
    remote = [Checkpoint.decode(r.key, r.value) for r in read_partition(target, "a.checkpoints.internal", 0)]
    assert {(c.group, c.partition, c.downstream_offset) for c in remote} == {
        (group, p, offset) for p, offset in expected.items()
    }


def bulk_records(label: str, count: int) -> list[Record]:
    base = recent_ms()
    return [
        Record(f"{label}-{i}".encode(), bytes(range(256)) + i.to_bytes(4, "big"), (), base + i) for i in range(count)
    ]


def uncommitted_end(broker: LocalBroker, topic: str, partition: int) -> int:
    """The target partition's high watermark counting records of open transactions (0 before the topic exists)."""
    consumer = Consumer(
        {**broker.client_config(), "group.id": "airmirror-test-hw", "isolation.level": "read_uncommitted"}
    )
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
    except KafkaException:
        return 0
    finally:
        consumer.close()


def test_a_copy_killed_mid_write_resumes_exactly_once_over_sasl_ssl(
    secured: dict[str, LocalBroker], prefix: str, tmp_path: Path
) -> None:
    """kill -9 of the whole replicate process group while chunk transactions commit on the secured target; the
    next run resumes: every target partition equals its source, nothing lost, nothing twice."""
    source, target = secured["a"], secured["b"]
    topic, count = f"{prefix}.bulk", 20_000
    create_topic(source, topic, PARTITIONS)
    for partition in range(PARTITIONS):
        produce(source, topic, partition, bulk_records(f"{partition}", count))
    config = str(mm2_file(tmp_path, secured, prefix, extra="airmirror.transaction.max.records = 1000"))
    process = subprocess.Popen(
        [sys.executable, "-m", "airmirror.cli", "replicate", config, "--flow", "a->b"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_until(lambda: uncommitted_end(target, f"a.{topic}", 0) > 2000 or process.poll() is not None, 300, "writes")
        assert process.poll() is None, "the batch finished before the fault could be injected"
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        process.wait(60)
    assert records_in(target, f"a.{topic}") < PARTITIONS * count
    resumed = airmirror("replicate", config, "--flow", "a->b")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    for partition in range(PARTITIONS):
        assert read_partition(target, f"a.{topic}", partition) == read_partition(source, topic, partition)


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


@pytest.mark.parametrize(
    ("case", "cause"),
    [("wrong-password", "Authentication failed"), ("untrusted-certificate", "certificate verify failed")],
)
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
