"""SQLAlchemy Core tables of the airmirror metadata store (one :data:`metadata`).

Every table is prefixed ``airmirror_`` and Alembic's version table is :data:`VERSION_TABLE`, so the
store can share a database with Airflow's own tables.  Offsets are BIGINT; ranges are Kafka-style
``[start_offset, end_offset)``.

Tables and their contracts:

* ``airmirror_batches``: one row per micro-batch.  At most one batch per flow is ``RUNNING``; a
  partial unique index enforces this in the database.  ``copy_tasks`` is how many copy tasks the batch's
  latest copy job ran (``NULL`` before its first, ``0`` for per-partition tasks), and ``log_floor`` the batch
  log's high watermark before that first job; both read as :data:`airmirror.model.BatchJobs`
  (:func:`airmirror.store.batches.jobs_of`).
* ``airmirror_batch_ranges``: the planned source range of each partition of a batch, plus what was
  copied once the batch commits.
* ``airmirror_cursors``: per (flow, topic, partition) the next source offset to copy.  It only
  moves when a batch commits.
* ``airmirror_offset_syncs``: offset translation, one row per run of copied records consecutive on the target (an
  exact run, ``downstream_end`` and ``records`` ``NULL``; ``holes``, packed by :func:`~airmirror.model.packed_holes`,
  are its source offsets that hold no copy, ``NULL`` for none), or per folded run of several old ones (both set, see
  :class:`~airmirror.model.OffsetRun`).  Runs of a partition never overlap, so the unique index on
  ``upstream_end`` finds "the run containing or following upstream offset u" with one index probe
  (``upstream_end > u ORDER BY upstream_end LIMIT 1``).  ``batch_id`` is the batch that copied the run's
  first record (a run that later batches continued exactly was extended in place), ``NULL`` once retention
  pruned that batch or folded the run (see :mod:`airmirror.store.retention`).
* ``airmirror_gaps``: source ranges deleted by retention before they were copied.
* ``airmirror_partition_totals``: per (flow, topic, partition) the records and bytes of every committed range
  and the number and offsets of every gap, added up in each batch's commit, so status reads one row per
  partition and the totals stay whole when retention deletes the batches and gaps they came from.
* ``airmirror_checkpoints``: per (flow, group, source topic, partition) the newest checkpoint written to
  the target's checkpoints topic, with the time it was emitted.  ``index ..._downstream`` on
  ``airmirror_offset_syncs`` finds the run containing or following a downstream offset (failback
  translation reads another flow's runs backwards).
* ``airmirror_group_syncs``: per (flow, group) the outcome of the newest group offset sync on the target,
  including groups skipped because they were active there.
* ``airmirror_heartbeat_latency``: per (flow, heartbeat source alias, heartbeat target alias) the newest
  replication latency observed from a copied heartbeat.
* ``airmirror_heartbeat_emissions``: per flow the newest heartbeat it wrote to its target.
* ``airmirror_schema_ids``: per (flow, source schema id) the target registry's id (``airmirror.schema.ids``);
  ``airmirror_schema_subjects``: per (flow, source subject) the target subject and the versions its newest schema
  sync copied.  ``airmirror_partition_totals.schema_passed`` (and ``airmirror_batch_ranges.schema_passed``, per
  range) counts records copied unchanged because their schema id was unknown (``airmirror.schema.unknown = pass``);
  ``filtered`` (both tables) the records the flow's transforms dropped (:mod:`airmirror.config.transforms`),
  ``skipped`` those a transform could not process that ``errors.tolerance = all`` skipped.
* ``airmirror_remote_topics``: per (flow, remote topic) the topic id airmirror first wrote to; a remote topic
  with another id (or gone) is stopped (see :mod:`airmirror.replication.incarnations`).
* ``airmirror_stops``: per (flow, source topic, partition) why replication of it is stopped; partition
  ``-1`` (:data:`WHOLE_TOPIC`) stops every partition of the topic.  ``airmirror reset`` clears them.
* ``airmirror_source_resets``: every time a source partition started again in a new incarnation (recreated
  or truncated topic), with the abandoned cursor and both topic ids.  ``airmirror_cursors.source_topic_id``
  and ``airmirror_batch_ranges.source_topic_id`` say which incarnation a cursor or a planned range belongs to.
  ``airmirror_cursors.leader_epoch`` is the source leader epoch of the record before the cursor, used to validate it
  (see :mod:`airmirror.replication.plan_arithmetic`); ``airmirror_batch_ranges.start_epoch`` and ``end_epoch`` are the
  epochs at a range's two ends and ``truncated_at`` the offset where the source log diverged below the cursor.
* ``airmirror_mm2_syncs``: MM2's offset syncs (``upstream_offset`` copied to ``downstream_offset``) imported by
  ``airmirror takeover`` for the part of a partition MM2 copied; below the first upstream offset of the
  partition's exact runs they translate as MM2 translates (see :mod:`airmirror.checkpoints.translation`).
* ``airmirror_verifications``: one row per ``airmirror verify`` of a flow, with when it ran and the topics it
  covered; ``airmirror_verified_partitions``: its result per partition (see
  :class:`~airmirror.model.PartitionVerification`).  Rows are only added (and pruned by retention).
* ``airmirror_leader_waits``: per flow the source partitions without a leader that its plans leave where they stand,
  since when and the broker's error; one row per such partition, gone once it has a leader again.
* ``airmirror_gone_topics``: per flow the source topics it has copied that the source cluster no longer holds (deleted),
  since when step 1 of a run first missed each; one row per such topic, gone once the topic is back.
* ``airmirror_flow_leases``: per flow the run that holds it (at most one), until ``expires_at``; see
  :mod:`airmirror.store.flow_lease`.  ``token`` identifies one acquisition, ``process`` the holder's
  process on its machine (so that a run on the same machine can take over at once from a dead holder).

Migrations in ``migrations/versions`` are frozen snapshots of these definitions; the integration
tests check that the migrated database matches this module.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    Dialect,
    Enum,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
)

from airmirror.model import BatchState, GroupSyncOutcome, Verdict, packed_holes, unpacked_holes

VERSION_TABLE = "airmirror_alembic_version"
TABLE_PREFIX = "airmirror_"

TOPIC_LENGTH = 249
"""Kafka's maximum topic name length."""
FLOW_LENGTH = 255
GROUP_LENGTH = 255
"""Longest consumer group id the store keeps."""
TOPIC_ID_LENGTH = 32
"""A Kafka topic id in its base64 form (22 characters)."""
WHOLE_TOPIC = -1
"""The partition number of a stop that applies to every partition of a topic."""
LEASE_TOKEN_LENGTH = 32
"""A lease token is a UUID4 in hex."""
PROCESS_LENGTH = 255


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that is written and read as a timezone-aware UTC ``datetime`` on every backend.

    Naive datetimes are rejected on write; SQLite, which stores no zone, is read back as UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: metadata store timestamps must be timezone-aware")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class PackedHoles(TypeDecorator[tuple[int, ...]]):
    """The holes of an exact offset-sync run (:attr:`~airmirror.model.OffsetRun.holes`), stored compressed
    (:func:`~airmirror.model.packed_holes`); none is ``NULL``."""

    impl = LargeBinary()
    cache_ok = True

    def process_bind_param(self, value: tuple[int, ...] | None, dialect: Dialect) -> bytes | None:
        return packed_holes(value or ())

    def process_result_value(self, value: bytes | None, dialect: Dialect) -> tuple[int, ...]:
        return unpacked_holes(value)


ID = BigInteger().with_variant(Integer(), "sqlite")
"""Surrogate key type: BIGINT, but INTEGER on SQLite where only that aliases the auto-incrementing rowid."""

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def _flow() -> Column[str]:
    return Column("flow", String(FLOW_LENGTH), primary_key=True)


def _topic() -> Column[str]:
    return Column("topic", String(TOPIC_LENGTH), primary_key=True)


def _partition() -> Column[int]:
    return Column("partition", Integer, primary_key=True)


def _group() -> Column[str]:
    return Column("group_id", String(GROUP_LENGTH), primary_key=True)


def _batch_ref(*, primary_key: bool = False, nullable: bool = False) -> Column[int]:
    return Column("batch_id", ID, ForeignKey("airmirror_batches.id"), primary_key=primary_key, nullable=nullable)


batches = Table(
    "airmirror_batches",
    metadata,
    Column("id", ID, primary_key=True, autoincrement=True),
    Column("flow", String(FLOW_LENGTH), nullable=False),
    Column(
        "state",
        Enum(BatchState, name="batch_state", native_enum=False, create_constraint=True, length=16),
        nullable=False,
    ),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("finished_at", UTCDateTime()),
    Column("params", JSON(), nullable=False),
    Column("records", BigInteger),
    Column("bytes", BigInteger),
    Column("error", Text),
    Column("copy_tasks", Integer),
    Column("log_floor", BigInteger),
)
Index("ix_airmirror_batches_flow_id", batches.c.flow, batches.c.id)
Index("ix_airmirror_batches_flow_finished_at", batches.c.flow, batches.c.finished_at)
Index(
    "ux_airmirror_batches_running_flow",
    batches.c.flow,
    unique=True,
    postgresql_where=batches.c.state == BatchState.RUNNING,
    sqlite_where=batches.c.state == BatchState.RUNNING,
)

batch_ranges = Table(
    "airmirror_batch_ranges",
    metadata,
    _batch_ref(primary_key=True),
    _topic(),
    _partition(),
    Column("start_offset", BigInteger, nullable=False),
    Column("end_offset", BigInteger, nullable=False),
    Column("remote_topic", String(TOPIC_LENGTH), nullable=False),
    Column("gap_start", BigInteger),
    Column("moved_from", BigInteger),
    Column("source_topic_id", String(TOPIC_ID_LENGTH)),
    Column("reset_from", BigInteger),
    Column("records", BigInteger),
    Column("bytes", BigInteger),
    Column("downstream_start", BigInteger),
    Column("downstream_end", BigInteger),
    Column("start_epoch", Integer),
    Column("truncated_at", BigInteger),
    Column("end_epoch", Integer),
    Column("schema_passed", BigInteger),
    Column("filtered", BigInteger),
    Column("skipped", BigInteger),
)

cursors = Table(
    "airmirror_cursors",
    metadata,
    _flow(),
    _topic(),
    _partition(),
    Column("next_offset", BigInteger, nullable=False),
    _batch_ref(),
    Column("updated_at", UTCDateTime(), nullable=False),
    Column("source_topic_id", String(TOPIC_ID_LENGTH)),
    Column("leader_epoch", Integer),
)

offset_syncs = Table(
    "airmirror_offset_syncs",
    metadata,
    _flow(),
    _topic(),
    _partition(),
    Column("upstream_start", BigInteger, primary_key=True),
    Column("upstream_end", BigInteger, nullable=False),
    Column("downstream_start", BigInteger, nullable=False),
    _batch_ref(nullable=True),
    Column("downstream_end", BigInteger),
    Column("records", BigInteger),
    Column("holes", PackedHoles()),
)
Index("ix_airmirror_offset_syncs_batch_id", offset_syncs.c.batch_id)
Index(
    "ux_airmirror_offset_syncs_upstream_end",
    offset_syncs.c.flow,
    offset_syncs.c.topic,
    offset_syncs.c.partition,
    offset_syncs.c.upstream_end,
    unique=True,
)
Index(
    "ix_airmirror_offset_syncs_downstream",
    offset_syncs.c.flow,
    offset_syncs.c.topic,
    offset_syncs.c.partition,
    offset_syncs.c.downstream_start,
)

gaps = Table(
    "airmirror_gaps",
    metadata,
    _flow(),
    _topic(),
    _partition(),
    Column("start_offset", BigInteger, primary_key=True),
    Column("end_offset", BigInteger, nullable=False),
    _batch_ref(),
    Column("detected_at", UTCDateTime(), nullable=False),
)

partition_totals = Table(
    "airmirror_partition_totals",
    metadata,
    _flow(),
    _topic(),
    _partition(),
    Column("records", BigInteger, nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("gap_count", BigInteger, nullable=False),
    Column("gap_offsets", BigInteger, nullable=False),
    Column("schema_passed", BigInteger, nullable=False, server_default="0"),
    Column("filtered", BigInteger, nullable=False, server_default="0"),
    Column("skipped", BigInteger, nullable=False, server_default="0"),
)

lag_samples = Table(
    "airmirror_lag_samples",
    metadata,
    _flow(),
    _topic(),
    _partition(),
    Column("sampled_at", UTCDateTime(), primary_key=True),
    Column("lag_records", BigInteger, nullable=False),
    Column("record_age_ms", BigInteger),
    Column("replication_latency_ms", BigInteger),
)
Index("ix_airmirror_lag_samples_flow_sampled_at", lag_samples.c.flow, lag_samples.c.sampled_at)

checkpoints = Table(
    "airmirror_checkpoints",
    metadata,
    _flow(),
    _group(),
    _topic(),
    _partition(),
    Column("remote_topic", String(TOPIC_LENGTH), nullable=False),
    Column("upstream_offset", BigInteger, nullable=False),
    Column("downstream_offset", BigInteger, nullable=False),
    Column("commit_metadata", Text, nullable=False),
    Column("emitted_at", UTCDateTime(), nullable=False),
)

group_syncs = Table(
    "airmirror_group_syncs",
    metadata,
    _flow(),
    _group(),
    Column(
        "outcome",
        Enum(GroupSyncOutcome, name="group_sync_outcome", native_enum=False, create_constraint=True, length=16),
        nullable=False,
    ),
    Column("target_state", String(32), nullable=False),
    Column("offsets_committed", Integer, nullable=False),
    Column("detail", Text, nullable=False),
    Column("synced_at", UTCDateTime(), nullable=False),
)

heartbeat_latency = Table(
    "airmirror_heartbeat_latency",
    metadata,
    _flow(),
    Column("source_alias", String(FLOW_LENGTH), primary_key=True),
    Column("target_alias", String(FLOW_LENGTH), primary_key=True),
    Column("heartbeat_at", UTCDateTime(), nullable=False),
    Column("observed_at", UTCDateTime(), nullable=False),
    Column("latency_ms", BigInteger, nullable=False),
)

heartbeat_emissions = Table(
    "airmirror_heartbeat_emissions",
    metadata,
    _flow(),
    Column("topic", String(TOPIC_LENGTH), nullable=False),
    Column("heartbeat_at", UTCDateTime(), nullable=False),
)

run_failures = Table(
    "airmirror_run_failures",
    metadata,
    _flow(),
    Column("failed_at", UTCDateTime(), nullable=False),
    Column("error", Text, nullable=False),
)

flow_leases = Table(
    "airmirror_flow_leases",
    metadata,
    _flow(),
    Column("holder", Text, nullable=False),
    Column("token", String(LEASE_TOKEN_LENGTH), nullable=False),
    Column("process", String(PROCESS_LENGTH)),
    Column("acquired_at", UTCDateTime(), nullable=False),
    Column("renewed_at", UTCDateTime(), nullable=False),
    Column("expires_at", UTCDateTime(), nullable=False),
)

partition_prunes = Table(
    "airmirror_partition_prunes",
    metadata,
    _flow(),
    _topic(),
    _partition(),
    Column("pruned_at", UTCDateTime(), nullable=False),
)
"""When each source partition's offset-sync runs were last pruned, whichever process did it
(:meth:`~airmirror.store.retention.RetentionStore.claim_prunes`)."""

SUBJECT_LENGTH = 512
"""The longest schema-registry subject the store keeps."""

schema_ids = Table(
    "airmirror_schema_ids",
    metadata,
    _flow(),
    Column("source_id", BigInteger, primary_key=True),
    Column("target_id", BigInteger, nullable=False),
    Column("recorded_at", UTCDateTime(), nullable=False),
)
"""Per flow, the target registry's id of each source schema id the flow copied (:mod:`airmirror.store.schema_ids`)."""

schema_subjects = Table(
    "airmirror_schema_subjects",
    metadata,
    _flow(),
    Column("subject", String(SUBJECT_LENGTH), primary_key=True),
    Column("target_subject", String(SUBJECT_LENGTH), nullable=False),
    Column("versions", Integer, nullable=False),
    Column("synced_at", UTCDateTime(), nullable=False),
)
"""Per flow, each source subject its newest schema sync copied: the target subject and how many versions."""

remote_topics = Table(
    "airmirror_remote_topics",
    metadata,
    _flow(),
    _topic(),
    Column("topic_id", String(TOPIC_ID_LENGTH), nullable=False),
    Column("recorded_at", UTCDateTime(), nullable=False),
    Column("source_topic", String(TOPIC_LENGTH)),
)

leader_waits = Table(
    "airmirror_leader_waits",
    metadata,
    _flow(),
    _topic(),
    _partition(),
    Column("since", UTCDateTime(), nullable=False),
    Column("reason", Text, nullable=False),
)
"""The source partitions a flow's newest plan left where they stand because they had no leader, since when
(:mod:`airmirror.store.leader_waits`)."""

gone_topics = Table(
    "airmirror_gone_topics",
    metadata,
    _flow(),
    _topic(),
    Column("since", UTCDateTime(), nullable=False),
)
"""The copied source topics the source cluster no longer holds, since when (:mod:`airmirror.store.gone_topics`)."""

stops = Table(
    "airmirror_stops",
    metadata,
    _flow(),
    _topic(),
    _partition(),
    Column("reason", Text, nullable=False),
    Column("stopped_at", UTCDateTime(), nullable=False),
)

source_resets = Table(
    "airmirror_source_resets",
    metadata,
    Column("id", ID, primary_key=True, autoincrement=True),
    Column("flow", String(FLOW_LENGTH), nullable=False),
    Column("topic", String(TOPIC_LENGTH), nullable=False),
    Column("partition", Integer, nullable=False),
    _batch_ref(),
    Column("old_topic_id", String(TOPIC_ID_LENGTH)),
    Column("new_topic_id", String(TOPIC_ID_LENGTH)),
    Column("old_cursor", BigInteger, nullable=False),
    Column("new_start", BigInteger, nullable=False),
    Column("reset_at", UTCDateTime(), nullable=False),
)
Index("ix_airmirror_source_resets_flow_id", source_resets.c.flow, source_resets.c.id)

mm2_syncs = Table(
    "airmirror_mm2_syncs",
    metadata,
    _flow(),
    _topic(),
    _partition(),
    Column("upstream_offset", BigInteger, primary_key=True),
    Column("downstream_offset", BigInteger, nullable=False),
    _batch_ref(),
)
Index("ix_airmirror_mm2_syncs_batch_id", mm2_syncs.c.batch_id)

verifications = Table(
    "airmirror_verifications",
    metadata,
    Column("id", ID, primary_key=True, autoincrement=True),
    Column("flow", String(FLOW_LENGTH), nullable=False),
    Column("verified_at", UTCDateTime(), nullable=False),
    Column("topics_regex", Text),
)
Index("ix_airmirror_verifications_flow_id", verifications.c.flow, verifications.c.id)

verified_partitions = Table(
    "airmirror_verified_partitions",
    metadata,
    Column(
        "verification_id",
        ID,
        ForeignKey("airmirror_verifications.id", name="fk_airmirror_verified_partitions_verification"),
        primary_key=True,
    ),
    _topic(),
    _partition(),
    Column("remote_topic", String(TOPIC_LENGTH), nullable=False),
    Column(
        "verdict", Enum(Verdict, name="verdict", native_enum=False, create_constraint=True, length=16), nullable=False
    ),
    Column("first_offset", BigInteger),
    Column("source_start", BigInteger, nullable=False),
    Column("source_end", BigInteger, nullable=False),
    Column("target_start", BigInteger, nullable=False),
    Column("target_end", BigInteger, nullable=False),
    Column("source_records", BigInteger, nullable=False),
    Column("target_records", BigInteger, nullable=False),
    Column("missing", BigInteger, nullable=False),
    Column("extra", BigInteger, nullable=False),
    Column("different", BigInteger, nullable=False),
    Column("compacted_source", BigInteger, nullable=False),
    Column("compacted_target", BigInteger, nullable=False),
    Column("source_digest", String(64), nullable=False),
    Column("target_digest", String(64), nullable=False),
    Column("note", Text, nullable=False),
    Column("reason", Text, nullable=False, server_default=""),
    Column("schema_id", BigInteger, nullable=False, server_default="0"),
    Column("schema_id_difference", Text, nullable=False, server_default=""),
    Column("filtered", BigInteger, nullable=False, server_default="0"),
)
