"""Fail a consumer group over to the cluster an application connects to: commit its translated offsets there.

Contract of :func:`fail_over` (the rules of airmirror's group offset sync, for one group, on demand):

1. The offsets are :func:`~airmirror.client.translate_offsets`' from the checkpoints of the remote cluster.
2. Only while the group is inactive here: EMPTY, or absent (described as DEAD).  A group in any other state
   (members consuming, rebalancing) raises :class:`GroupActive` and nothing is committed; so does a commit the
   broker refuses because members joined meanwhile.
3. Only forward: a partition is committed when the group has no offset for it here or a lower one.  A group that
   already read further on this cluster is never rewound.
4. The result is the translated offsets that were committed; partitions the group was already at or past are
   left out.
5. The metadata is committed up to its first NUL character, and none when that leaves nothing.  confluent-kafka's
   commit cannot carry a NUL, and adds one to any metadata it sends: a group that committed through
   confluent-kafka on the other cluster has metadata ending in one, and MM2's checkpoints carry it so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConsumerGroupDescription

from airmirror.client.connection import ClusterConnection
from airmirror.client.remote_cluster_utils import (
    DEFAULT_TIMEOUT_S,
    OffsetAndMetadata,
    Timeout,
    seconds,
    translate_offsets,
)
from airmirror.errors import ReplicationFailure

INACTIVE_STATES = frozenset({ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD})
"""States of a group no member runs in: EMPTY, or DEAD (a group that does not exist is described so)."""

ACTIVE_GROUP_ERRORS = frozenset(
    {KafkaError.UNKNOWN_MEMBER_ID, KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION}
)
"""A commit's errors that mean members joined the group between its description and the commit."""


class GroupActive(ReplicationFailure):
    """The group has members on the cluster: its offsets were not committed (rule 2)."""


def fail_over(
    consumer_config: Mapping[str, Any],
    remote_cluster_alias: str,
    group_id: str,
    timeout: Timeout = DEFAULT_TIMEOUT_S,
) -> dict[TopicPartition, OffsetAndMetadata]:
    """Commit ``group_id``'s offsets translated from ``remote_cluster_alias`` to the group on this cluster, by the
    module's rules; returns what was committed."""
    connection = ClusterConnection.of(consumer_config)
    timeout_s = seconds(timeout)
    translated = translate_offsets(consumer_config, remote_cluster_alias, group_id, timeout_s)
    admin = connection.admin()
    where = f"group {group_id!r} on cluster {connection.cluster}"
    description: ConsumerGroupDescription = admin.describe_consumer_groups([group_id], request_timeout=timeout_s)[
        group_id
    ].result()
    if description.state not in INACTIVE_STATES:
        raise GroupActive(
            f"{where} is active ({description.state.name}, {len(description.members)} members): "
            "stop its consumers, then fail over again; no offset was committed"
        )
    moves = forward(translated, committed_offsets(admin, group_id, timeout_s))
    if moves:
        commit(admin, group_id, moves, timeout_s, where)
    return moves


def committed_offsets(admin: AdminClient, group_id: str, timeout_s: float) -> dict[tuple[str, int], int]:
    """The group's committed offsets on the cluster, by topic and partition."""
    request = [ConsumerGroupTopicPartitions(group_id)]
    answer = admin.list_consumer_group_offsets(request, request_timeout=timeout_s)[group_id].result()
    return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions}


def forward(
    translated: Mapping[TopicPartition, OffsetAndMetadata], committed: Mapping[tuple[str, int], int]
) -> dict[TopicPartition, OffsetAndMetadata]:
    """The translated offsets that move the group forward: no committed offset yet, or a lower one (rule 3)."""
    return {tp: o for tp, o in translated.items() if committed.get((tp.topic, tp.partition), -1) < o.offset}


def commit(
    admin: AdminClient, group_id: str, moves: Mapping[TopicPartition, OffsetAndMetadata], timeout_s: float, where: str
) -> None:
    """Commit ``moves`` (rule 5); a refusal because members joined raises :class:`GroupActive` (rule 2)."""
    partitions = [committed_partition(tp, o) for tp, o in moves.items()]
    request = [ConsumerGroupTopicPartitions(group_id, partitions)]
    try:
        result = admin.alter_consumer_group_offsets(request, request_timeout=timeout_s)[group_id].result()
    except KafkaException as error:
        if error.args[0].code() in ACTIVE_GROUP_ERRORS:
            raise GroupActive(f"{where} became active while its offsets were committed ({error})") from error
        raise
    errors = [tp.error for tp in result.topic_partitions if tp.error is not None]
    if any(e.code() in ACTIVE_GROUP_ERRORS for e in errors):
        raise GroupActive(f"{where} became active while its offsets were committed ({errors[0].str()})")
    if errors:
        raise ReplicationFailure(f"{where} refused the commit of its offsets: {errors[0].str()}")


def committed_partition(partition: TopicPartition, offset: OffsetAndMetadata) -> TopicPartition:
    """What is committed of ``offset`` (rule 5)."""
    metadata = offset.metadata.split("\x00", 1)[0]
    if not metadata:
        return TopicPartition(partition.topic, partition.partition, offset.offset)
    return TopicPartition(partition.topic, partition.partition, offset.offset, metadata)
