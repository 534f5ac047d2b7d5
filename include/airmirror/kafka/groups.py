"""The consumer groups of a flow's source cluster that checkpoints cover, and their committed offsets.

A group is covered when it matches ``groups``/``groups.exclude`` (MM2's group filter) and is not one of
airmirror's own groups (``airmirror-*``: progress, exactly-once anchors, readers).  Only committed offsets
(>= 0) on topics with a :func:`~airmirror.config.routes.route` are returned; a group without any is left out.

:func:`describe_group` describes one consumer group of either cluster by name; :func:`group_activity` says
whether a group of any protocol (MM2's worker group is a ``connect`` group) runs, proven by name: a refusal names
the ACL to grant, never reads as "absent".
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sized
from dataclasses import dataclass
from typing import Protocol, cast

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException
from confluent_kafka.admin import ConsumerGroupDescription

from airmirror import names
from airmirror.client.failover import INACTIVE_STATES
from airmirror.config import FlowConfig
from airmirror.config.routes import NOTHING_ROUTED_BACK, route
from airmirror.errors import ReplicationFailure
from airmirror.kafka.acls import plain_names
from airmirror.kafka.authorization import naming_refusals, raise_first_refusal
from airmirror.kafka.clients import REQUEST_TIMEOUT_S, ClusterAdmin, source_admin
from airmirror.kafka.retry import retry_transient
from airmirror.model import PartitionKey


@dataclass(frozen=True)
class CommittedOffset:
    """A group's committed offset of one partition and the metadata string committed with it."""

    offset: int
    metadata: str


def is_covered_group(flow: FlowConfig, group: str) -> bool:
    """True when checkpoints cover ``group`` (see the module docstring)."""
    return flow.groups.matches(group) and not group.startswith(names.GROUP_PREFIX)


def covered_groups(flow: FlowConfig, admin: ClusterAdmin) -> list[str]:
    """Every covered group of the source cluster, sorted.  A group that ``groups`` names plainly and that the
    cluster hides because the user may not DESCRIBE it raises :class:`~airmirror.errors.AccessDenied`."""
    listing = retry_transient(
        lambda: admin.list_consumer_groups(request_timeout=REQUEST_TIMEOUT_S).result(),
        f"list the consumer groups of cluster '{flow.source}'",
    )
    listed = {g.group_id for g in listing.valid}
    refuse_hidden_groups(admin, [g for g in plain_names(flow.groups.include) if g not in listed])
    return sorted(g for g in listed if is_covered_group(flow, g))


def refuse_hidden_groups(admin: ClusterAdmin, groups: list[str]) -> None:
    """Raise :class:`~airmirror.errors.AccessDenied` for the first of ``groups`` the user may not DESCRIBE (a
    group that does not exist is described as dead: no error)."""
    if groups:
        raise_first_refusal(
            admin.access, admin.describe_consumer_groups(groups, request_timeout=REQUEST_TIMEOUT_S), "group"
        )


def describe_group(admin: ClusterAdmin, group: str) -> ConsumerGroupDescription:
    """``group`` on ``admin``'s cluster, described by name (it need not be listed); a refusal raises
    :class:`~airmirror.errors.AccessDenied` naming the ACL to grant."""

    def describe() -> ConsumerGroupDescription:
        # confluent-kafka's admin futures are untyped; DescribeConsumerGroups resolves to this class
        description: ConsumerGroupDescription = admin.describe_consumer_groups(
            [group], request_timeout=REQUEST_TIMEOUT_S
        )[group].result()
        return description

    with naming_refusals(admin.access, group=group):
        return retry_transient(describe, f"describe group '{group}' on cluster '{admin.alias}'")


@dataclass(frozen=True)
class GroupActivity:
    """A group's ``state`` (upper case: ``STABLE``, ``EMPTY``, ``DEAD`` for an absent group...) and ``members``."""

    state: str
    members: int

    @property
    def active(self) -> bool:
        """True unless no member runs in it (EMPTY or DEAD, no members); an unknown state counts as active."""
        return self.members > 0 or self.state not in {s.name for s in INACTIVE_STATES}


class ListedGroup(Protocol):
    """What airmirror reads of a group ListGroups returned (a confluent-kafka ``GroupMetadata``)."""

    id: str
    state: str
    members: Sized


def group_activity(admin: ClusterAdmin, group: str) -> GroupActivity:
    """Whether ``group`` runs on ``admin``'s cluster, whatever its protocol, proven by name.

    The group is described by name first (a refusal raises :class:`~airmirror.errors.AccessDenied`).
    librdkafka describes consumer-protocol groups only, and fails one of another protocol (``connect``) with
    ``_INVALID_ARG`` once the broker has answered, so after it authorized the DESCRIBE: such a group is then read
    from the ListGroups call, which shows every group the user may DESCRIBE.  A group missing there after all
    raises :class:`~airmirror.errors.ReplicationFailure`: its state is not proven."""
    try:
        found = describe_group(admin, group)
        return GroupActivity(found.state.name, len(found.members))
    except ReplicationFailure as error:
        cause = error.__cause__
        if not (isinstance(cause, KafkaException) and cause.args[0].code() == KafkaError._INVALID_ARG):
            raise
    with warnings.catch_warnings():  # ListGroups is deprecated in confluent-kafka for consumer groups only
        warnings.simplefilter("ignore", DeprecationWarning)
        # GroupMetadata leaves its attributes unannotated (None until librdkafka fills them in), so mypy
        # would type id and state as None: ListedGroup states what ListGroups gives
        listed = cast(list[ListedGroup], admin.list_groups(group=group, timeout=REQUEST_TIMEOUT_S))
    for other in listed:
        if other.id == group:
            return GroupActivity(other.state.upper(), len(other.members))
    raise ReplicationFailure(
        f"group '{group}' on cluster '{admin.alias}' could be described but is not listed: its state is unknown"
    )


def committed_offsets(
    flow: FlowConfig, admin: ClusterAdmin, group: str, routed: Mapping[str, str] = NOTHING_ROUTED_BACK
) -> dict[PartitionKey, CommittedOffset]:
    """``group``'s committed offsets on the source, limited to the topics with a route (``routed``: the topics the
    reverse flow's routers named, :func:`~airmirror.config.routes.routed_back`)."""
    request = [ConsumerGroupTopicPartitions(group)]
    with naming_refusals(admin.access, group=group):
        answer = retry_transient(
            lambda: admin.list_consumer_group_offsets(request, request_timeout=REQUEST_TIMEOUT_S)[group].result(),
            f"list the committed offsets of group '{group}' on cluster '{flow.source}'",
        )
    return {
        PartitionKey(tp.topic, tp.partition): CommittedOffset(tp.offset, tp.metadata or "")
        for tp in answer.topic_partitions
        if tp.error is None and tp.offset >= 0 and route(flow, tp.topic, routed) is not None
    }


def group_offsets(
    flow: FlowConfig, routed: Mapping[str, str] = NOTHING_ROUTED_BACK
) -> dict[str, dict[PartitionKey, CommittedOffset]]:
    """Committed offsets of every covered group that has some on topics with a route (see
    :func:`committed_offsets`), by group."""
    admin = source_admin(flow)
    found = {group: committed_offsets(flow, admin, group, routed) for group in covered_groups(flow, admin)}
    return {group: offsets for group, offsets in found.items() if offsets}
