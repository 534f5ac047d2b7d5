"""The MM2 configuration model: clusters, replication flows, and the clients of each flow.

Key classification (as MirrorMakerConfig does it):

* ``{a}->{b}.X`` is a flow key; ``a`` and ``b`` must be declared clusters;
* MM2's own connector keys and ``airmirror.*`` keys are top-level even when they start with an alias;
* ``{alias}.X`` for a declared alias is a cluster key (longest alias wins); anything else is top-level,
  so ``{alias}.X`` of an undeclared alias is ignored, like MM2 ignores it.

Connector settings of flow ``a->b`` are the top-level keys overridden by ``a->b.KEY``.  The Java client
settings of cluster ``c`` in a flow are, from lowest to highest precedence: top-level ``bootstrap.servers``,
``security.protocol``, ``ssl.*`` and ``sasl.*``; top-level ``{kind}.X``; ``{c}.X``, overridden for those MM2 client
keys by the flow's ``a->b.{source|target}.cluster.X`` (MM2's ``source.cluster.``/``target.cluster.`` connector keys);
``{c}.{kind}.X``; then, as in MM2's connector configs, the flow keys ``a->b.{kind}.X`` and
``a->b.{source|target}.{kind}.X``.  Every key no part of airmirror reads is named (:mod:`airmirror.config.key_audit`).
Consumers get MM2's defaults ``enable.auto.commit=false`` (forced) and ``auto.offset.reset=earliest``, and
``allow.auto.create.topics=false`` (forced: :data:`CONSUMER_FORCED_OFF`).

:func:`load_config` validates everything up front (every enabled flow and every client of every cluster), so
``airmirror validate`` reports problems before anything runs; the first problem raises :class:`ConfigError`
naming key and line.  Two enabled flows whose DAG ids (:func:`airmirror.names.dag_id`) would be equal are
rejected, naming both flows and the DAG id.

Replication factors (``replication.factor``, MM2's ``{heartbeats|checkpoints|offset-syncs}.topic.replication.factor``
and airmirror's ``airmirror.batch.log.topic.replication.factor``) must be positive, or -1 for the target
broker's default.  The batch-log topic is airmirror's counterpart of MM2's worker offsets topic on the target, so
without its own key it takes MM2's ``offset.storage.replication.factor`` as MM2's worker of the flow reads it
(top-level, which wins, or ``{target}.``), else ``offset-syncs.topic.replication.factor`` (default 3): an MM2 file
made for a one-broker cluster works unchanged.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from datetime import timedelta
from os import PathLike
from pathlib import Path
from typing import NamedTuple, TypeVar

from airmirror import names
from airmirror.config.client_properties import CLIENT_KINDS, ClientSettings, applies_to, translate
from airmirror.config.connections import CONN_ID_KEY, kafka_client_settings
from airmirror.config.db_urls import db_url_secrets
from airmirror.config.flow_settings import (
    TASK_BUFFER_CLIENT_KEYS,
    CheckpointSettings,
    CopySettings,
    DagSettings,
    HeartbeatSettings,
    OffsetSyncSettings,
    SparkSettings,
    TopicSyncSettings,
)
from airmirror.config.key_audit import (
    WORKER_KEYS_READ,
    audit_flow,
    audit_top_level,
    is_client_kind_key,
    is_inherited_client_key,
    is_worker_key,
)
from airmirror.config.properties import Setting, load_properties
from airmirror.config.providers import resolve_references
from airmirror.config.schema_registries import PREFIX as REGISTRY_PREFIX
from airmirror.config.schema_registries import RegistryAccess, SchemaIds, registry_access, schema_ids_mode
from airmirror.config.secrets import MaskedConfig, is_secret_key, secret_values
from airmirror.config.settings_registry import (
    BATCH_LOG_REPLICATION_FACTOR,
    BATCH_MAX_RECORDS,
    CHECKPOINTS_TOPIC_REPLICATION_FACTOR,
    CONFIG_PROPERTIES_EXCLUDE,
    DEAD_LETTER_CONTEXT_HEADERS,
    DEAD_LETTER_REPLICATION_FACTOR,
    DEAD_LETTER_TOPIC,
    EMIT_CHECKPOINTS_ENABLED,
    EMIT_CHECKPOINTS_INTERVAL,
    EMIT_HEARTBEATS_ENABLED,
    EMIT_HEARTBEATS_INTERVAL,
    EMIT_OFFSET_SYNCS_ENABLED,
    ENABLED,
    ERRORS_TOLERANCE,
    GROUPS,
    GROUPS_EXCLUDE,
    HEARTBEATS_REPLICATION_ENABLED,
    HEARTBEATS_TOPIC_REPLICATION_FACTOR,
    INTERNAL_TOPIC_SEPARATOR_ENABLED,
    LIVE,
    LIVE_TRANSACTION_MAX_MS,
    METADATA_DB_URL,
    METADATA_RETENTION,
    OFFSET_LAG_MAX,
    OFFSET_STORAGE_REPLICATION_FACTOR,
    OFFSET_SYNCS_TOPIC_LOCATION,
    OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR,
    REPLICATION_FACTOR,
    REPLICATION_POLICY_CLASS,
    REPLICATION_POLICY_SEPARATOR,
    SCHEDULE,
    SCHEMA_IDS,
    SOURCE_RESET_POLICY,
    SPARK_CONF,
    SPARK_CONN_ID,
    SPARK_MASTER,
    SPARK_SUBMIT,
    SYNC_GROUP_OFFSETS_ENABLED,
    SYNC_GROUP_OFFSETS_INTERVAL,
    SYNC_TOPIC_ACLS_ENABLED,
    SYNC_TOPIC_ACLS_INTERVAL,
    SYNC_TOPIC_CONFIGS_ENABLED,
    SYNC_TOPIC_CONFIGS_INTERVAL,
    TASK_MAX_BUFFER_BYTES,
    TASK_RETRIES,
    TOPICS,
    TOPICS_EXCLUDE,
    TRANSACTION_MAX_BYTES,
    TRANSACTION_MAX_RECORDS,
    TRANSACTION_MAX_SECONDS,
    Scope,
    SettingKey,
    all_keys,
    declared,
    is_declared,
    mm2_keys,
)
from airmirror.config.transforms import (
    Step,
    TransformChain,
    flow_chain,
    routed_remote_topic,
    top_level_warnings,
    transform_keys,
)
from airmirror.errors import ConfigError
from airmirror.mm2.policy import (
    IdentityReplicationPolicy,
    RegexFilter,
    ReplicationPolicy,
    load_policy,
    should_replicate_topic,
)

T = TypeVar("T")
CONSUMER_FORCED_OFF = {
    "enable.auto.commit": "airmirror (like MM2) never auto-commits consumer offsets",
    "allow.auto.create.topics": "airmirror's consumers never create a topic (a deleted source topic stays deleted)",
}
"""Consumer settings airmirror always sets to ``false``, whatever the file says, and why (``validate`` names a file
that says otherwise)."""
_FLOW_ARROW = "->"
BATCH_LOG_REPLICATION_FACTOR_KEY = BATCH_LOG_REPLICATION_FACTOR.name
_WORKER_OFFSETS_FACTOR_KEY = OFFSET_STORAGE_REPLICATION_FACTOR.name
_MM2_KEYS = mm2_keys(Scope.FLOW) | mm2_keys(Scope.FILE)
_AIRMIRROR_PREFIX = "airmirror."


def load_config(path: str | PathLike[str], env: Mapping[str, str] | None = None) -> MirrorConfig:
    """Load, resolve (``${env:}``/``${file:}``) and fully validate the MM2 properties file at ``path``.

    ``env`` is the environment used by ``${env:NAME}`` and ``AIRMIRROR_HOME`` (default ``os.environ``).
    """
    environment = os.environ if env is None else env
    settings = resolve_references(load_properties(path), environment)
    return MirrorConfig(Path(path), settings, environment)


def _is_mm2_key(key: str) -> bool:
    return key in _MM2_KEYS or key.startswith(_AIRMIRROR_PREFIX) or key.startswith("replication.policy.")


def _strip_prefix(settings: Mapping[str, Setting], prefix: str) -> dict[str, Setting]:
    """Settings whose key starts with ``prefix``, keyed without it (MM2 keys such as
    ``consumer.poll.timeout.ms`` are not client keys and are left out)."""
    return {
        key[len(prefix) :]: setting
        for key, setting in settings.items()
        if key.startswith(prefix) and not _is_mm2_key(key)
    }


# A layer of client settings: the settings and whether they target one client kind only.
_Layer = tuple[Mapping[str, Setting], bool]


class MirrorConfig:
    """A validated mm2.properties file.  Build it with :func:`load_config`."""

    def __init__(self, path: Path, settings: Mapping[str, Setting], env: Mapping[str, str]) -> None:
        self.path = path
        self._env = env
        self.warnings: list[str] = []
        self.clusters = self._parse_clusters(settings)
        self._top: dict[str, Setting] = {}
        self._cluster: dict[str, dict[str, Setting]] = {alias: {} for alias in self.clusters}
        self._flow_settings: dict[tuple[str, str], dict[str, Setting]] = {}
        self._connections: dict[str, dict[str, str]] = {}
        for key, setting in settings.items():
            self._classify(key, setting)
        for alias in self.clusters:
            self.bootstrap_servers(alias)
        self.registries: dict[str, RegistryAccess | None] = {
            alias: registry_access(alias, self._cluster[alias].get) for alias in self.clusters
        }
        self._warn_about_ignored_keys()
        self._flows = {flow.name: flow for flow in self._build_flows()}
        self._check_dag_ids()
        self._warn_about_routed_cycles()
        for alias in self.clusters:
            for kind in CLIENT_KINDS:
                self.client_settings(alias, kind, ())
        self._warn_about_loops()
        if not self._flows:
            self._warn("no replication flow is enabled (set '{source}->{target}.enabled = true')")

    def enabled_flows(self) -> list[FlowConfig]:
        """Every flow with ``{a}->{b}.enabled = true``, in the order of those lines in the file."""
        return list(self._flows.values())

    def flow(self, name: str) -> FlowConfig:
        """The enabled flow ``name`` (``"a->b"``); raises :class:`ConfigError` for any other name."""
        if name not in self._flows:
            enabled = ", ".join(self._flows) or "none"
            raise ConfigError(f"no enabled flow {name!r} (enabled flows: {enabled})", key=f"{name}.enabled")
        return self._flows[name]

    def bootstrap_servers(self, alias: str) -> str | None:
        """``{alias}.bootstrap.servers`` of a declared cluster; ``None`` when the file leaves it to the cluster's
        Airflow connection (``{alias}.airflow.conn.id``, :mod:`airmirror.config.connections`)."""
        if alias not in self._cluster:
            raise ConfigError(f"unknown cluster alias {alias!r} (clusters: {', '.join(self.clusters)})", key="clusters")
        setting = self._cluster[alias].get("bootstrap.servers")
        if setting is None or not setting.value.strip():
            if self._cluster[alias].get(CONN_ID_KEY) is not None:
                return None
            raise ConfigError(
                f"cluster {alias!r} has no bootstrap servers",
                key=f"{alias}.bootstrap.servers",
                line=None if setting is None else setting.line,
            )
        return setting.value.strip()

    @property
    def home(self) -> str:
        """airmirror's local state folder: ``$AIRMIRROR_HOME`` (default ``./.airmirror``), absolute."""
        return os.path.abspath(self._env.get("AIRMIRROR_HOME") or "./.airmirror")

    def cluster_setting(self, alias: str, key: str) -> Setting | None:
        """The file's ``{alias}.{key}``, if set."""
        return self._cluster[alias].get(key)

    def cluster_value(self, alias: str, key: str) -> str | None:
        """The value of ``{alias}.{key}`` in the file, if set."""
        setting = self.cluster_setting(alias, key)
        return None if setting is None else setting.value

    def worker_setting(self, target: str, key: str) -> Setting | None:
        """Worker setting ``key`` (an ``offset.storage.*`` key) of the MM2 worker that runs flows into
        ``target``, as MM2's ``workerConfig`` reads it: top-level ``KEY`` wins over ``{target}.KEY``."""
        return self._top.get(key) or self._cluster[target].get(key)

    def top_level_settings(self) -> Mapping[str, Setting]:
        """The file's top-level (connector and ``airmirror.*``) settings, which every flow inherits."""
        return self._top

    def client_config(self, alias: str, kind: str) -> dict[str, str]:
        """librdkafka settings of a ``kind`` client of cluster ``alias``, without any flow override."""
        return self.with_connection(alias, self.client_settings(alias, kind, ()).config)

    def connection_id(self, alias: str) -> str | None:
        """The Airflow connection ``{alias}.airflow.conn.id`` names, if any."""
        setting = self._cluster[alias].get(CONN_ID_KEY)
        return None if setting is None else setting.value.strip()

    def registry_connection_id(self, alias: str) -> str | None:
        """The Airflow connection ``{alias}.schema.registry.airflow.conn.id`` names, if any."""
        registry = self.registries[alias]
        return None if registry is None or registry.conn_id is None else registry.conn_id.value.strip()

    def with_connection(self, alias: str, config: Mapping[str, str]) -> MaskedConfig:
        """``config`` over the client settings of the cluster's Airflow connection, when it names one; the
        connection is resolved on first use and kept for the life of this config (connections module, rule 2).
        ConfigError when neither supplies ``bootstrap.servers``."""
        setting = self._cluster[alias].get(CONN_ID_KEY)
        if setting is None:
            return MaskedConfig(config)
        if alias not in self._connections:
            self._connections[alias] = kafka_client_settings(setting.value.strip(), setting.key, setting.line)
        merged = MaskedConfig({**self._connections[alias], **config})
        if not merged.get("bootstrap.servers"):
            raise ConfigError(
                f"neither the file nor Airflow connection '{setting.value.strip()}' sets bootstrap.servers of "
                f"cluster {alias!r}",
                key=setting.key,
                line=setting.line,
            )
        return merged

    def client_settings(
        self,
        alias: str,
        kind: str,
        flow_layers: Iterable[_Layer],
        cluster_overrides: Mapping[str, Setting] | None = None,
    ) -> ClientSettings:
        """Merge the client layers of ``alias`` (``cluster_overrides``, a flow's ``{source|target}.cluster.X``,
        over its ``{alias}.X``; then ``flow_layers``), translate, apply MM2's consumer defaults; warnings are
        recorded in :attr:`warnings` once."""
        self.bootstrap_servers(alias)
        cluster = self._cluster[alias]
        layers: list[_Layer] = [
            ({key: s for key, s in self._top.items() if is_inherited_client_key(key)}, False),
            (_strip_prefix(self._top, f"{kind}."), True),
            ({key: s for key, s in cluster.items() if self._is_cluster_client_key(key)}, False),
            (cluster_overrides or {}, False),
            (_strip_prefix(cluster, f"{kind}."), True),
            *flow_layers,
        ]
        merged: dict[str, Setting] = {}
        for layer, kind_specific in layers:
            merged.update((key, s) for key, s in layer.items() if kind_specific or applies_to(key, kind))
        translation = translate(merged, kind, TASK_BUFFER_CLIENT_KEYS.get(kind, ()))
        if kind == "consumer":
            for key, why in CONSUMER_FORCED_OFF.items():
                given = merged.get(key)
                if given is not None and given.value.strip().lower() != "false":
                    translation.warnings.append(f"{given.describe()}: ignored, {why}")
                translation.config[key] = "false"
            translation.config.setdefault("auto.offset.reset", "earliest")
        self._warn(*translation.warnings)
        return translation

    def secret_values(self) -> set[str]:
        """The non-empty values of every secret key of the file (after ``${...}`` resolution)."""
        layers = [self._top, *self._cluster.values(), *self._flow_settings.values()]
        settings = (setting for layer in layers for setting in layer.values())
        return {setting.value for setting in settings if setting.value and is_secret_key(setting.key)}

    def _warn(self, *warnings: str) -> None:
        """Record ``warnings`` that are not recorded yet."""
        self.warnings.extend(warning for warning in warnings if warning not in self.warnings)

    @staticmethod
    def _is_cluster_client_key(key: str) -> bool:
        return key != CONN_ID_KEY and not (
            is_client_kind_key(key) or is_worker_key(key) or _is_mm2_key(key) or key.startswith(REGISTRY_PREFIX)
        )

    @staticmethod
    def _parse_clusters(settings: Mapping[str, Setting]) -> tuple[str, ...]:
        setting = settings.get("clusters")
        if setting is None:
            raise ConfigError("missing: list the cluster aliases, e.g. 'clusters = a, b'", key="clusters")
        aliases = [alias for alias in re.split(r"\s*,\s*", setting.value.strip()) if alias]
        if not aliases:
            raise ConfigError("lists no cluster alias", key="clusters", line=setting.line)
        for alias in aliases:
            if _FLOW_ARROW in alias or re.search(r"\s", alias):
                raise ConfigError(f"invalid cluster alias {alias!r}", key="clusters", line=setting.line)
        return tuple(dict.fromkeys(aliases))

    def _longest_alias_prefix(self, text: str) -> str | None:
        matches = [alias for alias in self.clusters if text.startswith(f"{alias}.")]
        return max(matches, key=len, default=None)

    def _classify(self, key: str, setting: Setting) -> None:
        if _FLOW_ARROW in key:
            source, _, rest = key.partition(_FLOW_ARROW)
            target = self._longest_alias_prefix(rest)
            if source not in self.clusters or target is None:
                named = rest.rsplit(".enabled", 1)[0] if rest.endswith(".enabled") else rest.split(".")[0]
                unknown = source if source not in self.clusters else named
                raise ConfigError(
                    f"flow names cluster {unknown!r}, which is not in clusters ({', '.join(self.clusters)})",
                    key=key,
                    line=setting.line,
                )
            if source == target:
                raise ConfigError("a flow's source and target must differ", key=key, line=setting.line)
            self._flow_settings.setdefault((source, target), {})[rest[len(target) + 1 :]] = setting
            return
        alias = None if _is_mm2_key(key) else self._longest_alias_prefix(key)
        if alias is None:
            self._top[key] = setting
        else:
            self._cluster[alias][key[len(alias) + 1 :]] = setting

    def _warn_about_ignored_keys(self) -> None:
        """Record a warning for every key that nothing reads (:mod:`airmirror.config.key_audit`; the cluster keys
        here)."""
        for settings in self._cluster.values():
            for key, setting in settings.items():
                if key.startswith(REGISTRY_PREFIX) and not is_declared(key):
                    self._warn(f"{setting.describe()}: ignored, airmirror has no such schema registry setting")
                elif is_worker_key(key) and key not in WORKER_KEYS_READ:
                    self._warn(f"{setting.describe()}: ignored, Kafka Connect worker setting")
                elif _is_mm2_key(key):
                    self._warn(
                        f"{setting.describe()}: ignored, replication settings are read at top level "
                        "or per flow ('{source}->{target}.KEY')"
                    )
        self._warn(*audit_top_level(self._top), *top_level_warnings(self._top))
        for settings in self._flow_settings.values():
            self._warn(*audit_flow(settings))

    def _build_flows(self) -> list[FlowConfig]:
        enabled = []
        for (source, target), settings in self._flow_settings.items():
            setting = settings.get("enabled")
            if setting is not None and ENABLED.value(setting):
                enabled.append((setting.line or 0, source, target))
        return [
            FlowConfig(self, source, target, self._flow_settings[(source, target)])
            for _, source, target in sorted(enabled)
        ]

    def _warn_about_routed_cycles(self) -> None:
        """Warn about each flow whose routers rename topics while its reverse flow is enabled: a routed name no
        longer says which cluster the topic came from (the replication policy's cycle check,
        :func:`~airmirror.mm2.policy.should_replicate_topic`), so the reverse flow copies it back, as MM2 does,
        unless its ``topics.exclude`` leaves it out."""
        for flow in self._flows.values():
            routers = [step.alias for step in flow.transforms.steps if step.route is not None]
            reverse = flow.reverse_flow()
            if routers and reverse is not None:
                setting = flow.setting("transforms")
                where = f"{setting.describe()}: " if setting is not None else ""
                self._warn(
                    f"{where}router {', '.join(map(repr, routers))} renames the topics of {flow.name}, so the names it "
                    f"gives do not say they came from {flow.source}: the enabled flow {reverse.name} copies them back "
                    f"unless its topics.exclude leaves them out"
                )

    def _check_dag_ids(self) -> None:
        """Reject two enabled flows that would get the same DAG id (aliases that differ only in characters a
        DAG id cannot hold, or ``__`` inside aliases), naming both flows, the DAG id and the later flow's line."""
        seen: dict[str, FlowConfig] = {}
        for flow in self._flows.values():
            dag_id = names.dag_id(flow.source, flow.target)
            other = seen.setdefault(dag_id, flow)
            if other is not flow:
                raise ConfigError(
                    f"flows {other.name} and {flow.name} would both get the Airflow DAG id {dag_id!r}: "
                    "rename a cluster alias so that they differ",
                    key=f"{flow.name}.enabled",
                    line=flow.line_of("enabled"),
                )

    def _warn_about_loops(self) -> None:
        """Warn for every identity-policy flow that is part of a cycle of enabled flows."""
        edges: dict[str, set[str]] = {}
        for flow in self._flows.values():
            edges.setdefault(flow.source, set()).add(flow.target)
        for flow in self._flows.values():
            if isinstance(flow.policy, IdentityReplicationPolicy) and _reaches(edges, flow.target, flow.source):
                self._warn(
                    f"flow {flow.name} uses IdentityReplicationPolicy, which cannot detect replication loops, "
                    f"and enabled flows lead from {flow.target} back to {flow.source}: restrict "
                    "topics/topics.exclude so that no topic flows back"
                )


class _ReplicationFactor(NamedTuple):
    """A flow's replication factor of one topic kind, and the key (unprefixed) and line that supplied it."""

    value: int
    key: str
    line: int | None


def _reaches(edges: Mapping[str, set[str]], start: str, goal: str) -> bool:
    seen: set[str] = set()
    pending = [start]
    while pending:
        node = pending.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            pending.extend(edges.get(node, ()))
    return False


class FlowConfig:
    """The validated settings of one enabled replication flow ``source->target``.

    Every typed attribute is computed (and validated) when the flow is built.
    """

    def __init__(self, config: MirrorConfig, source: str, target: str, settings: Mapping[str, Setting]) -> None:
        self._config = config
        self._settings = settings
        self.source = source
        self.target = target
        self.name = f"{source}{_FLOW_ARROW}{target}"
        for key in all_keys():
            if key.scope is Scope.FLOW:
                self.optional(key)  # every key is validated at load, also those only MM2 itself would use
        self._replication_factors = {
            key.name: self._replication_factor(key)
            for key in (
                REPLICATION_FACTOR,
                OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR,
                CHECKPOINTS_TOPIC_REPLICATION_FACTOR,
                HEARTBEATS_TOPIC_REPLICATION_FACTOR,
                DEAD_LETTER_REPLICATION_FACTOR,
            )
        }
        # the batch log's factor falls back to the ones above
        self._replication_factors[BATCH_LOG_REPLICATION_FACTOR_KEY] = self._batch_log_replication_factor()
        config._warn(*self._alias_warnings())
        top = config.top_level_settings()
        merged = transform_keys(top, settings)
        chain, transform_warnings = flow_chain(merged, top)
        self.transforms: TransformChain = chain
        self.transform_settings: dict[str, str] = {key: setting.value for key, setting in merged.items()}
        """The keys the chain is read from, as text: what a batch stores to apply the same chain when resumed."""
        config._warn(*transform_warnings)
        self.topics = RegexFilter(self.value(TOPICS), self.value(TOPICS_EXCLUDE))
        self.groups = RegexFilter(self.value(GROUPS), self.value(GROUPS_EXCLUDE))
        self.policy: ReplicationPolicy = self._load_policy()
        self.topic_sync = TopicSyncSettings(
            replication_factor=self._replication_factors[REPLICATION_FACTOR.name].value,
            sync_configs_enabled=self._off_by(SYNC_TOPIC_CONFIGS_ENABLED, SYNC_TOPIC_CONFIGS_INTERVAL) is None,
            sync_acls_enabled=self._off_by(SYNC_TOPIC_ACLS_ENABLED, SYNC_TOPIC_ACLS_INTERVAL) is None,
            config_properties_exclude=self.value(CONFIG_PROPERTIES_EXCLUDE),
        )
        self.copy = CopySettings(
            max_records_per_partition=self.optional(BATCH_MAX_RECORDS),
            transaction_max_records=self.value(TRANSACTION_MAX_RECORDS),
            transaction_max_bytes=self.value(TRANSACTION_MAX_BYTES),
            transaction_max_seconds=self.value(TRANSACTION_MAX_SECONDS),
            live_transaction_max_ms=self.value(LIVE_TRANSACTION_MAX_MS),
            source_reset_policy=self.value(SOURCE_RESET_POLICY),
            task_max_buffer_bytes=self.value(TASK_MAX_BUFFER_BYTES),
            skip_failed_records=self.value(ERRORS_TOLERANCE) == "all",
            dead_letter_topic=self._dead_letter_topic(config),
            dead_letter_headers=self.value(DEAD_LETTER_CONTEXT_HEADERS),
        )
        self.heartbeats = HeartbeatSettings(
            off_by=self._off_by(EMIT_HEARTBEATS_ENABLED, EMIT_HEARTBEATS_INTERVAL),
            interval_seconds=self.value(EMIT_HEARTBEATS_INTERVAL),
            replication_enabled=self.value(HEARTBEATS_REPLICATION_ENABLED),
        )
        without_syncs = None if self.value(EMIT_OFFSET_SYNCS_ENABLED) else f"{EMIT_OFFSET_SYNCS_ENABLED.name} is false"
        self.checkpoints = CheckpointSettings(
            off_by=without_syncs or self._off_by(EMIT_CHECKPOINTS_ENABLED, EMIT_CHECKPOINTS_INTERVAL),
            interval_seconds=self.value(EMIT_CHECKPOINTS_INTERVAL),
            sync_group_offsets_enabled=without_syncs is None
            and self._off_by(SYNC_GROUP_OFFSETS_ENABLED, SYNC_GROUP_OFFSETS_INTERVAL) is None,
        )
        self.offset_syncs = OffsetSyncSettings(
            emit_enabled=self.value(EMIT_OFFSET_SYNCS_ENABLED),
            lag_max=self.value(OFFSET_LAG_MAX),
            topic_location=self.value(OFFSET_SYNCS_TOPIC_LOCATION),
        )
        self.spark = SparkSettings(
            master=self.value(SPARK_MASTER),
            conf=MaskedConfig(
                (key[len(SPARK_CONF.prefix) :], setting.value)
                for key, setting in {**config.top_level_settings(), **settings}.items()
                if key.startswith(SPARK_CONF.prefix)
            ),
            submit=self.value(SPARK_SUBMIT),
            conn_id=self.value(SPARK_CONN_ID),
        )
        self.dag = DagSettings(
            schedule=self.value(SCHEDULE),
            task_retries=self.value(TASK_RETRIES),
            live=self.value(LIVE),
        )
        self.schema_ids: SchemaIds = schema_ids_mode(self.setting(SCHEMA_IDS.name), config.registries, source, target)
        self.metadata_db_url: str = self.optional(METADATA_DB_URL) or f"sqlite:///{config.home}/metadata.db"
        self.metadata_retention: timedelta = self.value(METADATA_RETENTION)
        self.config_path: Path = config.path
        for alias in (source, target):
            for kind in CLIENT_KINDS:
                self._client(alias, kind)
        self.auto_offset_reset: str = self.source_client("consumer")["auto.offset.reset"]

    def __repr__(self) -> str:
        return f"FlowConfig({self.name!r})"

    def secret_values(self) -> set[str]:
        """Every secret this flow resolves: the values of the file's secret keys (``${...}`` resolved, see
        :func:`airmirror.config.secrets.is_secret_key`), the secret librdkafka settings of the flow's clients (e.g. the
        password a JAAS login becomes) and the credentials of the metadata DB URL."""
        clients = (self._client(alias, kind).config for alias in (self.source, self.target) for kind in CLIENT_KINDS)
        registries = (self._config.registries[alias] for alias in (self.source, self.target))
        return {
            *self._config.secret_values(),
            *(value for config in clients for value in secret_values(config)),
            *db_url_secrets(self.metadata_db_url),
            *(value for registry in registries if registry is not None for value in registry.secret_values()),
        }

    def registry(self, alias: str) -> RegistryAccess:
        """Cluster ``alias``'s schema registry; only for a flow whose :attr:`schema_ids` is not ``off``."""
        registry = self._config.registries[alias]
        if registry is None:
            raise ValueError(f"cluster {alias!r} has no schema registry")
        return registry

    def setting(self, key: str) -> Setting | None:
        """The setting that supplies ``key``: ``{source}->{target}.KEY`` if present, else top-level ``KEY``; when
        neither is set, the same for the key's deprecated aliases (the settings registry's rule), as MM2 reads them
        from the flow's merged connector config."""
        found = self._given(key)
        declaration = declared(key)
        if found is None and declaration is not None:
            found = next(filter(None, map(self._given, declaration.aliases)), None)
        return found

    def _given(self, key: str) -> Setting | None:
        return self._settings.get(key) or self._config.top_level_settings().get(key)

    def _alias_warnings(self) -> list[str]:
        """One warning per deprecated alias the flow's config sets: read in its key's place, or ignored."""
        warnings = []
        for key in all_keys():
            for alias in key.aliases:
                setting = self._given(alias)
                if setting is None:
                    continue
                own = self._given(key.name)
                if own is None:
                    warnings.append(
                        f"{setting.describe()}: read as '{key.name}', its deprecated MM2 alias (removed in MM2 4.0): "
                        f"rename it to '{key.name}'"
                    )
                else:
                    warnings.append(f"{setting.describe()}: ignored, {own.describe()} is set (as in MM2)")
        return warnings

    def get(self, key: str, default: str | None = None) -> str | None:
        """Effective value of connector-level ``key`` (flow-level beats top-level), else ``default``."""
        setting = self.setting(key)
        return default if setting is None else setting.value

    def topic_replication_factor(self, key: str) -> int:
        """The replication factor that ``key`` (one of the replication-factor keys, e.g.
        ``heartbeats.topic.replication.factor``) gives this flow: positive, or -1 for the broker default."""
        return self._replication_factor_of(key).value

    def replication_factor_origin(self, key: str) -> tuple[str, int | None]:
        """The key (without flow or cluster prefix) and line that supplied :meth:`topic_replication_factor` of
        ``key``: ``key`` itself, or for the batch log the MM2 key it fell back to; line ``None`` for a default."""
        factor = self._replication_factor_of(key)
        return factor.key, factor.line

    def line_of(self, key: str) -> int | None:
        """Line of the key that supplied the effective value of ``key`` (``None`` when defaulted)."""
        setting = self.setting(key)
        return None if setting is None else setting.line

    def client_config(self, alias: str, kind: str) -> dict[str, str]:
        """librdkafka settings (incl. ``bootstrap.servers``) of a ``kind`` client of ``alias`` in this flow,
        over those of the cluster's Airflow connection when it names one."""
        return self._config.with_connection(alias, self._client(alias, kind).config)

    def file_client_config(self, alias: str, kind: str) -> dict[str, str]:
        """The part of :meth:`client_config` the properties file gives; never resolves a connection (what a DAG
        shows when it is parsed)."""
        return self._client(alias, kind).config

    def connection_id(self, alias: str) -> str | None:
        """The Airflow connection ``{alias}.airflow.conn.id`` names for cluster ``alias``, if any."""
        return self._config.connection_id(alias)

    def source_client(self, kind: str) -> dict[str, str]:
        """``client_config(self.source, kind)``."""
        return self.client_config(self.source, kind)

    def target_client(self, kind: str) -> dict[str, str]:
        """``client_config(self.target, kind)``."""
        return self.client_config(self.target, kind)

    def should_replicate(self, topic: str) -> bool:
        """MM2's topic selection for this flow (filter or heartbeats, not internal, not a cycle)."""
        return should_replicate_topic(
            self.policy,
            self.topics,
            self.source,
            self.target,
            topic,
            heartbeats_replication=self.heartbeats.replication_enabled,
        )

    def transform_steps(self, topic: str, chain: TransformChain | None = None) -> tuple[Step, ...]:
        """The steps of ``chain`` (default: the flow's) that act on the records of source topic ``topic`` (rule 4 of
        :mod:`airmirror.config.transforms`): none for a heartbeats topic, which transforms never touch."""
        chain = self.transforms if chain is None else chain
        if not chain or self.policy.is_heartbeats_topic(topic):
            return ()
        return chain.for_topic(self.policy.format_remote_topic(self.source, topic))

    def stored_chain(self, stored: Mapping[str, str] | None) -> TransformChain:
        """The chain a batch stored (:attr:`transform_settings` then), read again; the flow's own when the batch
        stored none (planned before it had a chain, or before batches stored theirs)."""
        if stored is None:
            return self.transforms
        return flow_chain({key: Setting(key, value) for key, value in stored.items()}, {})[0]

    def is_config_excluded(self, name: str) -> bool:
        """True when topic config ``name`` matches ``config.properties.exclude`` (never synced)."""
        return self.topic_sync.config_properties_exclude.matches(name)

    def reverse_flow(self) -> FlowConfig | None:
        """The enabled flow ``{target}->{source}`` of the same file, ``None`` when it is not enabled."""
        return next(
            (f for f in self._config.enabled_flows() if (f.source, f.target) == (self.target, self.source)), None
        )

    def remote_topic(self, topic: str) -> str:
        """Name on the target of source topic ``topic``: the replication policy's, renamed by the chain's routers
        (:mod:`airmirror.config.transforms` rule 7), except for a heartbeats topic, which transforms never touch."""
        return routed_remote_topic(self.policy, self.transforms, self.source, topic)

    def offset_syncs_place(self) -> tuple[str, str]:
        """``(cluster alias, topic)`` of the flow's MM2 offset-syncs topic, per ``offset-syncs.topic.location``:
        ``mm2-offset-syncs.{target}.internal`` on the source, or ``mm2-offset-syncs.{source}.internal`` on the
        target."""
        if self.offset_syncs.topic_location == "target":
            return self.target, self.policy.offset_syncs_topic(self.source)
        return self.source, self.policy.offset_syncs_topic(self.target)

    def mm2_worker(self) -> tuple[str, str]:
        """``(group id, offsets topic)`` of the MM2 dedicated-mode worker that runs this flow on its target
        cluster: MM2's ``{source}-mm2`` and ``mm2-offsets.{source}.internal`` unless the file sets
        ``{target}.group.id`` or ``offset.storage.topic`` (top-level, which wins, or ``{target}.``)."""
        group = self._config.cluster_value(self.target, "group.id") or f"{self.source}-mm2"
        offsets = self._config.worker_setting(self.target, "offset.storage.topic")
        return group, (offsets.value if offsets is not None else "") or f"mm2-offsets.{self.source}.internal"

    def _client(self, alias: str, kind: str) -> ClientSettings:
        if alias not in (self.source, self.target):
            raise ValueError(f"cluster {alias!r} is not part of flow {self.name}")
        side = "source" if alias == self.source else "target"
        flow_layers: list[_Layer] = [
            (_strip_prefix(self._settings, f"{kind}."), True),
            (_strip_prefix(self._settings, f"{side}.{kind}."), True),
        ]
        overrides = _strip_prefix(self._settings, f"{side}.cluster.")
        cluster_overrides = {key: s for key, s in overrides.items() if is_inherited_client_key(key)}
        return self._config.client_settings(alias, kind, flow_layers, cluster_overrides)

    def value(self, key: SettingKey[T]) -> T:
        """The flow's value of declared ``key`` (flow-level beats top-level), else its default."""
        return key.value(self.setting(key.name))

    def optional(self, key: SettingKey[T]) -> T | None:
        """The flow's value of declared ``key``, its default, or ``None`` when unset without a default."""
        return key.optional(self.setting(key.name))

    def _off_by(self, flag: SettingKey[bool], interval: SettingKey[int]) -> str | None:
        """What turns off the MM2 task of ``flag`` (e.g. ``emit.heartbeats.enabled``), as MM2's ``*Interval()``
        methods decide: the flag when false, else a negative ``interval`` (``{task}.interval.seconds``); ``None``
        when the task runs."""
        if not self.value(flag):
            return f"{flag.name} is false"
        seconds = self.value(interval)
        if seconds < 0:
            return f"{interval.name} is {seconds} (negative: off, as in MM2)"
        return None

    def _dead_letter_topic(self, config: MirrorConfig) -> str | None:
        """``errors.deadletterqueue.topic.name``, only with ``errors.tolerance = all``, which alone sends records there
        (with ``none`` the record's chunk fails, and its dead letter with it): otherwise ``None`` and a warning."""
        topic = self.optional(DEAD_LETTER_TOPIC)
        if topic is None:
            return None
        if self.value(ERRORS_TOLERANCE) != "all":
            setting = self.setting(DEAD_LETTER_TOPIC.name)
            assert setting is not None
            config._warn(
                f"{setting.describe()}: not used, records go to the dead-letter queue only with errors.tolerance = all"
            )
            return None
        return topic.strip()

    def _replication_factor_of(self, key: str) -> _ReplicationFactor:
        if key not in self._replication_factors:
            raise ValueError(f"{key!r} is not a replication-factor key ({', '.join(self._replication_factors)})")
        return self._replication_factors[key]

    def _replication_factor(self, key: SettingKey[int]) -> _ReplicationFactor:
        setting = self.setting(key.name)
        return _ReplicationFactor(key.value(setting), key.name, None if setting is None else setting.line)

    def _batch_log_replication_factor(self) -> _ReplicationFactor:
        """The batch log's own key, else MM2's worker ``offset.storage.replication.factor`` of the target, else
        ``offset-syncs.topic.replication.factor`` (see the module docstring); a default is named after the batch
        log's own key, the one to set."""
        own = self.setting(BATCH_LOG_REPLICATION_FACTOR_KEY)
        if own is not None:
            return _ReplicationFactor(
                BATCH_LOG_REPLICATION_FACTOR.value(own), BATCH_LOG_REPLICATION_FACTOR_KEY, own.line
            )
        worker = self._config.worker_setting(self.target, _WORKER_OFFSETS_FACTOR_KEY)
        if worker is not None:
            return _ReplicationFactor(
                OFFSET_STORAGE_REPLICATION_FACTOR.value(worker), _WORKER_OFFSETS_FACTOR_KEY, worker.line
            )
        offset_syncs = self._replication_factors["offset-syncs.topic.replication.factor"]
        if offset_syncs.line is None:
            return offset_syncs._replace(key=BATCH_LOG_REPLICATION_FACTOR_KEY)
        return offset_syncs

    def _load_policy(self) -> ReplicationPolicy:
        class_setting = self.setting(REPLICATION_POLICY_CLASS.name)
        return load_policy(
            self.value(REPLICATION_POLICY_CLASS),
            self.value(REPLICATION_POLICY_SEPARATOR),
            key=REPLICATION_POLICY_CLASS.name if class_setting is None else class_setting.key,
            line=None if class_setting is None else class_setting.line,
            internal_topic_separator_enabled=self.value(INTERNAL_TOPIC_SEPARATOR_ENABLED),
            source_cluster_alias=self.source,
        )
