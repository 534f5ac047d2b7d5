"""A flow's validated settings, grouped by the part of airmirror that reads them.

Each group is a small frozen value built by :class:`~airmirror.config.mirror_config.FlowConfig` from MM2's keys
(flow-level ``{source}->{target}.KEY`` beats top-level ``KEY``) and airmirror's ``airmirror.*`` keys.  The key
each field comes from is named beside it.  MM2 keys that only tune MM2's own scheduling
(``refresh.*.interval.seconds``, ``sync.*.interval.seconds``, ``tasks.max``, ...) are validated but have no
field: every airmirror run lists topics and groups afresh.
"""

from __future__ import annotations

from dataclasses import dataclass

from airmirror.config.secrets import MaskedConfig
from airmirror.mm2.policy import PatternList


@dataclass(frozen=True)
class TopicSyncSettings:
    """How remote topics are created and kept in line with their source topics (step 1 of a batch)."""

    replication_factor: int
    """``replication.factor`` of created remote topics; -1 for the broker default."""
    sync_configs_enabled: bool
    """``sync.topic.configs.enabled``: apply source topic configs to existing remote topics."""
    sync_acls_enabled: bool
    """``sync.topic.acls.enabled``."""
    config_properties_exclude: PatternList
    """``config.properties.exclude``: topic configs never copied."""


@dataclass(frozen=True)
class CopySettings:
    """How a batch is bounded and copied (steps 2 and 3)."""

    max_records_per_partition: int | None
    """``airmirror.batch.max.records.per.partition``: cap of a batch per partition, ``None`` for none."""
    transaction_max_records: int
    """``airmirror.transaction.max.records``: records per chunk transaction."""
    transaction_max_bytes: int
    """``airmirror.transaction.max.bytes``: key and value bytes per chunk transaction."""
    transaction_max_seconds: int
    """``airmirror.transaction.max.seconds``: seconds per chunk transaction."""
    source_reset_policy: str
    """``airmirror.source.reset.policy``: ``reset`` or ``fail`` when a source topic was recreated or truncated."""


@dataclass(frozen=True)
class HeartbeatSettings:
    """MM2's heartbeats: emission to the target, and replication of the source's heartbeats topics."""

    enabled: bool
    """``emit.heartbeats.enabled``."""
    interval_seconds: int
    """``emit.heartbeats.interval.seconds``."""
    replication_enabled: bool
    """``heartbeats.replication.enabled``: copy the source's heartbeats topics whatever ``topics`` says."""


@dataclass(frozen=True)
class CheckpointSettings:
    """MM2's checkpoints of the source's consumer groups, and the group offset sync."""

    enabled: bool
    """``emit.checkpoints.enabled``."""
    interval_seconds: int
    """``emit.checkpoints.interval.seconds``."""
    sync_group_offsets_enabled: bool
    """``sync.group.offsets.enabled``: commit translated offsets of inactive groups on the target."""


@dataclass(frozen=True)
class OffsetSyncSettings:
    """MM2's offset-syncs topic settings (read by the MM2 offset-syncs writer of the migration toolkit)."""

    emit_enabled: bool
    """``emit.offset-syncs.enabled``."""
    lag_max: int
    """``offset.lag.max``."""
    topic_location: str
    """``offset-syncs.topic.location``: ``source`` or ``target``."""


@dataclass(frozen=True)
class SparkSettings:
    """Where and how the copy job runs."""

    master: str
    """``airmirror.spark.master`` (default ``local[*]``)."""
    conf: MaskedConfig
    """``airmirror.spark.conf.*``: extra Spark settings, secrets masked in reprs."""
    submit: bool
    """``airmirror.spark.submit``: the DAG submits ``spark_apps/`` with SparkSubmitOperator."""
    conn_id: str
    """``airmirror.spark.conn.id``: the Airflow Spark connection (default ``spark_default``)."""


@dataclass(frozen=True)
class DagSettings:
    """The flow's Airflow DAG."""

    schedule: str
    """``airmirror.schedule``: a duration or a cron expression (default ``1m``)."""
    task_retries: int
    """``airmirror.task.retries``: retries of each task (default 3)."""
