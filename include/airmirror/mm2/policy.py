"""Replication policies (remote topic naming) and MM2's topic-selection rules.

The policies behave exactly like MM2's ``ReplicationPolicy``, ``DefaultReplicationPolicy`` and
``IdentityReplicationPolicy``; :func:`is_cycle` and :func:`should_replicate_topic` follow
``MirrorSourceConnector``.  :class:`PatternList` and :class:`RegexFilter` implement MM2's comma separated
regex lists (``topics``, ``groups``, ``config.properties.exclude``...): every entry must match the whole name.
"""

from __future__ import annotations

import importlib
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Protocol, cast

from airmirror.errors import ConfigError

_LIST_SEPARATOR = re.compile(r"\s*,\s*")


@dataclass(frozen=True)
class PatternList:
    """Regexes from one comma separated list; an empty list matches nothing (as in MM2)."""

    patterns: tuple[re.Pattern[str], ...]

    @classmethod
    def parse(cls, text: str, *, key: str, line: int | None = None) -> PatternList:
        """Compile every entry of ``text``; a bad regex raises :class:`ConfigError` naming ``key``/``line``."""
        entries = [entry for entry in _LIST_SEPARATOR.split(text.strip()) if entry]
        compiled = []
        for entry in entries:
            try:
                compiled.append(re.compile(entry))
            except re.error as exc:
                raise ConfigError(f"invalid regular expression {entry!r}: {exc}", key=key, line=line) from exc
        return cls(tuple(compiled))

    def matches(self, name: str) -> bool:
        """True when some pattern matches the whole of ``name``."""
        return any(pattern.fullmatch(name) for pattern in self.patterns)


@dataclass(frozen=True)
class RegexFilter:
    """An include list and an exclude list (MM2's ``DefaultTopicFilter``/``DefaultGroupFilter``)."""

    include: PatternList
    exclude: PatternList

    def matches(self, name: str) -> bool:
        """True when ``name`` matches an include pattern and no exclude pattern."""
        return self.include.matches(name) and not self.exclude.matches(name)


class ReplicationPolicy(ABC):
    """Names remote topics and recognises MM2's internal topics (MM2's ``ReplicationPolicy`` interface)."""

    @abstractmethod
    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        """Name of ``topic`` of cluster ``source_alias`` once replicated to another cluster."""

    @abstractmethod
    def topic_source(self, topic: str) -> str | None:
        """Alias of the cluster ``topic`` was replicated from, ``None`` if it is not a remote topic."""

    @abstractmethod
    def upstream_topic(self, topic: str) -> str | None:
        """Name of ``topic`` on its source cluster (maybe remote itself), ``None`` if not a remote topic."""

    def original_topic(self, topic: str) -> str:
        """Name of the topic ``topic`` was originally replicated from, following every hop."""
        upstream = self.upstream_topic(topic)
        while upstream is not None and upstream != topic:
            topic, upstream = upstream, self.upstream_topic(upstream)
        return topic

    def heartbeats_topic(self) -> str:
        """Name of the heartbeats topic."""
        return "heartbeats"

    def offset_syncs_topic(self, alias: str) -> str:
        """Name of the offset-syncs topic of the flow to cluster ``alias``."""
        return f"mm2-offset-syncs.{alias}.internal"

    def checkpoints_topic(self, alias: str) -> str:
        """Name of the checkpoints topic holding checkpoints of groups of cluster ``alias``."""
        return f"{alias}.checkpoints.internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        """True for ``heartbeats`` and its replicas (``a.heartbeats``, ``b.a.heartbeats``...)."""
        return self.original_topic(topic) == self.heartbeats_topic()

    def is_checkpoints_topic(self, topic: str) -> bool:
        """True for a checkpoints topic."""
        return topic.endswith(".checkpoints.internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        """True for a topic MM2 uses internally (offset syncs, checkpoints, Connect topics)."""
        return topic.endswith(".internal")

    def is_internal_topic(self, topic: str) -> bool:
        """True for topics never replicated: ``__*``, ``.*``, ``*.internal``, ``*-internal`` and MM2's own."""
        kafka_internal = topic.startswith("__") or topic.startswith(".")
        connect_internal = topic.endswith("-internal") or topic.endswith(".internal")
        return self.is_mm2_internal_topic(topic) or kafka_internal or connect_internal


class DefaultReplicationPolicy(ReplicationPolicy):
    """Prefixes remote topics with the source alias: ``{source}{separator}{topic}``.

    With ``internal_topic_separator_enabled`` (MM2's ``replication.policy.internal.topic.separator.enabled``)
    the separator is also used in the names of the offset-syncs and checkpoints topics.
    """

    def __init__(self, separator: str = ".", *, internal_topic_separator_enabled: bool = True) -> None:
        if not separator:
            raise ValueError("the replication policy separator must not be empty")
        self.separator = separator
        self._internal_separator = separator if internal_topic_separator_enabled else "."

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        parts = topic.split(self.separator)
        while parts and not parts[-1]:
            parts.pop()
        return parts[0] if len(parts) >= 2 else None

    def upstream_topic(self, topic: str) -> str | None:
        source = self.topic_source(topic)
        return None if source is None else topic[len(source) + len(self.separator) :]

    def _internal_suffix(self) -> str:
        return f"{self._internal_separator}internal"

    def _checkpoints_suffix(self) -> str:
        return f"{self._internal_separator}checkpoints{self._internal_suffix()}"

    def offset_syncs_topic(self, alias: str) -> str:
        return f"mm2-offset-syncs{self._internal_separator}{alias}{self._internal_suffix()}"

    def checkpoints_topic(self, alias: str) -> str:
        return f"{alias}{self._checkpoints_suffix()}"

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(self._checkpoints_suffix())

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return topic.endswith(self._internal_suffix())


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """Keeps topic names; only heartbeats topics are prefixed as with :class:`DefaultReplicationPolicy`.

    It cannot tell remote topics from local ones, so it cannot detect replication loops.  ``topic_source``
    returns ``source_cluster_alias`` (``None`` unless given) for every topic that is not a heartbeats topic.
    """

    def __init__(
        self,
        separator: str = ".",
        *,
        internal_topic_separator_enabled: bool = True,
        source_cluster_alias: str | None = None,
    ) -> None:
        super().__init__(separator, internal_topic_separator_enabled=internal_topic_separator_enabled)
        self.source_cluster_alias = source_cluster_alias

    def _looks_like_heartbeat(self, topic: str) -> bool:
        return topic.endswith(self.heartbeats_topic())

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if self._looks_like_heartbeat(topic):
            return super().format_remote_topic(source_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().topic_source(topic)
        return self.source_cluster_alias

    def upstream_topic(self, topic: str) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().upstream_topic(topic)
        return topic


_BUILT_IN_POLICIES: dict[str, type[DefaultReplicationPolicy]] = {
    name: cls
    for cls in (DefaultReplicationPolicy, IdentityReplicationPolicy)
    for name in (cls.__name__, f"org.apache.kafka.connect.mirror.{cls.__name__}")
}


def load_policy(
    class_name: str,
    separator: str,
    *,
    key: str = "replication.policy.class",
    line: int | None = None,
    internal_topic_separator_enabled: bool = True,
    source_cluster_alias: str | None = None,
) -> ReplicationPolicy:
    """Instantiate the replication policy named ``class_name``.

    Accepted names: MM2's ``org.apache.kafka.connect.mirror.DefaultReplicationPolicy`` and
    ``...IdentityReplicationPolicy`` (or their simple names), which also receive
    ``internal_topic_separator_enabled`` (and, for the identity policy, ``source_cluster_alias``); or a Python
    class path ``pkg.module.ClassName`` / ``pkg.module:ClassName`` of a :class:`ReplicationPolicy` subclass,
    constructed as ``cls(separator=separator)``.  Anything else raises :class:`ConfigError` naming ``key``.
    """
    name = class_name.strip()
    built_in = _BUILT_IN_POLICIES.get(name)
    if built_in is IdentityReplicationPolicy:
        return IdentityReplicationPolicy(
            separator,
            internal_topic_separator_enabled=internal_topic_separator_enabled,
            source_cluster_alias=source_cluster_alias,
        )
    if built_in is not None:
        return built_in(separator, internal_topic_separator_enabled=internal_topic_separator_enabled)
    policy_class = _import_class(name, key=key, line=line)
    if not (isinstance(policy_class, type) and issubclass(policy_class, ReplicationPolicy)):
        raise ConfigError(f"{name!r} is not a ReplicationPolicy subclass", key=key, line=line)
    # an imported class is only known at run time: its constructor taking ``separator`` is the documented
    # contract, and one that does not take it fails here, as a ConfigError
    constructor = cast(PolicyConstructor, policy_class)
    try:
        return constructor(separator=separator)
    except Exception as exc:
        raise ConfigError(f"cannot instantiate {name!r}: {exc}", key=key, line=line) from exc


class PolicyConstructor(Protocol):
    """How :func:`load_policy` builds a policy of a class it imported by name."""

    def __call__(self, *, separator: str) -> ReplicationPolicy: ...


def _import_class(path: str, *, key: str, line: int | None) -> object:
    """Import ``pkg.module.ClassName`` or ``pkg.module:ClassName``; failures raise :class:`ConfigError`."""
    module_name, _, attribute = path.rpartition(":") if ":" in path else path.rpartition(".")
    unknown = (
        f"unknown replication policy class {path!r} "
        "(use DefaultReplicationPolicy, IdentityReplicationPolicy or a Python class path)"
    )
    if not module_name or not attribute:
        raise ConfigError(unknown, key=key, line=line)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{unknown}: {exc}", key=key, line=line) from exc
    if not hasattr(module, attribute):
        raise ConfigError(f"{unknown}: module {module_name!r} has no attribute {attribute!r}", key=key, line=line)
    return getattr(module, attribute)


def is_cycle(policy: ReplicationPolicy, target_alias: str, topic: str) -> bool:
    """True when ``topic`` (or a topic it was replicated from) came from ``target_alias``."""
    while True:
        source = policy.topic_source(topic)
        if source is None:
            return False
        if source == target_alias:
            return True
        upstream = policy.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return False
        topic = upstream


def should_replicate_topic(
    policy: ReplicationPolicy,
    topics: RegexFilter,
    source_alias: str,
    target_alias: str,
    topic: str,
    *,
    heartbeats_replication: bool = True,
) -> bool:
    """MM2's rule: (passes ``topics`` or is a heartbeats topic) and not internal and not a cycle.

    ``heartbeats_replication`` is MM2's ``heartbeats.replication.enabled``: when false, heartbeats topics
    are replicated only if ``topics`` selects them.  ``source_alias`` names the flow's source for
    completeness; MM2's rule itself only depends on the target.
    """
    selected = topics.matches(topic) or (heartbeats_replication and policy.is_heartbeats_topic(topic))
    return selected and not policy.is_internal_topic(topic) and not is_cycle(policy, target_alias, topic)
