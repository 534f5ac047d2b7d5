"""Exactly-once across a leader failover on the SOURCE cluster.

The source is a cluster of three nodes; the topic has three replicas on each partition and
``min.insync.replicas=1``.  Producers with ``acks=1`` keep writing unique records the whole time.  A large
backlog is copied through the real CLI in bounded transactions, and while the batch is in flight the
leader of partition 0 is killed with SIGKILL: the range reads of the partitions it led must follow the new
leader (whose high watermark may lag for a moment, see :mod:`airmirror.replication.spark.range_reader`).  The
run is retried until it succeeds, the node is restarted, the producers stop, and replicate runs until a
run copies nothing.  Then every target partition must equal its source partition record for record (key,
value, headers, timestamp), in order: no hole, no duplicate.

With ``acks=1`` the source itself may lose records the killed leader had acknowledged but not replicated;
those were never below the high watermark, so never copied, and the comparison is against what the source
holds at the end.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from airmirror.devtools.local_kafka import LocalBroker
from tests.conftest import write_config
from tests.kafka_helpers import end_offset, records_of
from tests.multi_node import running_nodes

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NODES = 3
PARTITIONS = 3
BACKLOG = 210_000
LIVE_RATE = 600  # records per second written by the background producers, over all partitions


@pytest.fixture(scope="module")
def source3(test_home: Path) -> Iterator[LocalBroker]:
    with running_nodes("failover-src", NODES, test_home) as cluster:
        yield cluster


def partition_state(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int]]]:
    """Per partition: its leader and in-sync replicas (node ids)."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p: (m.leader, sorted(m.isrs)) for p, m in metadata.topics[topic].partitions.items()}


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except Exception:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def write_backlog(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all", "batch.size": 1024 * 1024})
    failures: list[object] = []
    for i in range(BACKLOG):
        p = i % PARTITIONS
        while True:
            try:
                producer.produce(
                    topic,
                    f"backlog-{p}-{i}".encode() + bytes(48),
                    f"k{i}".encode(),
                    partition=p,
                    headers=[("seq", str(i).encode())],
                    on_delivery=lambda error, _: error is not None and failures.append(error),
                )
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(120) == 0 and not failures, failures[:3]


class LiveProducers:
    """A background thread producing unique records with ``acks=1`` to every partition, timestamps = now."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 10})
        self.sent = self.delivered = self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="live-producers", daemon=True)
        self._thread.start()

    def _report(self, error, _message) -> None:
        if error is None:
            self.delivered += 1
        else:
            self.failed += 1

    def _run(self) -> None:
        seq = 0
        pause = 0.05
        per_tick = max(1, int(LIVE_RATE * pause))
        while not self._stop.is_set():
            for _ in range(per_tick):
                p = seq % PARTITIONS
                try:
                    self.producer.produce(
                        self.topic,
                        f"live-{p}-{seq}".encode(),
                        f"live-k{seq}".encode(),
                        partition=p,
                        headers=[("live", str(seq).encode())],
                        on_delivery=self._report,
                    )
                    seq += 1
                    self.sent = seq
                except BufferError:
                    break
            self.producer.poll(0)
            time.sleep(pause)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.producer.flush(120)


def start_cli(config: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "airmirror.cli", "replicate", str(config), "--flow", "a->b", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def finish(process: subprocess.Popen) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=600)
    return process.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def run_until_success(config: Path, attempts: int = 3) -> dict:
    """Run replicate until a run exits 0; returns that run's JSON report."""
    for attempt in range(attempts):
        code, out, err = finish(start_cli(config))
        if code == 0:
            return json.loads(out)
        print(f"replicate attempt {attempt + 1} failed with exit {code}:\n{err[-4000:]}")
    raise AssertionError(f"replicate did not succeed in {attempts} attempts")


def test_source_leader_killed_mid_batch(source3, clusters, prefix, tmp_path):
    a, b = source3.bootstrap, clusters["b"].bootstrap
    topic, remote = f"{prefix}.failover", f"a.{prefix}.failover"
    admin = AdminClient({"bootstrap.servers": a})
    admin.create_topics([NewTopic(topic, PARTITIONS, NODES, config={"min.insync.replicas": "1"})])[topic].result()
    wait_until(
        lambda: all(leader > 0 and isr == [1, 2, 3] for leader, isr in partition_state(a, topic).values()),
        60,
        "every partition to have a leader and three in-sync replicas",
    )
    config = write_config(
        tmp_path / "mm2.properties",
        {"a": source3, "b": clusters["b"]},
        f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.spark.master = local[2]\n"
        "airmirror.transaction.max.records = 5000",
    )
    write_backlog(a, topic)
    live = LiveProducers(a, topic)
    killed: int | None = None
    try:
        process = start_cli(config)
        wait_until(
            lambda: end_offset(b, remote, 0) > 2000 or process.poll() is not None,
            300,
            "writes to partition 0",
        )
        assert process.poll() is None, "the batch finished before the fault could be injected"
        killed = partition_state(a, topic)[0][0]
        source3.kill_node(killed)
        at_kill = end_offset(b, remote, 0)
        print(f"killed node {killed}, the leader of partition 0, with {at_kill} records written to {remote}-0")
        assert at_kill < BACKLOG // PARTITIONS, "partition 0 was copied before its leader was killed"
        wait_until(lambda: partition_state(a, topic)[0][0] not in (killed, -1), 60, "a new leader of partition 0")

        code, _, err = finish(process)
        print(f"the run in flight during the failover exited {code}:\n{err[-4000:]}")
        if code != 0:
            run_until_success(config)

        source3.start_node(killed)
        wait_until(
            lambda: all(isr == [1, 2, 3] for _, isr in partition_state(a, topic).values()),
            120,
            f"node {killed} to rejoin every partition's in-sync replicas",
        )
    finally:
        live.stop()
        if killed is not None:
            source3.start_node(killed)
    print(f"live producers: {live.sent} sent, {live.delivered} delivered, {live.failed} failed")
    assert live.delivered > 0

    copied = []
    for _ in range(5):
        report = run_until_success(config)
        copied.append(report["records"])
        if report["records"] == 0:
            break
    print(f"records copied by the catch-up runs: {copied}")
    assert copied[-1] == 0, f"replicate never caught up: records copied per run {copied}"

    for p in range(PARTITIONS):
        source, target = records_of(a, topic, p), records_of(b, remote, p)
        assert len(source) >= BACKLOG // PARTITIONS
        assert any(r.value.startswith(b"live-") for r in source), "no record written during the test survived"
        assert len(target) == len(source), (
            f"partition {p}: {len(target)} records on the target, {len(source)} on the source"
        )
        mismatch = next((i for i, (s, t) in enumerate(zip(source, target, strict=True)) if s != t), None)
        assert mismatch is None, (
            f"partition {p} differs first at index {mismatch}: source {source[mismatch]}, target {target[mismatch]}"
        )
