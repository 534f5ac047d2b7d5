"""MM2's ``RemoteClusterUtils`` read from the cluster an application connects to.

Contracts, as MM2's ``MirrorClient`` has them:

1. **translate_offsets** reads partition 0 of ``{remote}.checkpoints.internal`` (the policy's name) from its
   beginning to its end and keeps, per partition of this cluster, the newest checkpoint of the group: its
   downstream offset and the metadata the group committed with it.  Records that are not checkpoints are
   skipped.  It reads what transactions committed only.  Unlike MM2, which returns what it read so far, a read
   that does not reach the end within ``timeout`` raises :class:`TimeoutError`: an application must not fail
   over with part of its offsets.  A cluster without the checkpoints topic raises
   :class:`~airmirror.errors.ReplicationFailure` naming it.
2. **heartbeat_topics** and **checkpoint_topics** are the cluster's topics the policy recognises as such.
3. **upstream_clusters** follows every heartbeats topic back through the policy, hop by hop, to every cluster it
   came through; **replication_hops** is the fewest hops from ``upstream_cluster_alias`` over the heartbeats
   topics, -1 when none leads there.  A policy that cannot tell remote topics from local ones
   (``IdentityReplicationPolicy``) still ends: a cluster met twice ends the walk.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from airmirror.client.connection import ClusterConnection
from airmirror.errors import ReplicationFailure
from airmirror.mm2.policy import ReplicationPolicy
from airmirror.mm2.wire_formats import Checkpoint, WireFormatError

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 30.0
READ_BATCH = 500
POLL_S = 1.0

Timeout = float | timedelta
"""Seconds, or a :class:`~datetime.timedelta` (MM2's ``Duration``)."""


@dataclass(frozen=True)
class OffsetAndMetadata:
    """Where a group resumes on a partition of this cluster, and the metadata it committed (Kafka's
    ``OffsetAndMetadata``)."""

    offset: int
    metadata: str = ""


def seconds(timeout: Timeout) -> float:
    """``timeout`` in seconds; it must be positive."""
    value = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    if value <= 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    return value


def translate_offsets(
    consumer_config: Mapping[str, Any], remote_cluster_alias: str, group_id: str, timeout: Timeout
) -> dict[TopicPartition, OffsetAndMetadata]:
    """``group_id``'s offsets on this cluster, translated from cluster ``remote_cluster_alias`` (rule 1)."""
    connection = ClusterConnection.of(consumer_config)
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    for checkpoint in read_checkpoints(connection, remote_cluster_alias, seconds(timeout)):
        if checkpoint.group == group_id:
            position = OffsetAndMetadata(checkpoint.downstream_offset, checkpoint.metadata)
            offsets[TopicPartition(checkpoint.topic, checkpoint.partition)] = position
    return offsets


def read_checkpoints(
    connection: ClusterConnection, remote_cluster_alias: str, timeout_s: float
) -> Iterator[Checkpoint]:
    """Every checkpoint of partition 0 of the checkpoints topic of ``remote_cluster_alias``, in order."""
    topic = connection.policy.checkpoints_topic(remote_cluster_alias)
    deadline = time.monotonic() + timeout_s
    if topic not in connection.topics(timeout_s):
        raise ReplicationFailure(f"cluster {connection.cluster} has no checkpoints topic {topic!r}")
    consumer = connection.reader()
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        while (left := deadline - time.monotonic()) > 0:
            for message in consumer.consume(READ_BATCH, min(left, POLL_S)):
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    return
                if error is not None:
                    raise KafkaException(error)
                key, value = message.key(), message.value()
                try:
                    yield Checkpoint.decode(key or b"", value or b"")
                except WireFormatError as skipped:
                    log.info("skipped a record of %s at offset %d: %s", topic, message.offset(), skipped)
        raise TimeoutError(f"{topic} on cluster {connection.cluster} was not read to its end within {timeout_s:g}s")
    finally:
        consumer.close()


def heartbeat_topics(consumer_config: Mapping[str, Any], timeout: Timeout = DEFAULT_TIMEOUT_S) -> set[str]:
    """The cluster's heartbeats topics: ``heartbeats`` and its replicas (rule 2)."""
    return heartbeats_of(ClusterConnection.of(consumer_config), seconds(timeout))


def checkpoint_topics(consumer_config: Mapping[str, Any], timeout: Timeout = DEFAULT_TIMEOUT_S) -> set[str]:
    """The cluster's checkpoints topics (rule 2)."""
    connection = ClusterConnection.of(consumer_config)
    return {t for t in connection.topics(seconds(timeout)) if connection.policy.is_checkpoints_topic(t)}


def upstream_clusters(consumer_config: Mapping[str, Any], timeout: Timeout = DEFAULT_TIMEOUT_S) -> set[str]:
    """Every cluster heartbeats came from to this cluster, however many hops away (rule 3)."""
    connection = ClusterConnection.of(consumer_config)
    topics = heartbeats_of(connection, seconds(timeout))
    return {source for topic in topics for source in hops_of(connection.policy, topic)}


def replication_hops(
    consumer_config: Mapping[str, Any], upstream_cluster_alias: str, timeout: Timeout = DEFAULT_TIMEOUT_S
) -> int:
    """The fewest hops from ``upstream_cluster_alias`` to this cluster, -1 when it is not upstream (rule 3)."""
    connection = ClusterConnection.of(consumer_config)
    return fewest_hops(connection.policy, heartbeats_of(connection, seconds(timeout)), upstream_cluster_alias)


def heartbeats_of(connection: ClusterConnection, timeout_s: float) -> set[str]:
    """The heartbeats topics of ``connection``'s cluster."""
    return {t for t in connection.topics(timeout_s) if connection.policy.is_heartbeats_topic(t)}


def hops_of(policy: ReplicationPolicy, topic: str) -> Iterator[str]:
    """The clusters ``topic`` came through, nearest first, each once."""
    seen: set[str] = set()
    source = policy.topic_source(topic)
    while source is not None and source not in seen:
        seen.add(source)
        yield source
        upstream = policy.upstream_topic(topic)
        if upstream is None:
            return
        topic, source = upstream, policy.topic_source(upstream)


def fewest_hops(policy: ReplicationPolicy, topics: Iterable[str], alias: str) -> int:
    """The fewest hops from ``alias`` over ``topics``; -1 when none came through it."""
    hops = [n for topic in topics for n, source in enumerate(hops_of(policy, topic), 1) if source == alias]
    return min(hops, default=-1)
