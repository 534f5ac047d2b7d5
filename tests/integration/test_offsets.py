"""Offset look-ups through a long-lived admin client (:mod:`airmirror.kafka.offsets`), against a real broker: a
run shares one admin client per cluster, whose metadata cache may predate the topics it asks about."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import NewTopic, OffsetSpec

from airmirror.errors import ReplicationFailure
from airmirror.kafka.clients import ClusterAdmin
from airmirror.kafka.offsets import list_offsets
from airmirror.model import PartitionKey
from tests.kafka_helpers import produce, sample_records

pytestmark = pytest.mark.integration


def test_a_shared_admin_lists_offsets_of_topics_it_created_itself_a_moment_ago(clusters, prefix):
    """Topic sync creates remote topics with the run's admin client, and the copy step then asks that client for
    their offsets: librdkafka's cache then knows the topics without their leaders ("No leaders found")."""
    bootstrap = clusters["b"].bootstrap
    admin = ClusterAdmin("b", {"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=10)  # the run's first look at the cluster fills the cache
    topics = [f"{prefix}.new{i}" for i in range(50)]
    for future in admin.create_topics([NewTopic(topic, 4, 1) for topic in topics], operation_timeout=30).values():
        future.result()
    produce(bootstrap, topics[0], 1, sample_records(3, "x"))

    ends = list_offsets(admin, [PartitionKey(t, p) for t in topics for p in range(4)], OffsetSpec.latest())

    assert ends[PartitionKey(topics[0], 1)] == 3 and sum(ends.values()) == 3


def test_a_topic_that_does_not_exist_fails_at_once_naming_the_partition(clusters, prefix):
    admin = ClusterAdmin("b", {"bootstrap.servers": clusters["b"].bootstrap})
    with pytest.raises(ReplicationFailure, match=rf"{prefix}\.missing-0: the topic does not exist"):
        list_offsets(admin, [PartitionKey(f"{prefix}.missing", 0)], OffsetSpec.latest())
