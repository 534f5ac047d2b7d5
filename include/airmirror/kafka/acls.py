"""The Kafka ACLs a flow's user needs on its source and on its target cluster, derived from the flow's config.

Contract of :func:`required_acls`: with brokers that enforce ACLs (KRaft's ``StandardAuthorizer``), granting
exactly these to the user each cluster's client settings log in as is enough for every feature of the flow
(replicate with exactly-once, status, heartbeat, checkpoint with group offset sync, translate), and none of them
is more than a feature needs.  ``Cluster`` ACLs are needed only by topic ACL sync (``sync.topic.acls.enabled``,
on by default: DESCRIBE on the source to read ACLs, ALTER on the target to create them): topics are created under
``Topic:CREATE``, and the copy producers are transactional, so they need no ``IdempotentWrite``.

Names follow the config: replicated topics from ``topics`` (a plain name is LITERAL, ``name.*`` PREFIXED, anything
else every topic, ``*``); remote topics and the checkpoints topic under the source alias's remote prefix, and the
topics a router (``RegexRouter``) names under the text its replacement starts with (every topic, ``*``, where it
starts with a group); airmirror's own groups and transactional ids from :mod:`airmirror.names`; consumer groups from
``groups`` like topics. airmirror's readers only assign partitions and never commit, so their groups need no ACL
(:func:`~airmirror.kafka.authorization.refuses_unused_group`). A topic or group the user may not DESCRIBE is invisible
to a listing, as to MM2; one that ``topics`` or ``groups`` names plainly (or the source's heartbeats topic) is looked
up by name, so that a missing ACL is an error (:mod:`airmirror.kafka.authorization`).

:func:`takeover_acls` lists what ``airmirror takeover --from-mm2`` needs besides (``airmirror acls --takeover``):
DESCRIBE on MM2's worker group, to prove MM2 is stopped, and READ on MM2's offsets, offset-syncs and checkpoints
topics.  A one-off: they can be revoked after the takeover.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airmirror import names
from airmirror.mm2.policy import PatternList

if TYPE_CHECKING:
    from airmirror.config import FlowConfig

ALL = "*"
CLUSTER = "kafka-cluster"
"""The name of Kafka's one Cluster resource."""
READ_TOPIC = ("DESCRIBE", "READ", "DESCRIBE_CONFIGS")
OWN_TOPIC = ("CREATE", "DESCRIBE", "READ", "WRITE")
_LITERAL = re.compile(r"(?:[A-Za-z0-9_-]|\\?\.)+")


@dataclass(frozen=True)
class AclRequirement:
    """One ACL entry: on ``cluster`` (a flow alias), ALLOW ``operations`` on the ``resource_type`` resource
    ``name`` matched by ``pattern_type`` (``LITERAL`` or ``PREFIXED``), and which features need it."""

    cluster: str
    resource_type: str
    pattern_type: str
    name: str
    operations: tuple[str, ...]
    purpose: str


def routed_prefixes(flow: FlowConfig) -> list[tuple[str, str]]:
    """``(alias, prefix)`` of each router of the flow's chain: the literal text its replacement starts with, every
    name a router can give starting with it."""
    return [(step.alias, step.route.literal_prefix) for step in flow.transforms.steps if step.route is not None]


def resource_patterns(patterns: PatternList) -> list[tuple[str, str]]:
    """``(pattern type, name)`` covering every name the regexes match: a plain name is LITERAL, ``name.*``
    PREFIXED ``name``; any other regex needs every name (LITERAL ``*``).  ``.`` is read as the dot of a topic
    name (``orders.v1``), as users mean it."""
    covered: list[tuple[str, str]] = []
    for pattern in (p.pattern for p in patterns.patterns):
        prefixed = pattern.endswith(".*")
        stem = pattern[:-2] if prefixed else pattern
        if not _LITERAL.fullmatch(stem):
            return [("LITERAL", ALL)]
        entry = ("PREFIXED" if prefixed else "LITERAL", stem.replace("\\.", "."))
        if entry not in covered:
            covered.append(entry)
    return covered


def plain_names(patterns: PatternList) -> list[str]:
    """The names ``patterns`` match by a plain name (LITERAL entries of :func:`resource_patterns`)."""
    return [name for pattern, name in resource_patterns(patterns) if pattern == "LITERAL" and name != ALL]


def named_source_topics(flow: FlowConfig) -> list[str]:
    """The source topics the flow names plainly: those of ``topics``, and the heartbeats topic it replicates."""
    topics = plain_names(flow.topics.include)
    if flow.heartbeats.replication_enabled:
        topics.append(flow.policy.heartbeats_topic())
    return topics


def offset_syncs_acl(flow: FlowConfig) -> AclRequirement | None:
    """What writing MM2's offset-syncs topic needs, where ``offset-syncs.topic.location`` puts it (none when
    ``emit.offset-syncs.enabled`` is off)."""
    if not flow.offset_syncs.emit_enabled:
        return None
    alias, topic = flow.offset_syncs_place()
    return AclRequirement(
        alias,
        "TOPIC",
        "LITERAL",
        topic,
        ("CREATE", "DESCRIBE", "WRITE"),
        "replicate: MM2's offset-syncs topic (emit.offset-syncs.enabled)",
    )


def required_acls(flow: FlowConfig) -> list[AclRequirement]:
    """Every ACL the flow's user needs, source cluster first (see the module contract)."""
    source, target, policy = flow.source, flow.target, flow.policy
    acls = [
        AclRequirement(source, "TOPIC", pattern, name, READ_TOPIC, "replicate: list, read and sync the topics")
        for pattern, name in resource_patterns(flow.topics.include)
    ]
    if flow.heartbeats.replication_enabled:
        acls.append(
            AclRequirement(
                source,
                "TOPIC",
                "LITERAL",
                policy.heartbeats_topic(),
                READ_TOPIC,
                "replicate: MM2 replicates the source's heartbeats",
            )
        )
    acls.append(
        AclRequirement(
            source,
            "GROUP",
            "LITERAL",
            names.source_progress_group(source, target),
            ("DESCRIBE", "READ"),
            "replicate: commits the flow's position, for lag tools",
        )
    )
    groups = resource_patterns(flow.groups.include)
    if flow.checkpoints.enabled:
        acls += [
            AclRequirement(
                source,
                "GROUP",
                pattern,
                name,
                ("DESCRIBE",),
                "checkpoint, translate: list the groups and read their offsets",
            )
            for pattern, name in groups
        ]
    if flow.topic_sync.sync_acls_enabled:
        acls.append(
            AclRequirement(
                source,
                "CLUSTER",
                "LITERAL",
                CLUSTER,
                ("DESCRIBE",),
                "replicate: read the topic ACLs to sync (sync.topic.acls.enabled)",
            )
        )
    offset_syncs = offset_syncs_acl(flow)
    if offset_syncs is not None and offset_syncs.cluster == source:
        acls.append(offset_syncs)
    remote_prefix = policy.format_remote_topic(source, "")
    acls += [
        AclRequirement(
            target,
            "TOPIC",
            "PREFIXED" if prefix else "LITERAL",
            prefix or ALL,
            (*OWN_TOPIC, "DESCRIBE_CONFIGS", "ALTER", "ALTER_CONFIGS"),
            f"replicate: create, grow, configure and write the remote topics router {alias!r} names",
        )
        for alias, prefix in routed_prefixes(flow)
        if not (prefix.startswith(remote_prefix) and remote_prefix)
    ]
    acls += [
        AclRequirement(
            target,
            "TOPIC",
            "PREFIXED",
            remote_prefix,
            (*OWN_TOPIC, "DESCRIBE_CONFIGS", "ALTER", "ALTER_CONFIGS"),
            "replicate: create, grow, configure and write remote topics; checkpoint: its topic",
        ),
        AclRequirement(
            target,
            "TOPIC",
            "LITERAL",
            names.batch_log_topic(source),
            (*OWN_TOPIC, "DESCRIBE_CONFIGS", "ALTER_CONFIGS"),
            "replicate: the batch log (exact offset-sync runs), kept compacted",
        ),
        AclRequirement(
            target,
            "TRANSACTIONAL_ID",
            "PREFIXED",
            names.transactional_id_prefix(source, target),
            ("DESCRIBE", "WRITE"),
            "replicate: two transactional producers per copy task, taking turns",
        ),
        AclRequirement(
            target,
            "GROUP",
            "LITERAL",
            names.anchor_group(source, target),
            ("DESCRIBE", "READ"),
            "replicate: transactional offset commits that anchor each partition's last copy",
        ),
    ]
    if flow.copy.dead_letter_topic is not None:
        acls.append(
            AclRequirement(
                target,
                "TOPIC",
                "LITERAL",
                flow.copy.dead_letter_topic,
                ("CREATE", "DESCRIBE", "WRITE"),
                "replicate: the dead-letter queue (errors.deadletterqueue.topic.name)",
            )
        )
    if flow.topic_sync.sync_acls_enabled:
        acls.append(
            AclRequirement(
                target,
                "CLUSTER",
                "LITERAL",
                CLUSTER,
                ("ALTER",),
                "replicate: create the synced topic ACLs (sync.topic.acls.enabled)",
            )
        )
    if offset_syncs is not None and offset_syncs.cluster == target:
        acls.append(offset_syncs)
    if flow.heartbeats.enabled:
        acls.append(
            AclRequirement(
                target,
                "TOPIC",
                "LITERAL",
                policy.heartbeats_topic(),
                ("CREATE", "DESCRIBE", "WRITE"),
                "heartbeat: create and write the heartbeats topic",
            )
        )
    if flow.checkpoints.enabled and flow.checkpoints.sync_group_offsets_enabled:
        acls += [
            AclRequirement(
                target,
                "GROUP",
                pattern,
                name,
                ("DESCRIBE", "READ"),
                "checkpoint: sync the groups' offsets while they are inactive",
            )
            for pattern, name in groups
        ]
    return acls


def takeover_acls(flow: FlowConfig) -> list[AclRequirement]:
    """What ``airmirror takeover --from-mm2`` needs besides :func:`required_acls` (see the module contract)."""
    group, offsets_topic = flow.mm2_worker()
    syncs_alias, syncs_topic = flow.offset_syncs_place()
    read = ("DESCRIBE", "READ")
    return [
        AclRequirement(
            flow.target,
            "GROUP",
            "LITERAL",
            group,
            ("DESCRIBE",),
            "takeover: prove MM2's worker group is stopped (or pass --mm2-stopped)",
        ),
        AclRequirement(flow.target, "TOPIC", "LITERAL", offsets_topic, read, "takeover: MM2's stored source offsets"),
        AclRequirement(syncs_alias, "TOPIC", "LITERAL", syncs_topic, read, "takeover: MM2's offset syncs"),
        AclRequirement(
            flow.target,
            "TOPIC",
            "LITERAL",
            flow.policy.checkpoints_topic(flow.source),
            read,
            "takeover: MM2's checkpoints",
        ),
    ]


def principal(flow: FlowConfig, alias: str) -> str:
    """The principal cluster ``alias``'s clients log in as: ``User:`` and the SASL user name of its settings, or
    ``User:<principal>`` when they name none (SSL client certificates, no SASL)."""
    name = flow.client_config(alias, "admin").get("sasl.username")
    return f"User:{name}" if name else "User:<principal>"
