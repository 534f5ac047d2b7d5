"""The airmirror metadata store: replication cursors, batch history, offset syncs, gaps, checkpoints, group
syncs, heartbeats, topic incarnations and flow leases in SQL.

:class:`MetadataStore` is the one object callers use.  It is made of one part per concern, each with its
contracts in its module's docstring:

* :mod:`airmirror.store.batches`: cursors, the batch life cycle, the one-transaction commit of a batch,
  exact offset translation (offset-sync runs) and gaps.
* :mod:`airmirror.store.checkpoints`: checkpoints and group offset syncs.
* :mod:`airmirror.store.heartbeats`: heartbeat emissions and replication latency.
* :mod:`airmirror.store.incarnation_rows`: cursor incarnations, remote topic ids, stops and source resets.
* :mod:`airmirror.store.verify_results`: every ``airmirror verify`` and its result per partition.
* :mod:`airmirror.store.schema_ids`: the schema id map and synced subjects of each flow.
* :mod:`airmirror.store.retention`: pruning of the history older than ``airmirror.metadata.retention``.
* :mod:`airmirror.store.flow_lease`: :meth:`MetadataStore.hold_flow` lets one run at a time work on a flow.
* :mod:`airmirror.store.run_failures`: each flow's newest failed run.
* :mod:`airmirror.store.leader_waits`: the source partitions its plans leave where they stand for want of a leader.
* :mod:`airmirror.store.gone_topics`: the copied source topics the source cluster no longer holds.
* :mod:`airmirror.store.engine`: engines, transactions and schema migrations.

Common contracts:

* **Errors**: an unreachable or failing database raises
  :class:`~airmirror.errors.ReplicationFailure` naming the database URL with its password and secret
  query parameters masked (:func:`airmirror.config.db_urls.masked_db_url`), as the store's repr does;
  arguments that break the contracts raise ``ValueError``.
* **Checkpoints, group syncs, heartbeats**: the newest value per key is kept (an upsert); each
  carries the time it was emitted or observed.  They describe what was written to the target cluster,
  so callers save them only after the target acknowledged the write.
* Timestamps are timezone-aware UTC.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from types import TracebackType

from sqlalchemy import URL

from airmirror.errors import ReplicationFailure
from airmirror.model import CursorState, PartitionKey, SourceReset, Stop
from airmirror.store import incarnation_rows
from airmirror.store.batches import BatchStore
from airmirror.store.checkpoints import CheckpointStore
from airmirror.store.engine import (
    MIGRATIONS_DIR,
    alembic_config,
    create_store_engine,
    current_revision,
    head_revision,
    upgrade_to_head,
)
from airmirror.store.flow_lease import DEFAULT_LEASE_TTL_SECONDS, FlowLease, FlowLeaseRecord, current_lease, hold_flow
from airmirror.store.gone_topics import GoneTopicStore
from airmirror.store.heartbeats import HeartbeatStore
from airmirror.store.lag_samples import LagStore
from airmirror.store.leader_waits import LeaderWaitStore
from airmirror.store.range_commits import StaleCursorError
from airmirror.store.retention import RetentionStore
from airmirror.store.rows import utcnow
from airmirror.store.run_failures import RunFailureStore
from airmirror.store.schema_ids import SchemaIdStore
from airmirror.store.streams import StreamStore
from airmirror.store.verify_results import VerificationStore

__all__ = [
    "MIGRATIONS_DIR",
    "MetadataStore",
    "SchemaNotCurrentError",
    "StaleCursorError",
    "alembic_config",
    "create_store_engine",
]


class SchemaNotCurrentError(ReplicationFailure):
    """The store's schema is not the one this airmirror reads: ``revision`` (``None`` before the first
    migration) is not ``head``.  Only a store opened to write (:meth:`MetadataStore.open`) migrates it."""

    def __init__(self, where: str, revision: str | None, head: str) -> None:
        shown = "no schema yet" if revision is None else f"schema revision {revision}"
        super().__init__(f"metadata store {where} has {shown}; this airmirror reads revision {head}")
        self.revision, self.head = revision, head


class MetadataStore(
    BatchStore,
    StreamStore,
    CheckpointStore,
    HeartbeatStore,
    LagStore,
    VerificationStore,
    RetentionStore,
    SchemaIdStore,
    RunFailureStore,
    LeaderWaitStore,
    GoneTopicStore,
):
    """Repository over the metadata store tables (see the module docstring for the contracts)."""

    def __repr__(self) -> str:
        return f"MetadataStore({self._where!r})"

    @classmethod
    def open(cls, url: str | URL) -> MetadataStore:
        """Connect to ``url`` and migrate its schema to head (a no-op when already there)."""
        store = cls(create_store_engine(url))
        try:
            store.migrate()
        except BaseException:
            store.dispose()
            raise
        return store

    @classmethod
    def open_read_only(cls, url: str | URL) -> MetadataStore:
        """Connect to ``url`` for reading only: nothing is created or migrated, and every write fails
        (:func:`~airmirror.store.engine.create_store_engine` with ``read_only``).  Call :meth:`check_schema`
        before reading."""
        return cls(create_store_engine(url, read_only=True))

    def __enter__(self) -> MetadataStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.dispose()

    def dispose(self) -> None:
        """Close every pooled connection."""
        self._engine.dispose()

    def migrate(self) -> None:
        """Upgrade the schema to the newest migration, in one transaction; safe to run concurrently.  A store
        already at head is only read, so a writer that holds its lock (one frozen mid-transaction) delays nobody."""
        with self._read("migrate the schema") as connection:
            if current_revision(connection) == head_revision():
                return
        with self._unfenced_write("migrate the schema") as connection:
            upgrade_to_head(connection, self._where)

    def hold_flow(
        self, flow: str, holder: str, *, ttl_seconds: float = DEFAULT_LEASE_TTL_SECONDS
    ) -> AbstractContextManager[FlowLease]:
        """Hold ``flow``'s lease for a ``with`` block; :class:`~airmirror.store.flow_lease.FlowBusyError` if
        another run holds it (see :mod:`airmirror.store.flow_lease`)."""
        return hold_flow(self._engine, flow, holder, ttl_seconds=ttl_seconds)

    def flow_lease(self, flow: str) -> FlowLeaseRecord | None:
        """The flow's lease as stored, expired or not; ``None`` when no run holds it."""
        return current_lease(self._engine, flow)

    def schema_version(self) -> str:
        """The Alembic revision the database is at."""
        version = self._revision()
        if version is None:
            raise ReplicationFailure(f"metadata store {self._where} has no schema yet: run migrate()")
        return version

    def check_schema(self) -> None:
        """Raise :class:`SchemaNotCurrentError` unless the database is at this airmirror's newest migration."""
        version = self._revision()
        if version != head_revision():
            raise SchemaNotCurrentError(self._where, version, head_revision())

    def _revision(self) -> str | None:
        with self._read("read the schema version") as connection:
            return current_revision(connection)

    # Topic incarnations: each a transaction around the SQL of airmirror.store.incarnation_rows (see its contracts).

    def cursor_states(self, flow: str) -> dict[PartitionKey, CursorState]:
        """Every cursor of the flow with the source topic id it belongs to."""
        with self._read(f"read the cursors of flow {flow!r}") as connection:
            return incarnation_rows.cursor_states(connection, flow)

    def remote_topic_ids(self, flow: str) -> dict[str, str]:
        """The topic id recorded for each remote topic of the flow."""
        with self._read(f"read the remote topic ids of flow {flow!r}") as connection:
            return incarnation_rows.remote_topic_ids(connection, flow)

    def remote_topic_sources(self, flow: str) -> dict[str, str | None]:
        """The source topic recorded for each remote topic of the flow (``None`` for those recorded before
        sources were)."""
        with self._read(f"read the remote topics of flow {flow!r}") as connection:
            return incarnation_rows.remote_topic_sources(connection, flow)

    def record_remote_topic_ids(self, flow: str, ids: Mapping[str, str], sources: Mapping[str, str]) -> None:
        """Record the ids of remote topics seen for the first time, with the source topic of each in ``sources``
        (recorded ids are never replaced)."""
        with self._write(f"record remote topic ids of flow {flow!r}") as connection:
            incarnation_rows.record_remote_topic_ids(connection, flow, ids, sources, utcnow())

    def stops(self, flow: str) -> list[Stop]:
        """The flow's stopped topics and partitions."""
        with self._read(f"read the stops of flow {flow!r}") as connection:
            return incarnation_rows.stop_list(connection, flow)

    def stop_partition(self, flow: str, key: PartitionKey, reason: str) -> None:
        """Stop one source partition (replacing an earlier stop of it)."""
        with self._write(f"stop {key} in flow {flow!r}") as connection:
            incarnation_rows.add_stop(connection, flow, key.topic, key.partition, reason, utcnow())

    def stop_remote_topic(self, flow: str, topic: str, remote_topic: str, reason: str) -> None:
        """Stop source ``topic`` because its remote topic changed, and retire its offset-syncs and checkpoints."""
        with self._write(f"stop {topic} in flow {flow!r}") as connection:
            incarnation_rows.stop_remote_topic(connection, flow, topic, remote_topic, reason, utcnow())

    def source_resets(self, flow: str) -> list[SourceReset]:
        """Every source reset of the flow, oldest first."""
        with self._read(f"read the source resets of flow {flow!r}") as connection:
            return incarnation_rows.source_reset_list(connection, flow)

    def reset_topic(self, flow: str, topic: str, remote_topic: str) -> list[PartitionKey]:
        """Forget everything about source ``topic`` so the next run copies it from its start
        (:func:`airmirror.store.incarnation_rows.reset_topic`); returns the partitions whose cursors went."""
        with self._write(f"reset {topic} in flow {flow!r}") as connection:
            return incarnation_rows.reset_topic(connection, flow, topic, remote_topic)
