"""A source log truncated by an unclean leader election, on a real three-node cluster: leader epochs locate
where the logs diverged, and the flow continues exactly there.

Partition 0 of the source topic has two replicas.  The follower is killed, so records 100..149 exist only on
the leader; they are copied.  Then the leader is killed and the stale follower is elected uncleanly: its log
ends at 100 and the producers write 80 new records at offsets 100..179, past the old cursor 150.  Without
leader epochs the next run would see a cursor below the log end and copy from 150, skipping 100..149 of the new
lineage.  With them, the cursor (150, epoch of record 149) fails validation at the new leader, the run starts
at 100, and the reset is recorded.  The target then holds every record of both lineages once, and a group
offset below the divergence point still translates exactly.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from airmirror.checkpoints.translate_view import inspect_group
from airmirror.config import load_config
from airmirror.devtools.local_kafka import LocalBroker
from airmirror.errors import ReplicationFailure
from airmirror.model import BatchState, PartitionKey
from airmirror.replication.spark.range_reader import RangeReader
from airmirror.store import MetadataStore
from tests.conftest import write_config
from tests.integration.test_incarnations import cli
from tests.integration.test_leader_failover import partition_state, wait_until
from tests.kafka_helpers import Record, SteadyProducer, produce, read_partition, records_of
from tests.mirror_helpers import commit_offsets, opened, replicate, unique_records
from tests.multi_node import running_nodes

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NODES = 3
DUO = [2, 3]  # the replicas of the topic's one partition; node 1 only keeps the quorum


@pytest.fixture(scope="module")
def source3(test_home: Path) -> Iterator[LocalBroker]:
    with running_nodes("unclean-src", NODES, test_home, {"replica.lag.time.max.ms": "2000"}) as cluster:
        yield cluster


def elect_uncleanly(bootstrap: str, topic: str, new_leader: int) -> None:
    """Make ``new_leader`` (not in sync) lead: an unclean election, asked again while the controller quorum
    is still settling after the kills."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait_until(lambda: partition_state(bootstrap, topic)[0][0] in (new_leader, -1), 60, "the old leader to be gone")

    def elected() -> bool:
        if partition_state(bootstrap, topic)[0][0] != new_leader:
            admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition(topic, 0)], request_timeout=10).result()
        return partition_state(bootstrap, topic)[0][0] == new_leader

    wait_until(elected, 120, f"node {new_leader} to lead")


@dataclass
class Diverged:
    """A partition whose log diverged at 100 under a cursor at 150: ``first`` (0..99) and ``divergent``
    (100..149) were copied, the uncleanly elected ``follower`` then got ``new`` at 100..179; ``leader`` is down."""

    first: list[Record]
    divergent: list[Record]
    new: list[Record]
    leader: int


def diverge(source3: LocalBroker, topic: str, config: Path, spark) -> Diverged:
    a = source3.bootstrap
    for node in source3.status().nodes:
        if not node.running:
            source3.start_node(node.node_id)
    admin = AdminClient({"bootstrap.servers": a})
    admin.create_topics(
        [
            NewTopic(
                topic,
                1,
                replica_assignment=[DUO],
                config={"min.insync.replicas": "1", "unclean.leader.election.enable": "true"},
            )
        ]
    )[topic].result()
    wait_until(lambda: partition_state(a, topic)[0][1] == DUO, 60, "both replicas in sync")
    first = unique_records(f"{topic}-first", 100)
    produce(a, topic, 0, first)
    assert replicate(config, spark).summary.records == 100

    leader = partition_state(a, topic)[0][0]
    follower = next(node for node in DUO if node != leader)
    source3.kill_node(follower)
    wait_until(
        lambda: partition_state(a, topic)[0][1] == [leader], 60, f"node {follower} to leave the in-sync replicas"
    )
    divergent = unique_records(f"{topic}-divergent", 50)
    produce(a, topic, 0, divergent)
    assert replicate(config, spark).summary.records == 50

    source3.kill_node(leader)
    source3.start_node(follower)
    elect_uncleanly(a, topic, follower)
    new = unique_records(f"{topic}-new", 80)
    produce(a, topic, 0, new)
    assert records_of(a, topic, 0) == first + new
    return Diverged(first, divergent, new, leader)


def rejoin(source3: LocalBroker, topic: str, node: int) -> None:
    source3.start_node(node)
    wait_until(lambda: partition_state(source3.bootstrap, topic)[0][1] == DUO, 120, f"node {node} to rejoin, truncated")


def flow_config(source3: LocalBroker, clusters, tmp_path: Path, topic: str, extra: str = "") -> Path:
    return write_config(
        tmp_path / "mm2.properties",
        {"a": source3, "b": clusters["b"]},
        f"a->b.enabled = true\ntopics = {topic}\nairmirror.spark.master = local[1]\n{extra}",
    )


def test_unclean_election_is_followed_from_the_divergence_point(source3, clusters, spark, prefix, tmp_path):
    a, b = source3.bootstrap, clusters["b"].bootstrap
    topic, remote = f"{prefix}.unclean", f"a.{prefix}.unclean"
    config = flow_config(source3, clusters, tmp_path, topic)
    d = diverge(source3, topic, config, spark)

    listed = cli("status", str(config), "--flow", "a->b", "--json")
    assert listed.returncode == 0, listed.stderr
    status = json.loads(listed.stdout)
    row = next(p for p in status["partitions"] if p["topic"] == topic)
    assert (row["cursor"], row["lag"], row["source_reset"]) == (150, 80, "truncated")

    assert replicate(config, spark).summary.records == 80
    assert records_of(b, remote, 0) == d.first + d.divergent + d.new
    with opened(config) as (flow, store):
        resets = store.source_resets(flow.name)
        assert [(r.topic, r.partition, r.old_cursor, r.new_start) for r in resets] == [(topic, 0, 150, 100)]
        runs = store.offset_runs(flow.name, PartitionKey(topic, 0))
        assert [(r.upstream_start, r.upstream_end) for r in runs] == [(0, 100), (100, 180)]
        commit_offsets(a, f"{prefix}-below", {(topic, 0): 60})
        commit_offsets(a, f"{prefix}-above", {(topic, 0): 130})
        below = inspect_group(flow, store, f"{prefix}-below").partitions[0]
        above = inspect_group(flow, store, f"{prefix}-above").partitions[0]
    target = dict(read_partition(b, remote, 0))
    assert (target[runs[0].downstream_start], target[runs[1].downstream_start]) == (d.first[0], d.new[0])
    assert target[below.target_offset] == d.first[60]
    assert target[above.target_offset] == d.new[30]

    rejoin(source3, topic, d.leader)
    last = unique_records("last", 10)
    produce(a, topic, 0, last)
    assert replicate(config, spark).summary.records == 10
    assert replicate(config, spark).summary is None
    assert records_of(b, remote, 0) == d.first + d.divergent + d.new + last


def test_fail_policy_stops_the_truncated_partition_until_reset(source3, clusters, spark, prefix, tmp_path):
    b = clusters["b"].bootstrap
    topic, remote = f"{prefix}.strict", f"a.{prefix}.strict"
    config = flow_config(source3, clusters, tmp_path, topic, "airmirror.source.reset.policy = fail")
    d = diverge(source3, topic, config, spark)
    try:
        with opened(config) as (flow, store):
            cursor = store.cursor_states(flow.name)[PartitionKey(topic, 0)]
            assert (cursor.next_offset, cursor.leader_epoch) == (150, 0)
            with (
                RangeReader(flow.source_client("consumer"), topic, 0, 150, 180, cursor.leader_epoch) as reader,
                pytest.raises(ReplicationFailure, match="diverged at offset 100, below offset 150"),
            ):
                list(reader.messages())

        run = cli("replicate", str(config), "--flow", "a->b")
        assert run.returncode == 1
        for expected in (
            f"{topic}-0",
            "diverged at offset 100, below the stored cursor 150",
            f"airmirror reset {config} --flow a->b --topic {topic}",
        ):
            assert expected in run.stderr
        assert records_of(b, remote, 0) == d.first + d.divergent

        for args in (
            ("reset", str(config), "--flow", "a->b", "--topic", topic),
            ("replicate", str(config), "--flow", "a->b"),
        ):
            done = cli(*args)
            assert done.returncode == 0, done.stderr
        assert records_of(b, remote, 0)[150:] == d.first + d.new
    finally:
        rejoin(source3, topic, d.leader)


def test_a_partition_truncated_under_a_stream_stops_alone_and_is_copied_again_from_the_divergence_point(
    source3, clusters, prefix, tmp_path
):
    """A live run streams two topics in one copy task when an unclean election truncates the source log of one of
    them below its read: the other topic streams on, the run never fails, the stream ends early, and the next
    stream copies the truncated partition again from the divergence point.  The target then holds every record
    of both lineages once, and the other topic equals its source."""
    from tests.integration.test_continuous import copied_so_far, start_continuous

    a, b = source3.bootstrap, clusters["b"].bootstrap
    topic, steady = f"{prefix}.unclean", f"{prefix}.steady"
    for node in source3.status().nodes:
        if not node.running:
            source3.start_node(node.node_id)
    admin = AdminClient({"bootstrap.servers": a})
    config_topic = {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}
    for future in admin.create_topics(
        [
            NewTopic(topic, 1, replica_assignment=[DUO], config=config_topic),
            NewTopic(steady, 1, replica_assignment=[[1]]),
        ]
    ).values():
        future.result()
    wait_until(lambda: partition_state(a, topic)[0][1] == DUO, 60, "both replicas in sync")
    config = flow_config(source3, clusters, tmp_path, f"{prefix}.*")
    flow = load_config(config).flow("a->b")
    first, divergent, new = (
        unique_records(f"{topic}-{part}", n) for part, n in (("first", 100), ("divergent", 50), ("new", 80))
    )
    produce(a, topic, 0, first)
    producer = SteadyProducer(a, steady, 1, burst=5, pause=0.1)
    producer.start()
    leader = partition_state(a, topic)[0][0]
    follower = next(node for node in DUO if node != leader)
    run = start_continuous(config)
    try:
        with MetadataStore.open(flow.metadata_db_url) as store:
            wait_until(
                lambda: copied_so_far(store, flow.name, topic) == 100 or run.poll() is not None,
                300,
                "the first records streamed",
            )
            source3.kill_node(follower)
            wait_until(
                lambda: partition_state(a, topic)[0][1] == [leader],
                60,
                f"node {follower} to leave the in-sync replicas",
            )
            produce(a, topic, 0, divergent)
            wait_until(
                lambda: copied_so_far(store, flow.name, topic) == 150 or run.poll() is not None,
                120,
                "the divergent records streamed",
            )

            source3.kill_node(leader)
            source3.start_node(follower)
            elect_uncleanly(a, topic, follower)
            produce(a, topic, 0, new)
            wait_until(
                lambda: copied_so_far(store, flow.name, topic) == 180 or run.poll() is not None,
                300,
                "the new lineage streamed",
            )
            streamed = copied_so_far(store, flow.name, steady)
            wait_until(
                lambda: copied_so_far(store, flow.name, steady) > streamed or run.poll() is not None,
                60,
                "the other topic streaming on",
            )
            assert run.poll() is None, run.communicate()
            resets = store.source_resets(flow.name)
            assert [(r.topic, r.partition, r.old_cursor, r.new_start) for r in resets] == [(topic, 0, 150, 100)]
            assert not [batch for batch in store.batches(flow.name) if batch.state == BatchState.FAILED]
    finally:
        producer.stop()
        run.send_signal(signal.SIGTERM)
        output, errors = run.communicate(timeout=300)
        rejoin(source3, topic, leader)

    assert run.returncode == 0, (output, errors)
    assert f"the source log of {topic}-0 moved from under the copy" in errors and "round failed" not in errors, errors
    assert records_of(b, f"a.{topic}", 0) == first + divergent + new
    assert records_of(b, f"a.{steady}", 0) == records_of(a, steady, 0)
    assert len(records_of(a, steady, 0)) == producer.sent
