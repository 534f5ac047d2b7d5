"""A sick partition stays alone (issue: never twice, never stuck), on a real three-node source cluster and Spark.

Each partition of the topic has one replica, on a node of its own.  The node holding partition 1 is killed, or
frozen (SIGSTOP, a stopped VM: its sockets stay open and it answers nothing until the controllers fence it), and a
live run is started during the outage: its plan leaves partition 1 where it stands, ``status`` names it waiting for a
leader (since when, from the metadata DB), and the other partitions stream with a lag far under a minute.  The node
comes back (started again, or thawed): the stream notices the leader, ends, and the next one copies partition 1
too, by itself.  The target then equals the source record for record.
"""

from __future__ import annotations

import json
import os
import signal
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
from tests.cli_helpers import airmirror_process
from tests.conftest import write_config
from tests.kafka_helpers import end_offset, records_of
from tests.multi_node import running_nodes
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NODES = PARTITIONS = 3
SICK = 1
"""The partition whose only replica's node is down (node ``SICK + 1``)."""
HEALTHY = [p for p in range(PARTITIONS) if p != SICK]
MAX_LAG_S = 60
LIVE_WINDOW = ("--continuous", "--for", "150s")


@pytest.fixture(scope="module")
def source3(test_home: Path) -> Iterator[LocalBroker]:
    with running_nodes("leaderless-src", NODES, test_home) as cluster:
        yield cluster


class Writer(threading.Thread):
    """Writes numbered records to the partitions in :attr:`partitions`, a few hundred a second, until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.topic, self.partitions = topic, list(range(PARTITIONS))
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
        self.halt = threading.Event()
        self.sent = 0

    def run(self) -> None:
        while not self.halt.is_set():
            for partition in list(self.partitions):
                self.producer.produce(
                    self.topic, f"v{self.sent}".encode() * 10, f"k{self.sent}".encode(), partition=partition
                )
                self.sent += 1
            self.producer.poll(0)
            time.sleep(0.01)
        assert self.producer.flush(60) == 0

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=120)


def committed_ends(bootstrap: str, topic: str, partitions: list[int]) -> dict[int, int]:
    return {p: end_offset(bootstrap, topic, p, committed=True) for p in partitions}


@pytest.mark.parametrize("outage", ["killed", "frozen"])
def test_a_partition_without_a_leader_waits_alone_and_goes_on_by_itself(source3, clusters, prefix, tmp_path, outage):
    a, b = source3.bootstrap, clusters["b"].bootstrap
    topic, remote = f"{prefix}.sick", f"a.{prefix}.sick"
    admin = AdminClient({"bootstrap.servers": a})  # held until the answer came
    admin.create_topics([NewTopic(topic, PARTITIONS, replica_assignment=[[p + 1] for p in range(PARTITIONS)])])[
        topic
    ].result()
    config = write_config(
        tmp_path / "mm2.properties",
        {"a": source3, "b": clusters["b"]},
        f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.spark.master = local[2]",
    )
    writer = Writer(a, topic)
    writer.start()
    time.sleep(2)
    writer.partitions = HEALTHY
    time.sleep(1)
    down, back = source3.kill_node, source3.start_node
    if outage == "frozen":
        down, back = source3.freeze_node, source3.thaw_node
    down(SICK + 1)
    with (tmp_path / "live.log").open("w") as output:
        live = subprocess.Popen(
            [sys.executable, "-m", "airmirror.cli", "-v", "replicate", str(config), "--flow", "a->b", *LIVE_WINDOW],
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        for _ in range(3):  # the healthy partitions keep up while the sick one has no leader
            time.sleep(10)
            wanted = committed_ends(a, topic, HEALTHY)
            wait_until(
                lambda wanted=wanted: all(end_offset(b, remote, p, committed=True) >= wanted[p] for p in HEALTHY),
                MAX_LAG_S,
                "the healthy partitions to keep up",
            )
        status = airmirror_process("status", str(config), "--flow", "a->b", "--json")
        assert status.returncode == 0, status.stderr[-3000:]
        (waiting,) = json.loads(status.stdout)["waiting_for_leader"]
        assert (waiting["topic"], waiting["partition"]) == (topic, SICK) and waiting["since"], waiting
        assert live.poll() is None, "the live run keeps running"

        back(SICK + 1)
        writer.partitions = list(range(PARTITIONS))
        time.sleep(5)
        wait_until(lambda: end_offset(b, remote, SICK, committed=True) > 0, 90, "the sick partition to be copied again")
    finally:
        if outage == "frozen":
            source3.thaw_node(SICK + 1)  # a second SIGCONT does nothing
        writer.stop()
        if live.poll() is None:
            os.kill(live.pid, signal.SIGTERM)  # the driver: it ends the stream and commits it
        live.wait(timeout=300)
    log = (tmp_path / "live.log").read_text()
    assert live.returncode == 0, log[-4000:]
    assert f"{topic}-{SICK} has no leader" in log
    last = airmirror_process("replicate", str(config), "--flow", "a->b")
    assert last.returncode == 0, last.stderr[-4000:]
    for partition in range(PARTITIONS):
        assert records_of(b, remote, partition) == records_of(a, topic, partition)
