"""A flow's validated settings, grouped by the part of airmirror that reads them.

Each group is a small frozen value built by :class:`~airmirror.config.mirror_config.FlowConfig` from the keys
declared in :mod:`airmirror.config.settings_registry` (flow-level ``{source}->{target}.KEY`` beats top-level ``KEY``),
where each key's type, default and meaning live; each class docstring names the key behind every field.  MM2's
``{task}.interval.seconds`` keys turn their task off when
negative, as in MM2 (the ``enabled`` fields and ``off_by`` say so), and are refused when 0; beyond that, the ones
that only tune MM2's own scheduling (``refresh.*.interval.seconds``, ``sync.*.interval.seconds``) and
``tasks.max`` have no field: every airmirror run lists topics and groups afresh and syncs at every batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from airmirror.config.secrets import MaskedConfig
from airmirror.mm2.policy import PatternList

TASK_BUFFER_CLIENT_KEYS: dict[str, frozenset[str]] = {
    "consumer": frozenset(
        {
            "fetch.max.bytes",
            "max.partition.fetch.bytes",
            "queued.max.messages.kbytes",
            "queued.min.messages",
            "message.max.bytes",
        }
    ),
    "producer": frozenset({"queue.buffering.max.kbytes", "queue.buffering.max.messages", "message.max.bytes"}),
}
"""The librdkafka keys, per client kind, that ``airmirror.task.max.buffer.bytes`` bounds (the keys of
:meth:`~airmirror.replication.spark.task_buffer.TaskBuffer.consumer_limits` and ``producer_limits``, which a unit
test keeps equal): a client setting that becomes one of them must be a non-negative integer, refused at load
otherwise (naming key and line)."""


@dataclass(frozen=True)
class TopicSyncSettings:
    """Step 1, remote topics: ``replication.factor`` of created topics (-1: the broker's default),
    ``sync.topic.configs.enabled`` (false, or a negative ``sync.topic.configs.interval.seconds``: configs are
    copied when a topic is created, never synced after), ``sync.topic.acls.enabled`` (false, or a negative
    ``sync.topic.acls.interval.seconds``: no ACL sync) and ``config.properties.exclude`` (topic configs never
    copied)."""

    replication_factor: int
    sync_configs_enabled: bool
    sync_acls_enabled: bool
    config_properties_exclude: PatternList


@dataclass(frozen=True)
class CopySettings:
    """Steps 2 and 3, bounds: ``airmirror.batch.max.records.per.partition`` (``None``: no cap), the chunk
    transaction bounds ``airmirror.transaction.max.{records,bytes,seconds}`` (and, for a streaming live run's
    chunks, ``airmirror.live.transaction.max.ms``), ``airmirror.source.reset.policy``
    (``reset`` or ``fail`` when a source topic was recreated or truncated) and ``airmirror.task.max.buffer.bytes``
    (what one copy task buffers, at least
    :data:`~airmirror.config.settings_registry.MIN_TASK_MAX_BUFFER_BYTES`; split as
    :mod:`airmirror.replication.spark.task_buffer` says); ``skip_failed_records``: ``errors.tolerance = all``
    (a record a field transform cannot process is skipped, not the chunk failed); ``dead_letter_topic``:
    ``errors.deadletterqueue.topic.name`` (where skipped records go, ``None``: nowhere), with Connect's context
    headers when ``dead_letter_headers`` (``errors.deadletterqueue.context.headers.enable``)."""

    max_records_per_partition: int | None
    transaction_max_records: int
    transaction_max_bytes: int
    transaction_max_seconds: int
    source_reset_policy: str
    task_max_buffer_bytes: int
    live_transaction_max_ms: int = 100
    skip_failed_records: bool = False
    dead_letter_topic: str | None = None
    dead_letter_headers: bool = False


@dataclass(frozen=True)
class HeartbeatSettings:
    """``emit.heartbeats.enabled`` and ``emit.heartbeats.interval.seconds`` (``off_by`` names the one that turns
    emission off, ``None`` while on), and ``heartbeats.replication.enabled`` (copy the source's heartbeats topics
    whatever ``topics`` says)."""

    off_by: str | None
    interval_seconds: int
    replication_enabled: bool

    @property
    def enabled(self) -> bool:
        """True when heartbeats are emitted (then ``interval_seconds`` is positive)."""
        return self.off_by is None


@dataclass(frozen=True)
class CheckpointSettings:
    """``emit.checkpoints.enabled`` and ``emit.checkpoints.interval.seconds`` (``off_by`` names the one that turns
    emission off, ``None`` while on), and ``sync.group.offsets.enabled`` (commit translated offsets of inactive
    groups on the target; false too when ``sync.group.offsets.interval.seconds`` is negative)."""

    off_by: str | None
    interval_seconds: int
    sync_group_offsets_enabled: bool

    @property
    def enabled(self) -> bool:
        """True when checkpoints are emitted (then ``interval_seconds`` is positive)."""
        return self.off_by is None


@dataclass(frozen=True)
class OffsetSyncSettings:
    """MM2's offset-syncs topic: ``emit.offset-syncs.enabled``, ``offset.lag.max`` and
    ``offset-syncs.topic.location`` (``source`` or ``target``)."""

    emit_enabled: bool
    lag_max: int
    topic_location: str


@dataclass(frozen=True)
class SparkSettings:
    """The copy job: ``airmirror.spark.master`` (default ``local[*]``), ``airmirror.spark.conf.*`` (secrets
    masked in reprs), ``airmirror.spark.submit`` (the DAG submits ``spark_apps/``) and ``airmirror.spark.conn.id``
    (the Airflow Spark connection, default ``spark_default``)."""

    master: str
    conf: MaskedConfig
    submit: bool
    conn_id: str


@dataclass(frozen=True)
class DagSettings:
    """The flow's Airflow DAG: ``airmirror.schedule`` (a duration or a cron expression, default ``1m``),
    ``airmirror.task.retries`` (default 3) and ``airmirror.live`` (default false: each run copies one batch;
    true: each run replicates continuously for the length of its data interval, see
    :mod:`airmirror.dag_factory.live`)."""

    schedule: str
    task_retries: int
    live: bool
