"""The failover client's pure rules: hops and upstream clusters as MM2's ``MirrorClient`` counts them, the split of
an application's consumer configuration, the forward-only rule, timeouts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from confluent_kafka import TopicPartition

from airmirror.client import ClusterConnection, OffsetAndMetadata
from airmirror.client.failover import committed_partition, forward
from airmirror.client.remote_cluster_utils import fewest_hops, hops_of, seconds
from airmirror.errors import ConfigError
from airmirror.mm2.policy import DefaultReplicationPolicy, IdentityReplicationPolicy

DEFAULT = DefaultReplicationPolicy()
HEARTBEATS = {"heartbeats", "a.heartbeats", "b.a.heartbeats", "c.heartbeats"}


def test_a_heartbeats_topic_names_the_clusters_it_came_through_nearest_first() -> None:
    assert list(hops_of(DEFAULT, "b.a.heartbeats")) == ["b", "a"]
    assert list(hops_of(DEFAULT, "heartbeats")) == []
    assert list(hops_of(DefaultReplicationPolicy("_"), "b_a_heartbeats")) == ["b", "a"]


def test_hops_count_as_mm2_counts_them_the_fewest_over_every_heartbeats_topic() -> None:
    assert fewest_hops(DEFAULT, HEARTBEATS, "a") == 1  # a.heartbeats beats b.a.heartbeats
    assert fewest_hops(DEFAULT, HEARTBEATS, "b") == 1
    assert fewest_hops(DEFAULT, {"b.a.heartbeats"}, "a") == 2
    assert fewest_hops(DEFAULT, HEARTBEATS, "nowhere") == -1
    assert fewest_hops(DEFAULT, set(), "a") == -1


def test_a_policy_that_cannot_tell_remote_topics_ends_its_walk_at_a_cluster_met_twice() -> None:
    identity = IdentityReplicationPolicy(source_cluster_alias="a")
    assert list(hops_of(identity, "orders")) == ["a"]  # its upstream topic is itself: a cycle, met once
    assert list(hops_of(DEFAULT, "a.b.a.heartbeats")) == ["a", "b"]


def test_the_policy_keys_are_taken_out_of_the_consumer_configuration_the_rest_goes_to_librdkafka() -> None:
    connection = ClusterConnection.of(
        {
            "bootstrap.servers": "b:9092",
            "group.id": "billing",
            "sasl.password": "hunter2",
            "replication.policy.separator": "_",
            "replication.policy.internal.topic.separator.enabled": "false",
        }
    )
    assert connection.policy.checkpoints_topic("a") == "a.checkpoints.internal"
    assert connection.policy.format_remote_topic("a", "orders") == "a_orders"
    assert connection.client_config == {
        "bootstrap.servers": "b:9092",
        "group.id": "billing",
        "sasl.password": "hunter2",
    }
    assert connection.admin_config == {"bootstrap.servers": "b:9092", "sasl.password": "hunter2"}
    assert "hunter2" not in repr(connection) and connection.cluster == "b:9092"


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"group.id": "g"}, "bootstrap.servers"),
        ({"bootstrap.servers": "b:9092", "replication.policy.separator": ""}, "replication.policy.separator"),
        (
            {"bootstrap.servers": "b:9092", "replication.policy.internal.topic.separator.enabled": "maybe"},
            "replication.policy.internal.topic.separator.enabled",
        ),
        ({"bootstrap.servers": "b:9092", "replication.policy.class": "NoSuchPolicy"}, "replication.policy.class"),
    ],
)
def test_a_bad_consumer_configuration_names_its_key(config: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=f"key '{key}'"):
        ClusterConnection.of(config)


def test_only_offsets_that_move_the_group_forward_are_committed() -> None:
    behind, level, ahead, unseen = (TopicPartition("a.orders", p) for p in range(4))
    translated = {tp: OffsetAndMetadata(100, "m") for tp in (behind, level, ahead, unseen)}
    committed = {("a.orders", 0): 99, ("a.orders", 1): 100, ("a.orders", 2): 101}

    assert forward(translated, committed) == {behind: OffsetAndMetadata(100, "m"), unseen: OffsetAndMetadata(100, "m")}


def test_a_timeout_is_seconds_or_a_timedelta_and_positive() -> None:
    assert seconds(timedelta(minutes=1)) == 60.0 and seconds(2) == 2.0
    with pytest.raises(ValueError, match="positive"):
        seconds(0)


def test_metadata_is_committed_up_to_its_first_nul_and_none_is_committed_for_nothing() -> None:
    orders = TopicPartition("a.orders", 0)

    committed = committed_partition(orders, OffsetAndMetadata(7, "later\x00"))
    assert (committed.offset, committed.metadata) == (7, "later")
    assert committed_partition(orders, OffsetAndMetadata(7, "\x00")).metadata is None
    assert committed_partition(orders, OffsetAndMetadata(7, "")).metadata is None
