"""Every setting airmirror reads from an MM2 properties file, declared once: key, kind of value, default, meaning,
group and origin (MirrorMaker 2's own key, or airmirror's).

:class:`~airmirror.config.mirror_config.FlowConfig` builds its settings groups (:mod:`airmirror.config.flow_settings`)
from these declarations and nothing else, ``airmirror validate --explain`` prints each with its source, and the
configuration reference (``docs/configuration.md``, :mod:`airmirror.config.reference`) is generated from them: a test
fails when the page and this module differ.  Adding a setting is one :func:`define` here plus its use.

Rules:

* A default is the text a user would write, parsed by the key's own parser (:mod:`airmirror.config.setting_types`);
  ``None`` means unset, for which the reader decides (``default_doc`` then says what happens).
* A key's *scope* says where the file may set it: a flow key is top-level ``KEY`` or per flow
  ``{source}->{target}.KEY`` (the flow's wins); a cluster key is ``{alias}.KEY``; a worker key is MM2's dedicated-mode
  worker setting, top-level ``KEY`` (which wins) or ``{target}.KEY``; a file key is top-level only.
* Every key MM2 defines for its connectors is declared with origin MM2, also those airmirror accepts without using
  them (group :attr:`Group.ACCEPTED`: so the file of a running MM2 loads unchanged, and ``airmirror validate`` names
  each one the file sets, with the reason it is not needed); ``airmirror.*`` keys are airmirror's.  A key declared
  nowhere here is named by :mod:`airmirror.config.key_audit`.
* A key's ``aliases`` are MM2's deprecated names of it (the ``*.blacklist`` keys of MM2 up to 3.9), read as MM2's
  ``ConfigUtils.translateDeprecatedConfigs`` reads them: the alias only when the key itself is unset.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, TypeVar

from airmirror.config.properties import Setting
from airmirror.config.setting_types import (
    BOOLEAN,
    INTEGER,
    INTERVAL_SECONDS,
    NON_EMPTY_TEXT,
    PATTERNS,
    POSITIVE_DURATION,
    POSITIVE_INTEGER,
    REPLICA_COUNT,
    TEXT,
    ValueType,
    at_least,
    mm2_class,
    one_of,
)

T = TypeVar("T")


class Origin(Enum):
    """Whose key it is."""

    MM2 = "MirrorMaker 2"
    AIRMIRROR = "airmirror"


class Scope(Enum):
    """Where the file may set a key (see the module docstring)."""

    FLOW = "top-level or `{source}->{target}.`"
    CLUSTER = "`{alias}.`"
    WORKER = "top-level or `{target}.`"
    FILE = "top-level"


class Group(Enum):
    """The part of airmirror that reads a key; the reference page lists groups in this order."""

    CLUSTERS = "Clusters and flows"
    TOPICS = "Topic and group selection"
    POLICY = "Remote topic names"
    TOPIC_SYNC = "Remote topics: creation, configs and ACLs"
    COPY = "The copy"
    SCHEMAS = "Schema registries"
    HEARTBEATS = "Heartbeats"
    CHECKPOINTS = "Checkpoints and consumer-group offsets"
    OFFSET_SYNCS = "MM2's offset-syncs topic"
    INTERNAL_TOPICS = "Internal topics"
    SPARK = "Spark"
    DAG = "Airflow"
    METADATA = "Metadata DB"
    ACCEPTED = "MM2 keys accepted without effect"


@dataclass(frozen=True, kw_only=True)
class SettingKey(Generic[T]):
    """One declared setting (see the module docstring for ``default``, ``default_doc`` and ``scope``)."""

    name: str
    type: ValueType[T]
    default: str | None
    doc: str
    group: Group
    origin: Origin
    scope: Scope = Scope.FLOW
    default_doc: str | None = None
    blank_is_unset: bool = False
    aliases: tuple[str, ...] = ()

    def value(self, setting: Setting | None) -> T:
        """The typed value ``setting`` gives, or the default's when unset (or blank, for a key whose
        ``blank_is_unset``: a value such as ``${env:NAME}`` of an empty variable); raises :class:`LookupError` for a
        key without a default (read it with :meth:`optional`)."""
        setting = self.given(setting)
        if setting is None:
            if self.default is None:
                raise LookupError(f"{self.name} has no default")
            setting = Setting(self.name, self.default)
        return self.type.parse(setting)

    def optional(self, setting: Setting | None) -> T | None:
        """The typed value ``setting`` gives, the default's when unset, ``None`` when unset without a default."""
        return None if self.given(setting) is None and self.default is None else self.value(setting)

    def given(self, setting: Setting | None) -> Setting | None:
        """``setting``, or ``None`` when it counts as unset (blank, for a key whose ``blank_is_unset``)."""
        if setting is not None and self.blank_is_unset and not setting.value.strip():
            return None
        return setting

    def described_default(self) -> str:
        """The default as the reference page shows it."""
        if self.default_doc is not None:
            return self.default_doc
        return "" if self.default is None else f"`{self.default}`"


@dataclass(frozen=True, kw_only=True)
class SettingPrefix:
    """A family of keys ``{prefix}X`` passed on as they are (e.g. ``airmirror.spark.conf.X``)."""

    prefix: str
    doc: str
    group: Group
    origin: Origin
    scope: Scope = Scope.FLOW


@dataclass
class _Registry:
    keys: dict[str, SettingKey[object]] = field(default_factory=dict)
    prefixes: list[SettingPrefix] = field(default_factory=list)


_REGISTRY = _Registry()


def define(key: SettingKey[T]) -> SettingKey[T]:
    """Declare ``key`` (once: a second declaration of the same name is a programming error)."""
    if key.name in _REGISTRY.keys:
        raise ValueError(f"setting {key.name} is declared twice")
    _REGISTRY.keys[key.name] = key  # type: ignore[assignment]  # T is erased in the registry, kept at each use
    return key


def define_prefix(prefix: SettingPrefix) -> SettingPrefix:
    """Declare a family of passed-on keys."""
    _REGISTRY.prefixes.append(prefix)
    return prefix


def all_keys() -> Iterator[SettingKey[object]]:
    """Every declared key, in declaration order."""
    return iter(_REGISTRY.keys.values())


def all_prefixes() -> Iterator[SettingPrefix]:
    """Every declared key family."""
    return iter(_REGISTRY.prefixes)


def declared(name: str) -> SettingKey[object] | None:
    """The declaration of key ``name``, if any."""
    return _REGISTRY.keys.get(name)


def is_declared(name: str) -> bool:
    """True for a declared key, a deprecated alias of one, or a key of a declared family."""
    return (
        name in _REGISTRY.keys
        or alias_target(name) is not None
        or any(name.startswith(p.prefix) for p in _REGISTRY.prefixes)
    )


def alias_target(name: str) -> SettingKey[object] | None:
    """The declared key of which ``name`` is a deprecated alias, if any."""
    return next((key for key in _REGISTRY.keys.values() if name in key.aliases), None)


def mm2_keys(scope: Scope = Scope.FLOW) -> frozenset[str]:
    """The names of MM2's keys of ``scope`` (replication settings: read top-level or per flow)."""
    return frozenset(
        name
        for k in _REGISTRY.keys.values()
        if k.origin is Origin.MM2 and k.scope is scope
        for name in (k.name, *k.aliases)
    )


MM2 = Origin.MM2
OURS = Origin.AIRMIRROR

# -- clusters and flows ---------------------------------------------------------------------------------------------
CLUSTERS = define(
    SettingKey(
        name="clusters",
        type=NON_EMPTY_TEXT,
        default=None,
        doc="the cluster aliases, comma-separated; each needs `{alias}.bootstrap.servers` or `{alias}.airflow.conn.id`",
        group=Group.CLUSTERS,
        origin=MM2,
        scope=Scope.FILE,
        default_doc="required",
    )
)
BOOTSTRAP_SERVERS = define(
    SettingKey(
        name="bootstrap.servers",
        type=NON_EMPTY_TEXT,
        default=None,
        doc="the cluster's brokers; may come from its Airflow connection instead",
        group=Group.CLUSTERS,
        origin=MM2,
        scope=Scope.CLUSTER,
        default_doc="required, unless the cluster's Airflow connection gives it",
    )
)
AIRFLOW_CONN_ID = define(
    SettingKey(
        name="airflow.conn.id",
        type=NON_EMPTY_TEXT,
        default=None,
        doc=(
            "take the cluster's client settings from this Airflow connection (type `kafka`, settings in its extra), "
            "resolved when a task runs; the file's keys for the cluster override them"
        ),
        group=Group.CLUSTERS,
        origin=OURS,
        scope=Scope.CLUSTER,
        default_doc="none",
    )
)
ENABLED = define(
    SettingKey(
        name="enabled",
        type=BOOLEAN,
        default="false",
        doc=(
            "`{source}->{target}.enabled = true` turns the flow on: it becomes the Airflow DAG "
            "`airmirror__{source}__{target}`"
        ),
        group=Group.CLUSTERS,
        origin=MM2,
    )
)

# -- topic and group selection --------------------------------------------------------------------------------------
TOPICS = define(
    SettingKey(
        name="topics",
        type=PATTERNS,
        default=".*",
        doc="topics to replicate (MM2's DefaultTopicFilter); every batch lists topics afresh",
        group=Group.TOPICS,
        origin=MM2,
    )
)
TOPICS_EXCLUDE = define(
    SettingKey(
        name="topics.exclude",
        type=PATTERNS,
        default=r".*[\-\.]internal, .*\.replica, __.*",
        doc="topics never replicated; MM2's deprecated `topics.blacklist` is read when this key is unset",
        group=Group.TOPICS,
        origin=MM2,
        aliases=("topics.blacklist",),
    )
)
GROUPS = define(
    SettingKey(
        name="groups",
        type=PATTERNS,
        default=".*",
        doc="consumer groups that checkpoints and group offset sync cover; listed at every checkpoint run",
        group=Group.TOPICS,
        origin=MM2,
    )
)
GROUPS_EXCLUDE = define(
    SettingKey(
        name="groups.exclude",
        type=PATTERNS,
        default="console-consumer-.*, connect-.*, __.*",
        doc="consumer groups never checkpointed; MM2's deprecated `groups.blacklist` is read when this key is unset",
        group=Group.TOPICS,
        origin=MM2,
        aliases=("groups.blacklist",),
    )
)
TOPIC_FILTER_CLASS = define(
    SettingKey(
        name="topic.filter.class",
        type=mm2_class("org.apache.kafka.connect.mirror.DefaultTopicFilter"),
        default="org.apache.kafka.connect.mirror.DefaultTopicFilter",
        doc="only MM2's default filter (`topics`, `topics.exclude`) is implemented",
        group=Group.TOPICS,
        origin=MM2,
    )
)
GROUP_FILTER_CLASS = define(
    SettingKey(
        name="group.filter.class",
        type=mm2_class("org.apache.kafka.connect.mirror.DefaultGroupFilter"),
        default="org.apache.kafka.connect.mirror.DefaultGroupFilter",
        doc="only MM2's default filter (`groups`, `groups.exclude`) is implemented",
        group=Group.TOPICS,
        origin=MM2,
    )
)
HEARTBEATS_REPLICATION_ENABLED = define(
    SettingKey(
        name="heartbeats.replication.enabled",
        type=BOOLEAN,
        default="true",
        doc="copy the source's heartbeats topics whatever `topics` says",
        group=Group.TOPICS,
        origin=MM2,
    )
)

# -- remote topic names ---------------------------------------------------------------------------------------------
REPLICATION_POLICY_CLASS = define(
    SettingKey(
        name="replication.policy.class",
        type=NON_EMPTY_TEXT,
        default="org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
        doc="MM2's DefaultReplicationPolicy or IdentityReplicationPolicy, or a Python class path (`pkg.module.Class`)",
        group=Group.POLICY,
        origin=MM2,
    )
)
REPLICATION_POLICY_SEPARATOR = define(
    SettingKey(
        name="replication.policy.separator",
        type=NON_EMPTY_TEXT,
        default=".",
        doc="between the source alias and the topic in a remote topic's name",
        group=Group.POLICY,
        origin=MM2,
    )
)
INTERNAL_TOPIC_SEPARATOR_ENABLED = define(
    SettingKey(
        name="replication.policy.internal.topic.separator.enabled",
        type=BOOLEAN,
        default="true",
        doc="whether MM2's internal topic names (offset syncs, checkpoints) use the separator too",
        group=Group.POLICY,
        origin=MM2,
    )
)

# -- remote topics --------------------------------------------------------------------------------------------------
REPLICATION_FACTOR = define(
    SettingKey(
        name="replication.factor",
        type=REPLICA_COUNT,
        default="2",
        doc=(
            "replication factor of the remote topics airmirror creates; a factor larger than the target cluster fails "
            "with an error naming the key"
        ),
        group=Group.TOPIC_SYNC,
        origin=MM2,
    )
)
SYNC_TOPIC_CONFIGS_ENABLED = define(
    SettingKey(
        name="sync.topic.configs.enabled",
        type=BOOLEAN,
        default="true",
        doc="copy topic configs to existing remote topics at each topic sync (created topics always get them)",
        group=Group.TOPIC_SYNC,
        origin=MM2,
    )
)
SYNC_TOPIC_CONFIGS_INTERVAL = define(
    SettingKey(
        name="sync.topic.configs.interval.seconds",
        type=INTERVAL_SECONDS,
        default="600",
        doc="negative: no config sync of existing topics, as in MM2; otherwise every batch syncs",
        group=Group.TOPIC_SYNC,
        origin=MM2,
    )
)
CONFIG_PROPERTIES_EXCLUDE = define(
    SettingKey(
        name="config.properties.exclude",
        type=PATTERNS,
        default=(
            r"follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, "
            r"message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, "
            r"unclean\.leader\.election\.enable, min\.insync\.replicas"
        ),
        doc=(
            "topic configs never copied; MM2's deprecated `config.properties.blacklist` is read when this key is unset"
        ),
        group=Group.TOPIC_SYNC,
        origin=MM2,
        aliases=("config.properties.blacklist",),
    )
)
CONFIG_PROPERTY_FILTER_CLASS = define(
    SettingKey(
        name="config.property.filter.class",
        type=mm2_class("org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter"),
        default="org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter",
        doc="only MM2's default filter (`config.properties.exclude`) is implemented",
        group=Group.TOPIC_SYNC,
        origin=MM2,
    )
)
SYNC_TOPIC_ACLS_ENABLED = define(
    SettingKey(
        name="sync.topic.acls.enabled",
        type=BOOLEAN,
        default="true",
        doc=(
            "at each topic sync, MM2's rules: LITERAL topic ACLs of replicated topics are copied to their remote "
            "topics, ALLOW WRITE dropped, ALLOW ALL copied as READ, DENY kept; only added, never deleted. Needs "
            "Cluster DESCRIBE on the source and Cluster ALTER on the target; a cluster without an authorizer syncs "
            "nothing (one warning)"
        ),
        group=Group.TOPIC_SYNC,
        origin=MM2,
    )
)
SYNC_TOPIC_ACLS_INTERVAL = define(
    SettingKey(
        name="sync.topic.acls.interval.seconds",
        type=INTERVAL_SECONDS,
        default="600",
        doc="negative: no ACL sync, as in MM2; otherwise every batch syncs",
        group=Group.TOPIC_SYNC,
        origin=MM2,
    )
)
REFRESH_TOPICS_ENABLED = define(
    SettingKey(
        name="refresh.topics.enabled",
        type=BOOLEAN,
        default="true",
        doc="accepted; every batch lists topics afresh, so new topics and partitions join at the next batch",
        group=Group.TOPIC_SYNC,
        origin=MM2,
    )
)
REFRESH_TOPICS_INTERVAL = define(
    SettingKey(
        name="refresh.topics.interval.seconds",
        type=INTERVAL_SECONDS,
        default="600",
        doc="accepted (0 refused, as in MM2); every batch lists topics afresh",
        group=Group.TOPIC_SYNC,
        origin=MM2,
    )
)

# -- the copy -------------------------------------------------------------------------------------------------------
BATCH_MAX_RECORDS = define(
    SettingKey(
        name="airmirror.batch.max.records.per.partition",
        type=POSITIVE_INTEGER,
        default=None,
        doc="cap of one batch per partition (`replicate --max-records` overrides)",
        group=Group.COPY,
        origin=OURS,
        default_doc="no cap",
    )
)
TRANSACTION_MAX_RECORDS = define(
    SettingKey(
        name="airmirror.transaction.max.records",
        type=POSITIVE_INTEGER,
        default="500000",
        doc="records per chunk transaction of a range copy",
        group=Group.COPY,
        origin=OURS,
    )
)
TRANSACTION_MAX_BYTES = define(
    SettingKey(
        name="airmirror.transaction.max.bytes",
        type=POSITIVE_INTEGER,
        default=str(256 * 1024 * 1024),
        doc="key and value bytes per chunk transaction (256 MiB by default)",
        group=Group.COPY,
        origin=OURS,
    )
)
TRANSACTION_MAX_SECONDS = define(
    SettingKey(
        name="airmirror.transaction.max.seconds",
        type=POSITIVE_INTEGER,
        default="60",
        doc=(
            "seconds per chunk transaction, counted from its first record; never more than a third of the target "
            "producer's `transaction.timeout.ms` (default 900000)"
        ),
        group=Group.COPY,
        origin=OURS,
    )
)
LIVE_TRANSACTION_MAX_MS = define(
    SettingKey(
        name="airmirror.live.transaction.max.ms",
        type=POSITIVE_INTEGER,
        default="100",
        doc=(
            "a streaming live run's chunk transactions commit as soon as the read has nothing more fetched, and at "
            "the latest this many milliseconds after their first record: the bound on a chunk under load"
        ),
        group=Group.COPY,
        origin=OURS,
    )
)
MIN_TASK_MAX_BUFFER_BYTES = 16 * 1024 * 1024
"""One fetch (a sixteenth of a task's buffer) must hold a 1 MB record batch."""
TASK_MAX_BUFFER_BYTES = define(
    SettingKey(
        name="airmirror.task.max.buffer.bytes",
        type=at_least(
            MIN_TASK_MAX_BUFFER_BYTES,
            "16 MiB: a copy task needs room for one fetch of at least 1 MB beside its producer queue",
        ),
        default=str(256 * 1024 * 1024),
        doc=(
            "what one copy task buffers (producer queue and reader prefetch), whatever the length of its range "
            "(256 MiB by default, at least 16 MiB); client settings above their share are lowered with a warning"
        ),
        group=Group.COPY,
        origin=OURS,
    )
)
SOURCE_RESET_POLICY = define(
    SettingKey(
        name="airmirror.source.reset.policy",
        type=one_of("reset", "fail"),
        default="reset",
        doc=(
            "when a source topic was recreated or its log truncated below the cursor: `reset` starts the partition "
            "again (per `auto.offset.reset`, or at the divergence point leader epochs locate), `fail` stops it until "
            "`airmirror reset`"
        ),
        group=Group.COPY,
        origin=OURS,
    )
)

ERRORS_TOLERANCE = define(
    SettingKey(
        name="errors.tolerance",
        type=one_of("none", "all"),
        default="none",
        doc=(
            "a record whose key or value a field transform cannot process (not a JSON object): `none` fails its chunk, "
            "naming topic, partition, offset and transform; `all` skips it, as Connect does, counting it (status "
            "`records_skipped`): it is not copied (only to `errors.deadletterqueue.topic.name`, when set), and "
            "translation passes it like a filtered record"
        ),
        group=Group.COPY,
        origin=MM2,
    )
)
DEAD_LETTER_TOPIC = define(
    SettingKey(
        name="errors.deadletterqueue.topic.name",
        type=TEXT,
        default=None,
        doc=(
            "with `errors.tolerance = all`, each record a field transform cannot process is written, as it came from "
            "the source, to this one-partition topic on the target (created by the flow), in the same transaction as "
            "its chunk: the dead-letter queue is exactly once too. Kafka Connect has it for sink connectors only, so "
            "MM2's source connector ignores it"
        ),
        group=Group.COPY,
        origin=MM2,
        blank_is_unset=True,
    )
)
DEAD_LETTER_CONTEXT_HEADERS = define(
    SettingKey(
        name="errors.deadletterqueue.context.headers.enable",
        type=BOOLEAN,
        default="false",
        doc=(
            "add Connect's `__connect.errors.*` headers to each dead-lettered record: source topic, partition and "
            "offset, the flow (`connector.name`), the stage, the transform class and the failure"
        ),
        group=Group.COPY,
        origin=MM2,
    )
)
DEAD_LETTER_REPLICATION_FACTOR = define(
    SettingKey(
        name="errors.deadletterqueue.topic.replication.factor",
        type=REPLICA_COUNT,
        default="3",
        doc="replication factor of the dead-letter topic the flow creates",
        group=Group.COPY,
        origin=MM2,
    )
)

# -- schema registries ----------------------------------------------------------------------------------------------
SCHEMA_REGISTRY_URL = define(
    SettingKey(
        name="schema.registry.url",
        type=NON_EMPTY_TEXT,
        default=None,
        doc=(
            "the cluster's schema registry (Confluent's REST API), one URL or several comma-separated; with a registry "
            "on both clusters a flow translates schema ids (`airmirror.schema.ids`)"
        ),
        group=Group.SCHEMAS,
        origin=OURS,
        scope=Scope.CLUSTER,
        default_doc="none: the cluster has no registry (unless its registry connection gives one)",
    )
)
SCHEMA_REGISTRY_USER_INFO = define(
    SettingKey(
        name="schema.registry.basic.auth.user.info",
        type=NON_EMPTY_TEXT,
        default=None,
        doc="HTTP basic-auth credentials `user:password` of the registry (a secret: masked everywhere)",
        group=Group.SCHEMAS,
        origin=OURS,
        scope=Scope.CLUSTER,
        default_doc="none",
    )
)
SCHEMA_REGISTRY_CREDENTIALS_SOURCE = define(
    SettingKey(
        name="schema.registry.basic.auth.credentials.source",
        type=one_of("USER_INFO", "URL"),
        default="USER_INFO",
        doc="where basic-auth credentials come from: `USER_INFO` (the key above) or `URL` (`https://user:pass@host`)",
        group=Group.SCHEMAS,
        origin=OURS,
        scope=Scope.CLUSTER,
    )
)
SCHEMA_REGISTRY_SSL_CA = define(
    SettingKey(
        name="schema.registry.ssl.ca.location",
        type=NON_EMPTY_TEXT,
        default=None,
        doc="PEM file of the CA certificates that verify the registry's certificate",
        group=Group.SCHEMAS,
        origin=OURS,
        scope=Scope.CLUSTER,
        default_doc="the system's CAs",
    )
)
SCHEMA_REGISTRY_SSL_CERTIFICATE = define(
    SettingKey(
        name="schema.registry.ssl.certificate.location",
        type=NON_EMPTY_TEXT,
        default=None,
        doc="PEM file of the client certificate (mutual TLS)",
        group=Group.SCHEMAS,
        origin=OURS,
        scope=Scope.CLUSTER,
        default_doc="none",
    )
)
SCHEMA_REGISTRY_SSL_KEY = define(
    SettingKey(
        name="schema.registry.ssl.key.location",
        type=NON_EMPTY_TEXT,
        default=None,
        doc="PEM file of the client certificate's private key",
        group=Group.SCHEMAS,
        origin=OURS,
        scope=Scope.CLUSTER,
        default_doc="none",
    )
)
SCHEMA_REGISTRY_SSL_KEY_PASSWORD = define(
    SettingKey(
        name="schema.registry.ssl.key.password",
        type=NON_EMPTY_TEXT,
        default=None,
        doc="password of that private key (a secret: masked everywhere)",
        group=Group.SCHEMAS,
        origin=OURS,
        scope=Scope.CLUSTER,
        default_doc="none",
    )
)
SCHEMA_REGISTRY_CONN_ID = define(
    SettingKey(
        name="schema.registry.airflow.conn.id",
        type=NON_EMPTY_TEXT,
        default=None,
        doc=(
            "take the registry from this Airflow connection (type `http`: host, port, schema `http`/`https`, login and "
            "password for basic auth; TLS keys above in its extra), resolved when a task runs; the file's keys win"
        ),
        group=Group.SCHEMAS,
        origin=OURS,
        scope=Scope.CLUSTER,
        default_doc="none",
    )
)
SCHEMA_IDS = define(
    SettingKey(
        name="airmirror.schema.ids",
        type=one_of("translate", "keep", "off"),
        default=None,
        doc=(
            "what happens to the schema ids in copied records: `translate` registers the source's subjects on the "
            "target registry and rewrites each record's id to the target's; `keep` imports the schemas with their ids "
            "(the target registry in IMPORT mode) and copies records unchanged; `off` leaves both registries alone"
        ),
        group=Group.SCHEMAS,
        origin=OURS,
        default_doc="`translate` when both clusters have a registry, `off` otherwise",
    )
)
SCHEMA_UNKNOWN = define(
    SettingKey(
        name="airmirror.schema.unknown",
        type=one_of("fail", "pass"),
        default="fail",
        doc=(
            "a record whose schema id the source registry does not know (or whose schema the target registry "
            "refuses, or whose GUID header a registry cannot name): `fail` stops the batch naming topic, partition, "
            "offset and id (nothing of that chunk written); `pass` copies it unchanged and counts it"
        ),
        group=Group.SCHEMAS,
        origin=OURS,
    )
)
SCHEMA_TOPICS = define(
    SettingKey(
        name="airmirror.schema.topics",
        type=PATTERNS,
        default="",
        doc=(
            "topics whose keys and values are framed by a schema-registry serializer although the source registry "
            "has no `{topic}-key`/`{topic}-value` subject for them (e.g. with RecordNameStrategy)"
        ),
        group=Group.SCHEMAS,
        origin=OURS,
        default_doc="none: only topics with a subject",
    )
)
SCHEMA_RECORD_SUBJECTS = define(
    SettingKey(
        name="airmirror.schema.record.subjects",
        type=PATTERNS,
        default="",
        doc=(
            "subjects not named after a topic (RecordNameStrategy, TopicRecordNameStrategy) to sync too; they keep "
            "their names on the target"
        ),
        group=Group.SCHEMAS,
        origin=OURS,
        default_doc="none",
    )
)

# -- heartbeats -----------------------------------------------------------------------------------------------------
EMIT_HEARTBEATS_ENABLED = define(
    SettingKey(
        name="emit.heartbeats.enabled",
        type=BOOLEAN,
        default="true",
        doc="emit MM2 heartbeats to the target's `heartbeats` topic",
        group=Group.HEARTBEATS,
        origin=MM2,
    )
)
EMIT_HEARTBEATS_INTERVAL = define(
    SettingKey(
        name="emit.heartbeats.interval.seconds",
        type=INTERVAL_SECONDS,
        default="1",
        doc="at most one heartbeat per interval (the DAG's runs decide when); negative turns heartbeats off",
        group=Group.HEARTBEATS,
        origin=MM2,
    )
)

# -- checkpoints and group offsets ----------------------------------------------------------------------------------
EMIT_CHECKPOINTS_ENABLED = define(
    SettingKey(
        name="emit.checkpoints.enabled",
        type=BOOLEAN,
        default="true",
        doc="emit MM2 checkpoints to `{source}.checkpoints.internal` on the target, translated exactly",
        group=Group.CHECKPOINTS,
        origin=MM2,
    )
)
EMIT_CHECKPOINTS_INTERVAL = define(
    SettingKey(
        name="emit.checkpoints.interval.seconds",
        type=INTERVAL_SECONDS,
        default="60",
        doc="at most one checkpoint run per interval; negative turns checkpoints off",
        group=Group.CHECKPOINTS,
        origin=MM2,
    )
)
SYNC_GROUP_OFFSETS_ENABLED = define(
    SettingKey(
        name="sync.group.offsets.enabled",
        type=BOOLEAN,
        default="false",
        doc="commit translated offsets of groups that are inactive on the target",
        group=Group.CHECKPOINTS,
        origin=MM2,
    )
)
SYNC_GROUP_OFFSETS_INTERVAL = define(
    SettingKey(
        name="sync.group.offsets.interval.seconds",
        type=INTERVAL_SECONDS,
        default="60",
        doc="negative turns group offset sync off",
        group=Group.CHECKPOINTS,
        origin=MM2,
    )
)
REFRESH_GROUPS_ENABLED = define(
    SettingKey(
        name="refresh.groups.enabled",
        type=BOOLEAN,
        default="true",
        doc="accepted; groups are listed at every checkpoint run",
        group=Group.CHECKPOINTS,
        origin=MM2,
    )
)
REFRESH_GROUPS_INTERVAL = define(
    SettingKey(
        name="refresh.groups.interval.seconds",
        type=INTERVAL_SECONDS,
        default="600",
        doc="accepted (0 refused, as in MM2); groups are listed at every checkpoint run",
        group=Group.CHECKPOINTS,
        origin=MM2,
    )
)

# -- MM2's offset-syncs topic ---------------------------------------------------------------------------------------
EMIT_OFFSET_SYNCS_ENABLED = define(
    SettingKey(
        name="emit.offset-syncs.enabled",
        type=BOOLEAN,
        default="true",
        doc=(
            "after each committed batch, write exact syncs from the batch's runs to MM2's offset-syncs topic, for "
            "tools built on MM2's client (airmirror itself translates from its metadata DB); false also turns "
            "checkpoints and group offset sync off, as MM2's checkpoint connector cannot run without offset syncs"
        ),
        group=Group.OFFSET_SYNCS,
        origin=MM2,
    )
)
OFFSET_SYNCS_TOPIC_LOCATION = define(
    SettingKey(
        name="offset-syncs.topic.location",
        type=one_of("source", "target"),
        default="source",
        doc="`mm2-offset-syncs.{target}.internal` on the source, or `mm2-offset-syncs.{source}.internal` on the target",
        group=Group.OFFSET_SYNCS,
        origin=MM2,
    )
)
OFFSET_LAG_MAX = define(
    SettingKey(
        name="offset.lag.max",
        type=INTEGER,
        default="100",
        doc="spacing of the syncs written to the offset-syncs topic: a batch's first copied record, every n-th after "
        "it (records a transform dropped count none), its last",
        group=Group.OFFSET_SYNCS,
        origin=MM2,
    )
)

# -- internal topics ------------------------------------------------------------------------------------------------
HEARTBEATS_TOPIC_REPLICATION_FACTOR = define(
    SettingKey(
        name="heartbeats.topic.replication.factor",
        type=REPLICA_COUNT,
        default="3",
        doc="replication factor of the `heartbeats` topic airmirror creates on the target",
        group=Group.INTERNAL_TOPICS,
        origin=MM2,
    )
)
CHECKPOINTS_TOPIC_REPLICATION_FACTOR = define(
    SettingKey(
        name="checkpoints.topic.replication.factor",
        type=REPLICA_COUNT,
        default="3",
        doc="replication factor of `{source}.checkpoints.internal` on the target",
        group=Group.INTERNAL_TOPICS,
        origin=MM2,
    )
)
OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR = define(
    SettingKey(
        name="offset-syncs.topic.replication.factor",
        type=REPLICA_COUNT,
        default="3",
        doc="replication factor of MM2's offset-syncs topic",
        group=Group.INTERNAL_TOPICS,
        origin=MM2,
    )
)
OFFSET_STORAGE_REPLICATION_FACTOR = define(
    SettingKey(
        name="offset.storage.replication.factor",
        type=REPLICA_COUNT,
        default=None,
        doc=(
            "MM2's worker offsets topic factor: the batch log's, when `airmirror.batch.log.topic.replication.factor` "
            "is unset"
        ),
        group=Group.INTERNAL_TOPICS,
        origin=MM2,
        scope=Scope.WORKER,
        default_doc="unset",
    )
)
BATCH_LOG_REPLICATION_FACTOR = define(
    SettingKey(
        name="airmirror.batch.log.topic.replication.factor",
        type=REPLICA_COUNT,
        default=None,
        doc=(
            "replication factor of the batch-log topic `airmirror-batches.{source}.internal` on the target, "
            "airmirror's counterpart of MM2's worker offsets topic"
        ),
        group=Group.INTERNAL_TOPICS,
        origin=OURS,
        default_doc="`offset.storage.replication.factor`, else `offset-syncs.topic.replication.factor`",
    )
)

# -- spark ----------------------------------------------------------------------------------------------------------
SPARK_MASTER = define(
    SettingKey(
        name="airmirror.spark.master",
        type=NON_EMPTY_TEXT,
        default="local[*]",
        doc="Spark master of the copy job",
        group=Group.SPARK,
        origin=OURS,
        blank_is_unset=True,
    )
)
SPARK_CONF = define_prefix(
    SettingPrefix(
        prefix="airmirror.spark.conf.",
        doc="any Spark setting `X`, for the CLI's session and the Airflow `replicate` task alike (secrets masked)",
        group=Group.SPARK,
        origin=OURS,
    )
)
SPARK_SUBMIT = define(
    SettingKey(
        name="airmirror.spark.submit",
        type=BOOLEAN,
        default="false",
        doc="run the DAG's `replicate` task as spark-submit of `spark_apps/` through `airmirror.spark.conn.id`",
        group=Group.SPARK,
        origin=OURS,
    )
)
SPARK_CONN_ID = define(
    SettingKey(
        name="airmirror.spark.conn.id",
        type=NON_EMPTY_TEXT,
        default="spark_default",
        doc="the Airflow Spark connection of spark-submit",
        group=Group.SPARK,
        origin=OURS,
        blank_is_unset=True,
    )
)

# -- airflow --------------------------------------------------------------------------------------------------------
SCHEDULE = define(
    SettingKey(
        name="airmirror.schedule",
        type=NON_EMPTY_TEXT,
        default="1m",
        doc="the flow DAG's schedule: a duration (`30s`, `5m`, `2h`, `1d`) or a cron expression",
        group=Group.DAG,
        origin=OURS,
        blank_is_unset=True,
    )
)
TASK_RETRIES = define(
    SettingKey(
        name="airmirror.task.retries",
        type=INTEGER,
        default="3",
        doc="retries of each DAG task (bad input fails at once, whatever this says)",
        group=Group.DAG,
        origin=OURS,
    )
)
LIVE = define(
    SettingKey(
        name="airmirror.live",
        type=BOOLEAN,
        default="false",
        doc="each non-backfill run replicates continuously for its data interval, streaming",
        group=Group.DAG,
        origin=OURS,
    )
)

# -- metadata db ----------------------------------------------------------------------------------------------------
METADATA_DB_URL = define(
    SettingKey(
        name="airmirror.metadata.db.url",
        type=NON_EMPTY_TEXT,
        default=None,
        doc=(
            "SQLAlchemy URL of the metadata DB; PostgreSQL: `postgresql+psycopg://user:pw@host/db` (credentials masked)"
        ),
        group=Group.METADATA,
        origin=OURS,
        default_doc="`sqlite:///$AIRMIRROR_HOME/metadata.db`",
        blank_is_unset=True,
    )
)
METADATA_RETENTION = define(
    SettingKey(
        name="airmirror.metadata.retention",
        type=POSITIVE_DURATION,
        default="7d",
        doc="how long the metadata DB keeps a flow's history (batches, gaps, lag samples, verifications)",
        group=Group.METADATA,
        origin=OURS,
    )
)

METADATA_PRUNE_INTERVAL = define(
    SettingKey(
        name="airmirror.metadata.prune.interval",
        type=POSITIVE_DURATION,
        default="5m",
        doc=(
            "at most how often a partition's history is pruned and its old offset-sync runs folded, by whichever run "
            "copies it (the retention, when that is shorter); each prune reads both clusters' log starts"
        ),
        group=Group.METADATA,
        origin=OURS,
    )
)

# -- accepted MM2 keys ----------------------------------------------------------------------------------------------


def _accepted(name: str, doc: str, type_: ValueType[T], default: str | None = None) -> SettingKey[T]:
    return define(SettingKey(name=name, type=type_, default=default, doc=doc, group=Group.ACCEPTED, origin=MM2))


TASKS_MAX = _accepted("tasks.max", "Spark spreads partitions over its slots instead", INTEGER, "1")
ADMIN_TIMEOUT_MS = _accepted("admin.timeout.ms", "airmirror's admin calls have their own timeouts", INTEGER, "60000")
CONSUMER_POLL_TIMEOUT_MS = _accepted(
    "consumer.poll.timeout.ms", "the copy reads with its own bounded waits", INTEGER, "1000"
)
FORWARDING_ADMIN_CLASS = define(
    SettingKey(
        name="forwarding.admin.class",
        type=mm2_class("org.apache.kafka.clients.admin.ForwardingAdmin"),
        default="org.apache.kafka.clients.admin.ForwardingAdmin",
        doc="only MM2's default admin is implemented",
        group=Group.ACCEPTED,
        origin=MM2,
    )
)
NAME = _accepted("name", "a connector name: airmirror names flows `{source}->{target}`", TEXT)
CONNECTOR_CLASS = _accepted("connector.class", "MM2's connectors are replaced by airmirror's DAG tasks", TEXT)
SOURCE_CLUSTER_ALIAS = _accepted(
    "source.cluster.alias", "a flow's source is the left side of `{source}->{target}`", TEXT
)
TARGET_CLUSTER_ALIAS = _accepted(
    "target.cluster.alias", "a flow's target is the right side of `{source}->{target}`", TEXT
)
USE_DEFAULTS_FROM = _accepted("use.defaults.from", "a deprecated MM2 key", TEXT)
CONFIG_PROVIDERS = _accepted(
    "config.providers", "`${env:NAME}` and `${file:/path/file.properties:key}` references are always resolved", TEXT
)
DEDICATED_MODE_REST = _accepted(
    "dedicated.mode.enable.internal.rest", "MM2's internal REST server has no counterpart: nothing to enable", TEXT
)
TASKS_MAX_ENFORCE = _accepted("tasks.max.enforce", "Spark spreads partitions over its slots instead", BOOLEAN, "true")
CONFIG_ACTION_RELOAD = _accepted(
    "config.action.reload", "every run reads the file afresh", one_of("none", "restart"), "restart"
)
EXACTLY_ONCE_SUPPORT = _accepted(
    "exactly.once.support", "airmirror always copies exactly once", one_of("requested", "required"), "requested"
)
TRANSACTION_BOUNDARY = _accepted(
    "transaction.boundary",
    "airmirror's transactions are its chunks (`airmirror.transaction.max.*`, `airmirror.live.transaction.max.ms`)",
    one_of("poll", "interval", "connector"),
    "poll",
)
TRANSACTION_BOUNDARY_INTERVAL_MS = _accepted(
    "transaction.boundary.interval.ms", "airmirror's transactions are its chunks (`airmirror.transaction.max.*`)", TEXT
)
OFFSETS_STORAGE_TOPIC = _accepted(
    "offsets.storage.topic", "airmirror keeps a source connector's offsets in its metadata DB and batch log", TEXT
)
ERRORS_RETRY_TIMEOUT = _accepted(
    "errors.retry.timeout", "airmirror retries transient errors by its own rules (`kafka/retry.py`)", INTEGER, "0"
)
ERRORS_RETRY_DELAY_MAX_MS = _accepted(
    "errors.retry.delay.max.ms",
    "airmirror retries transient errors by its own rules (`kafka/retry.py`)",
    INTEGER,
    "60000",
)
ERRORS_LOG_ENABLE = _accepted("errors.log.enable", "a failed record is named in the run's error", BOOLEAN, "false")
ERRORS_LOG_INCLUDE_MESSAGES = _accepted(
    "errors.log.include.messages",
    "a failed record is named by topic, partition and offset, never by content",
    BOOLEAN,
    "false",
)
METRIC_REPORTERS = _accepted(
    "metric.reporters", "airmirror reports MM2-named metrics through Airflow's metrics layer", TEXT
)
