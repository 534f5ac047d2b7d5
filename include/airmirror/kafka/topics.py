"""Topic sync: make every selected source topic exist on the target under its remote name.

Rules (MM2's):
- A missing remote topic is created with the source's partition count, the flow's ``replication.factor``
  and the source topic's non-default configs (dynamic topic configs that are neither read-only nor
  sensitive), minus ``config.properties.exclude``.
- When the source gains partitions the remote topic gains them too.  Partition counts only grow and
  remote topics are never deleted.
- With ``sync.topic.configs.enabled`` the non-default source configs are also applied to existing remote
  topics (incremental alter, only values that differ).

Every topic airmirror creates goes through :func:`create_topics`: remote topics with ``replication.factor``,
and its internal one-partition topics (:func:`ensure_internal_topic`: the batch log, MM2's heartbeats and
checkpoints topics) with their own replication-factor key (see :mod:`airmirror.config.mirror_config`).  A
creation that fails because of the replication factor (e.g. larger than the cluster's broker count) is a
:class:`~airmirror.errors.ConfigError` naming that key and its line; a topic that already exists is left as
it is.

Two source topics never share a remote topic: a flow whose routers (``RegexRouter``) would send two of its
source topics to one remote topic, or one to another's remote topic, is a
:class:`~airmirror.errors.ConfigError` naming both and the flow's ``transforms`` (their partitions, offsets and
offset translation would be mixed).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from airmirror.config import FlowConfig
from airmirror.config.setting_types import BROKER_DEFAULT_REPLICATION_FACTOR
from airmirror.errors import ConfigError, ReplicationFailure
from airmirror.kafka.acls import named_source_topics
from airmirror.kafka.authorization import naming_refusals, raise_first_refusal
from airmirror.kafka.clients import REQUEST_TIMEOUT_S, ClusterAdmin, cluster_metadata

log = logging.getLogger(__name__)

CONTROLLER_CALL_S = 5.0
"""How long a request that librdkafka sends to the cluster's named controller waits before it is sent again after a
metadata refresh (:func:`describe_topic_configs`)."""

COMPACTED = {"cleanup.policy": "compact"}
"""Topic configs of MM2's heartbeats and checkpoints topics: the newest record per key is kept."""


@dataclass(frozen=True)
class TopicMapping:
    """A replicated source topic, its remote name and its source partition count."""

    source_topic: str
    remote_topic: str
    partitions: int


@dataclass(frozen=True)
class TopicSpec:
    """A topic to create on a flow's target: its name, partition count and topic configs."""

    name: str
    partitions: int
    configs: Mapping[str, str]


@dataclass
class TopicSyncReport:
    """What a sync did (or, in a dry run, would do)."""

    mappings: list[TopicMapping] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    grown: dict[str, tuple[int, int]] = field(default_factory=dict)
    reconfigured: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicSelection:
    """What :func:`select_topics` found: the source topics the flow replicates (``mappings``), the topics it has
    copied that it selects (``looked_for``), and those of them the cluster no longer holds (``gone``: deleted)."""

    mappings: list[TopicMapping]
    looked_for: frozenset[str] = frozenset()
    gone: frozenset[str] = frozenset()


def select_topics(
    flow: FlowConfig, source: ClusterAdmin, topics_regex: str | None = None, copied: Iterable[str] = ()
) -> TopicSelection:
    """Source topics this flow replicates (optionally narrowed by a regex on the source name), sorted, and which of
    the selected ``copied`` topics (those the flow has copied: they have cursors) are gone.

    A topic the flow names, or one of ``copied`` that it selects, which the cluster's listing lacks or reports with
    an error, is described on its own: one the cluster refuses to describe (a revoked DESCRIBE ACL hides a topic
    from listings) raises :class:`~airmirror.errors.AccessDenied` naming the ACL, rather than passing for deleted;
    one with a metadata error is left out of this run with a warning naming it; one that does not exist is
    deleted (``gone``, when it was copied)."""
    subset = re.compile(topics_regex) if topics_regex else None

    def selected(name: str) -> bool:
        return flow.should_replicate(name) and (subset is None or subset.fullmatch(name) is not None)

    metadata = cluster_metadata(source)
    mappings = []
    for name, topic in sorted(metadata.topics.items()):
        if topic.error is None and selected(name):
            mappings.append(TopicMapping(name, flow.remote_topic(name), len(topic.partitions)))
    refuse_shared_remote_topics(flow, mappings)
    looked_for = frozenset(t for t in copied if selected(t))
    unlisted = {t for t in named_source_topics(flow) if t not in metadata.topics}
    unlisted.update(t for t in looked_for if t not in metadata.topics)
    refuse_hidden_topics(source, sorted(unlisted))
    for name, topic in sorted(metadata.topics.items()):
        if topic.error is not None and selected(name):
            log.warning("source topic %s of flow %s is left out of this run: %s", name, flow.name, topic.error.str())
    return TopicSelection(mappings, looked_for, frozenset(t for t in looked_for if t not in metadata.topics))


def replicated_topics(
    flow: FlowConfig, source: ClusterAdmin, topics_regex: str | None = None, copied: Iterable[str] = ()
) -> list[TopicMapping]:
    """The mappings of :func:`select_topics`: the source topics this flow replicates, sorted."""
    return select_topics(flow, source, topics_regex, copied).mappings


def refuse_shared_remote_topics(flow: FlowConfig, mappings: Iterable[TopicMapping]) -> None:
    """The module's rule: raise :class:`~airmirror.errors.ConfigError` for the first remote topic two of
    ``mappings`` share."""
    sources: dict[str, str] = {}
    for mapping in mappings:
        other = sources.setdefault(mapping.remote_topic, mapping.source_topic)
        if other != mapping.source_topic:
            setting = flow.setting("transforms")
            raise ConfigError(
                f"flow {flow.name} would copy source topics {other} and {mapping.source_topic} both into remote "
                f"topic {mapping.remote_topic}: a remote topic mirrors one source topic, so route them apart",
                key=None if setting is None else setting.key,
                line=None if setting is None else setting.line,
            )


def refuse_hidden_topics(source: ClusterAdmin, topics: Sequence[str]) -> None:
    """Raise :class:`~airmirror.errors.AccessDenied` for the first of ``topics`` (named by the flow, missing from
    the listing) that the cluster hides because the user may not DESCRIBE it; one that does not exist is no
    error."""
    if topics:
        raise_first_refusal(
            source.access,
            source.describe_topics(TopicCollection(list(topics)), request_timeout=REQUEST_TIMEOUT_S),
            "topic",
        )


def sync_topics(
    flow: FlowConfig, source: ClusterAdmin, target: ClusterAdmin, mappings: list[TopicMapping], *, dry_run: bool = False
) -> TopicSyncReport:
    """Create, grow and reconfigure remote topics per the module rules."""
    report = TopicSyncReport(mappings=list(mappings))
    if not mappings:
        return report
    existing = {name: len(t.partitions) for name, t in cluster_metadata(target).topics.items()}
    source_configs = describe_topic_configs(source, [m.source_topic for m in mappings])
    wanted = {m.source_topic: replicable_configs(flow, source_configs[m.source_topic]) for m in mappings}
    missing = [m for m in mappings if m.remote_topic not in existing]
    report.created = [m.remote_topic for m in missing]
    report.grown = {
        m.remote_topic: (existing[m.remote_topic], m.partitions)
        for m in mappings
        if m.remote_topic in existing and existing[m.remote_topic] < m.partitions
    }
    present = [m for m in mappings if m.remote_topic in existing]
    if flow.topic_sync.sync_configs_enabled and present:
        target_configs = describe_topic_configs(target, [m.remote_topic for m in present])
        for m in present:
            current = {name: entry.value for name, entry in target_configs[m.remote_topic].items()}
            changes = {k: v for k, v in wanted[m.source_topic].items() if current.get(k) != v}
            if changes:
                report.reconfigured[m.remote_topic] = changes
    if dry_run:
        return report
    new_topics = [TopicSpec(m.remote_topic, m.partitions, wanted[m.source_topic]) for m in missing]
    create_topics(flow, target, new_topics, "replication.factor")
    grow_topics(target, report.grown)
    alter_configs(target, report.reconfigured)
    return report


def describe_topic_configs(admin: ClusterAdmin, topics: Iterable[str]) -> dict[str, dict[str, ConfigEntry]]:
    """Each topic's configs.  librdkafka sends DescribeConfigs to the broker the cluster's metadata names as its
    controller, which a KRaft cluster picks at random among the brokers it believes alive: right after a broker
    died, the dead one (measured on a three-node cluster: the first request after a node was killed waited out its
    whole timeout, the next, after a metadata refresh, answered in 0.1 s).  So each request waits
    :data:`CONTROLLER_CALL_S`, and one that timed out is sent again after a metadata refresh, for up to
    :data:`~airmirror.kafka.clients.REQUEST_TIMEOUT_S`."""
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
    deadline = time.monotonic() + REQUEST_TIMEOUT_S
    while True:
        configs: dict[str, dict[str, ConfigEntry]] = {}
        try:
            for resource, future in admin.describe_configs(resources, request_timeout=CONTROLLER_CALL_S).items():
                with naming_refusals(admin.access, topic=resource.name):
                    configs[resource.name] = future.result()
            return configs
        except KafkaException as error:
            if error.args[0].code() != KafkaError._TIMED_OUT or time.monotonic() >= deadline:
                raise
        admin.list_topics(timeout=REQUEST_TIMEOUT_S)  # names another controller


def replicable_configs(flow: FlowConfig, entries: dict[str, ConfigEntry]) -> dict[str, str]:
    """The source topic's non-default, copyable configs, minus ``config.properties.exclude``."""
    return {
        name: entry.value
        for name, entry in entries.items()
        if ConfigSource(entry.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
        and not entry.is_read_only
        and not entry.is_sensitive
        and entry.value is not None
        and not flow.is_config_excluded(name)
    }


def create_topics(flow: FlowConfig, target: ClusterAdmin, topics: Sequence[TopicSpec], factor_key: str) -> None:
    """Create ``topics`` on the cluster of ``target`` (the flow's target, or its source for MM2's offset-syncs topic)
    with the replication factor ``factor_key`` gives the flow.

    Topics that already exist are left as they are.  A factor the cluster cannot satisfy raises
    :class:`ConfigError` naming the key that supplied the factor (``factor_key``, or the MM2 key the batch log's
    factor fell back to, see :meth:`~airmirror.config.FlowConfig.replication_factor_origin`); any other failure
    raises :class:`ReplicationFailure`.
    """
    if not topics:
        return
    factor = flow.topic_replication_factor(factor_key)
    new_topics = [NewTopic(t.name, t.partitions, factor, config=dict(t.configs)) for t in topics]
    for name, future in target.create_topics(new_topics, request_timeout=REQUEST_TIMEOUT_S).items():
        try:
            with naming_refusals(target.access, topic=name):
                future.result()
        except KafkaException as error:
            code = error.args[0].code()
            if code == KafkaError.TOPIC_ALREADY_EXISTS:
                continue
            if code == KafkaError.INVALID_REPLICATION_FACTOR:
                origin_key, origin_line = flow.replication_factor_origin(factor_key)
                raise ConfigError(
                    f"cannot create topic '{name}' on cluster '{target.alias}' with replication factor {factor}: "
                    f"{error.args[0].str()}",
                    key=origin_key,
                    line=origin_line,
                ) from error
            raise ReplicationFailure(f"cannot create topic '{name}' on cluster '{target.alias}': {error}") from error


def grow_topics(target: ClusterAdmin, grown: dict[str, tuple[int, int]]) -> None:
    if not grown:
        return
    requests = [NewPartitions(name, new) for name, (_, new) in grown.items()]
    for name, future in target.create_partitions(requests, request_timeout=REQUEST_TIMEOUT_S).items():
        try:
            with naming_refusals(target.access, topic=name):
                future.result()
        except KafkaException as error:
            raise ReplicationFailure(f"cannot add partitions to remote topic '{name}': {error}") from error


def alter_configs(target: ClusterAdmin, changes: dict[str, dict[str, str]]) -> None:
    if not changes:
        return
    resources = [
        ConfigResource(
            ResourceType.TOPIC,
            name,
            incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
            ],
        )
        for name, configs in changes.items()
    ]
    for resource, future in target.incremental_alter_configs(resources, request_timeout=REQUEST_TIMEOUT_S).items():
        try:
            with naming_refusals(target.access, topic=resource.name):
                future.result()
        except KafkaException as error:
            raise ReplicationFailure(f"cannot update configs of remote topic '{resource.name}': {error}") from error


def ensure_internal_topic(
    flow: FlowConfig, target: ClusterAdmin, name: str, configs: Mapping[str, str], factor_key: str
) -> bool:
    """Create the one-partition internal topic ``name`` on the cluster of ``target`` (see :func:`create_topics`)
    unless it exists; True when it was created.

    Its replication factor is the one ``factor_key`` gives the flow, and its configs are ``configs`` plus
    :func:`durability_configs` of that factor (which win over ``configs``).
    """
    if name in cluster_metadata(target).topics:
        return False
    factor = flow.topic_replication_factor(factor_key)
    create_topics(flow, target, [TopicSpec(name, 1, {**configs, **durability_configs(factor)})], factor_key)
    return True


def durability_configs(factor: int) -> dict[str, str]:
    """``min.insync.replicas`` of an internal topic with ``factor`` replicas: ``factor - 1``, at least 1 and at
    most 2 (1 or 2 replicas -> 1, 3 -> 2, 5 -> 2), so one broker may be down while every acknowledged write
    is on two brokers.  Nothing for the broker-default factor (-1): the broker's default applies."""
    if factor == BROKER_DEFAULT_REPLICATION_FACTOR:
        return {}
    return {"min.insync.replicas": str(min(2, max(1, factor - 1)))}
