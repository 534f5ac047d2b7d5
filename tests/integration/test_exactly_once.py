"""Exactly-once under real faults: kill -9 of Spark workers and of the job, a broker restart, a DB lock,
a deleted or overwritten anchor group.

Each test copies one large batch through the real CLI (a separate process with its own Spark JVM), injects
the fault while the batch is in flight, lets the next run resume, and then checks that every target
partition equals its source partition record for record (as a transform chain leaves it, where the flow has one):
nothing lost, nothing duplicated, same order.
Transactions are bounded to a few thousand records, so every range is copied in several chunk
transactions and a fault mid-range leaves some of them committed: a resume that started the range again
would duplicate them.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from airmirror import names
from airmirror.config import FlowConfig, load_config
from airmirror.devtools.local_kafka import LocalBroker, free_port, start_broker, stop_broker
from airmirror.model import NoJobYet
from airmirror.replication.spark.batch_log import read_anchors
from airmirror.store import MetadataStore
from tests.conftest import write_config
from tests.kafka_helpers import Record, create_topic, end_offset, produce, recent_ms, records_of
from tests.polling import wait_until
from tests.spark_workers import python_workers_of

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 4
RECORDS_PER_PARTITION = 40_000


def load_source(bootstrap: str, topic: str) -> None:
    """Every record has a ``seq`` header; every tenth a ``drop`` header too (for :data:`CHAIN`)."""
    create_topic(bootstrap, topic, PARTITIONS)
    payload = bytes(range(256)) * 2
    base = recent_ms()
    for p in range(PARTITIONS):
        produce(
            bootstrap,
            topic,
            p,
            [
                Record(
                    f"{p}-{i}".encode(),
                    payload + i.to_bytes(4, "big"),
                    (("seq", str(i).encode()), *((("drop", b"1"),) if i % 10 == 0 else ())),
                    base + i,
                )
                for i in range(RECORDS_PER_PARTITION)
            ],
        )


T = "org.apache.kafka.connect.transforms."
CHAIN = f"""
a->b.transforms = drop, strip, tag
a->b.transforms.drop.type = {T}Filter
a->b.transforms.drop.predicate = marked
a->b.transforms.strip.type = {T}DropHeaders
a->b.transforms.strip.headers = seq
a->b.transforms.tag.type = {T}InsertHeader
a->b.transforms.tag.header = copy
a->b.transforms.tag.value.literal = dr
a->b.predicates = marked
a->b.predicates.marked.type = {T}predicates.HasHeaderKey
a->b.predicates.marked.name = drop
"""
"""A transform chain: every tenth record dropped, the others' headers changed."""


def transformed(record: Record) -> Record | None:
    """What :data:`CHAIN` makes of a record of :func:`load_source`, written out by hand."""
    if any(name == "drop" for name, _ in record.headers):
        return None
    return Record(record.key, record.value, (("copy", b"dr"),), record.timestamp)


def start_cli(config: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "airmirror.cli", "replicate", str(config), "--flow", "a->b"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def run_until_success(config: Path, attempts: int = 3) -> None:
    for _ in range(attempts):
        process = start_cli(config)
        output, _ = process.communicate(timeout=600)
        if process.returncode == 0:
            return
        print(output.decode(errors="replace"))
    raise AssertionError(f"replicate did not succeed in {attempts} attempts")


def assert_exact_copy(clusters, topic: str, chain: Callable[[Record], Record | None] | None = None) -> None:
    """The target equals the source, record for record, or, with ``chain``, the source as it transforms it."""
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    for p in range(PARTITIONS):
        source, target = records_of(a, topic, p), records_of(b, f"a.{topic}", p)
        assert len(source) == RECORDS_PER_PARTITION
        expected = source if chain is None else [kept for record in source if (kept := chain(record)) is not None]
        assert len(target) == len(expected)
        assert target == expected


def assert_db_caught_up(config: Path, topic: str) -> None:
    flow = load_config(config).flow("a->b")
    store = MetadataStore.open(flow.metadata_db_url)
    try:
        assert store.unfinished_batch(flow.name) is None
        cursors = store.cursors(flow.name)
        assert {k.partition: v for k, v in cursors.items() if k.topic == topic} == {
            p: RECORDS_PER_PARTITION for p in range(PARTITIONS)
        }
    finally:
        store.dispose()


def bulk_flow(clusters: dict[str, LocalBroker], prefix: str, tmp_path: Path, extra: str = "") -> tuple[Path, str]:
    topic = f"{prefix}.bulk"
    load_source(clusters["a"].bootstrap, topic)
    config = write_config(
        tmp_path / "mm2.properties",
        clusters,
        f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.spark.master = local[2]\n"
        "airmirror.transaction.max.records = 5000" + extra,
    )
    return config, topic


@pytest.fixture
def flow_config(clusters, prefix, tmp_path) -> tuple[Path, str]:
    return bulk_flow(clusters, prefix, tmp_path)


@pytest.fixture(scope="module")
def expiring_target(test_home) -> Iterator[LocalBroker]:
    """A target cluster that drops the committed offsets of empty groups one minute after their commit."""
    name = "b-expiring-offsets"
    settings = {"offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "1000"}
    try:
        yield start_broker(name, free_port(), broker_config=settings, home=test_home)
    finally:
        stop_broker(name, home=test_home)


def test_spark_worker_killed_mid_write_of_a_transformed_copy(clusters, prefix, tmp_path):
    config, topic = bulk_flow(clusters, prefix, tmp_path, CHAIN)
    process = start_cli(config)
    wait_until(
        lambda: end_offset(clusters["b"].bootstrap, f"a.{topic}", 0) > 1000 or process.poll() is not None, 300, "writes"
    )
    assert process.poll() is None, "the batch finished before the fault could be injected"
    killed = python_workers_of(process)
    assert killed
    for worker in killed:
        worker.kill()
    process.communicate(timeout=600)
    if process.returncode != 0:
        run_until_success(config)
    assert_exact_copy(clusters, topic, transformed)
    assert_db_caught_up(config, topic)


def lose_anchors(flow: FlowConfig, topic: str, how: str) -> None:
    """Make the anchor group useless the way brokers, operators and other clients do: let its offsets expire,
    delete it, or commit over it."""
    group, bootstrap = names.anchor_group("a", "b"), flow.target_client("consumer")["bootstrap.servers"]
    remote = [(topic, p) for p in range(PARTITIONS)]
    if how == "expired":
        wait_until(
            lambda: all(a is None for a in read_anchors(flow.target_client("consumer"), group, remote).values()),
            300,
            "the anchor offsets to expire",
        )
    elif how == "deleted":
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.delete_consumer_groups([group], request_timeout=30)[group].result(timeout=60)
    elif how == "overwritten":
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            consumer.commit(offsets=[TopicPartition(topic, p, 1) for p in range(PARTITIONS)], asynchronous=False)
        finally:
            consumer.close()


def kill_after_kafka_commit_and_resume(
    clusters: dict[str, LocalBroker], config: Path, topic: str, anchors: str
) -> None:
    """Kill the job once every range is committed in Kafka but before the DB commit (held locked from the start
    of the copy job on), do
    ``anchors`` to the anchor group, then resume until success and compare."""
    flow = load_config(config).flow("a->b")
    db_path = flow.metadata_db_url.removeprefix("sqlite:///")
    process = start_cli(config)
    store = MetadataStore.open(flow.metadata_db_url)
    wait_until(
        lambda: (batch := store.unfinished_batch(flow.name)) is not None and batch.jobs != NoJobYet(),
        300,
        "the batch's copy job to start (its copy tasks recorded)",
    )
    batch_id = store.unfinished_batch(flow.name).id
    store.dispose()
    lock = sqlite3.connect(db_path, isolation_level=None, timeout=60)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        remote = [(f"a.{topic}", p) for p in range(PARTITIONS)]
        consumer_config = flow.target_client("consumer")
        wait_until(
            lambda: all(
                a is not None and a.batch_id == batch_id and a.done
                for a in read_anchors(consumer_config, names.anchor_group("a", "b"), remote).values()
            ),
            300,
            "every partition to commit in Kafka",
        )
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
        lose_anchors(flow, f"a.{topic}", anchors)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    store = MetadataStore.open(flow.metadata_db_url)
    assert store.unfinished_batch(flow.name).id == batch_id
    store.dispose()

    run_until_success(config)

    assert_exact_copy(clusters, topic)
    assert_db_caught_up(config, topic)


@pytest.mark.parametrize("anchors", ["kept", "deleted", "overwritten"])
@pytest.mark.proves("task_writer rule 13")
def test_job_killed_after_kafka_commit_before_db_commit(clusters, flow_config, anchors):
    """Resuming after the Kafka commit copies nothing again, even when the anchor group was deleted or
    another client committed over it: the batch log's progress records are the truth."""
    config, topic = flow_config
    kill_after_kafka_commit_and_resume(clusters, config, topic, anchors)


def test_resume_after_the_anchors_expired(clusters, expiring_target, prefix, tmp_path):
    """The target drops the anchor offsets (``offsets.retention.minutes=1``) while the DB commit is
    blocked; the resumed batch still copies nothing twice."""
    both = {"a": clusters["a"], "b": expiring_target}
    config, topic = bulk_flow(both, prefix, tmp_path)
    kill_after_kafka_commit_and_resume(both, config, topic, "expired")


def test_target_broker_restarted_mid_batch(clusters, flow_config):
    config, topic = flow_config
    process = start_cli(config)
    wait_until(
        lambda: end_offset(clusters["b"].bootstrap, f"a.{topic}", 0) > 1000 or process.poll() is not None, 300, "writes"
    )
    assert process.poll() is None, "the batch finished before the fault could be injected"
    clusters["b"].restart()
    process.communicate(timeout=600)
    if process.returncode != 0:
        run_until_success(config)
    assert_exact_copy(clusters, topic)
    assert_db_caught_up(config, topic)
