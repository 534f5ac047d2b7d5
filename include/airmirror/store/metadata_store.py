"""The airmirror metadata store: replication cursors, batch history, offset syncs and gaps in SQL.

Contracts:

* **Cursor**: per (flow, source topic, partition) the next source offset to copy.  A cursor moves
  only when a batch commits, and then to the end of the range that batch copied.
* **Batch life cycle**: :meth:`MetadataStore.begin_batch` records the plan (state ``RUNNING``)
  before anything is copied.  A flow has at most one ``RUNNING`` batch, enforced by a unique
  partial index in the database.  :meth:`~MetadataStore.commit_batch` or
  :meth:`~MetadataStore.fail_batch` ends it; :meth:`~MetadataStore.unfinished_batch` finds it
  again after a crash.
* **One-transaction commit**: ``commit_batch`` checks that every cursor is still where the plan
  started from, then moves the cursors, stores each range's outcome, the offset syncs and the gaps
  and marks the batch ``COMMITTED``, all in ONE database transaction: a reader sees all of it or
  none of it.  If the plan is stale it raises :class:`StaleCursorError` and writes nothing.
* **Exact offset translation**: ``airmirror_offset_syncs`` holds one row per contiguous run of
  copied records (:class:`~airmirror.model.OffsetRun`), so upstream offset ``u`` inside a run maps
  to ``downstream_start + (u - upstream_start)`` with no approximation.
* **Errors**: an unreachable or failing database raises
  :class:`~airmirror.errors.ReplicationFailure` naming the database URL with its password and secret
  query parameters masked (:func:`airmirror.config.secrets.masked_db_url`), as the store's repr does;
  arguments that break these contracts raise ``ValueError``.
* **Checkpoints, group syncs, heartbeats**: the newest value per key is kept (an upsert); each
  carries the time it was emitted or observed.  They describe what was written to the target cluster,
  so callers save them only after the target acknowledged the write.
* **Flow leases**: :meth:`MetadataStore.hold_flow` lets one run at a time work on a flow
  (:mod:`airmirror.store.flow_lease`).
* Timestamps are timezone-aware UTC.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.util import CommandError
from sqlalchemy import (
    URL,
    Connection,
    Engine,
    Row,
    Select,
    Table,
    bindparam,
    create_engine,
    event,
    func,
    insert,
    make_url,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError
from sqlalchemy.pool import ConnectionPoolEntry

from airmirror.errors import ReplicationFailure
from airmirror.store import incarnations
from airmirror.store.incarnations import CursorState, SourceReset, Stop
from airmirror.model import Gap, OffsetRun, PartitionKey, PlannedRange, RangeResult
from airmirror.config.secrets import masked_db_url
from airmirror.store.flow_lease import DEFAULT_LEASE_TTL_SECONDS, FlowLease, FlowLeaseRecord, current_lease, hold_flow
from airmirror.store.schema import (
    VERSION_TABLE,
    BatchState,
    GroupSyncOutcome,
    batch_ranges,
    batches,
    checkpoints,
    cursors,
    gaps,
    group_syncs,
    heartbeat_emissions,
    heartbeat_latency,
    offset_syncs,
)

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
SQLITE_BUSY_TIMEOUT_SECONDS = 30
_PG_MIGRATION_LOCK = 0x616972_6D6972
"""PostgreSQL advisory lock key ("airmir") serialising concurrent migrations of one database."""


class StaleCursorError(ReplicationFailure):
    """A cursor moved after the batch was planned, so its ranges no longer continue the cursors.

    Nothing was written and the batch is still ``RUNNING``: fail it and plan again.
    """


@dataclass(frozen=True)
class BatchRecord:
    """A batch as stored.  ``records``/``bytes`` are totals, set once the batch is committed."""

    id: int
    flow: str
    state: BatchState
    created_at: datetime
    finished_at: datetime | None
    params: dict[str, Any]
    ranges: list[PlannedRange]
    records: int | None
    bytes: int | None
    error: str | None


@dataclass(frozen=True)
class PartitionStats:
    """Replication status of one source partition of a flow, as shown by ``airmirror status``.

    ``records``/``bytes`` total every committed batch; ``gap_offsets`` is how many source offsets
    retention deleted before they were copied, over ``gap_count`` gaps.
    """

    cursor: int
    records: int
    bytes: int
    last_batch_id: int
    last_batch_at: datetime
    gap_count: int
    gap_offsets: int


@dataclass(frozen=True)
class StoredCheckpoint:
    """The newest checkpoint of a group on one source partition, as written to the target.

    ``topic`` is the topic the group committed on (source cluster); ``remote_topic`` is the topic the
    checkpoint names on the target.  ``metadata`` is the group's commit metadata.
    """

    group: str
    topic: str
    partition: int
    remote_topic: str
    upstream_offset: int
    downstream_offset: int
    metadata: str
    emitted_at: datetime

    @property
    def key(self) -> PartitionKey:
        return PartitionKey(self.topic, self.partition)


@dataclass(frozen=True)
class GroupSyncRecord:
    """The newest group offset sync of a group on the target: what happened and why."""

    group: str
    outcome: GroupSyncOutcome
    target_state: str
    offsets_committed: int
    detail: str
    synced_at: datetime


@dataclass(frozen=True)
class HeartbeatLatency:
    """Replication latency seen from the newest copied heartbeat of flow ``source_alias->target_alias``:
    ``latency_ms`` = ``observed_at`` (the batch commit) - ``heartbeat_at`` (the heartbeat's timestamp)."""

    source_alias: str
    target_alias: str
    heartbeat_at: datetime
    observed_at: datetime
    latency_ms: int


@dataclass(frozen=True)
class HeartbeatEmission:
    """The newest heartbeat a flow wrote to ``topic`` on its target, with the heartbeat's timestamp."""

    topic: str
    heartbeat_at: datetime


def alembic_config(connection: Connection) -> Config:
    """An Alembic config for the store's migrations that runs them on ``connection``.

    No ``alembic.ini`` is needed; pass the result to ``alembic.command`` functions (``upgrade``,
    ``downgrade``, ``revision(autogenerate=True)`` when writing a new migration).
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def create_store_engine(url: str | URL) -> Engine:
    """A pre-pinging engine for ``url``.

    SQLite: the file's directory is created, writers wait up to 30 s for a lock, foreign keys are
    enforced and every transaction starts with ``BEGIN IMMEDIATE`` so that a read-check-write
    transaction holds the write lock from its first read.
    """
    url = make_url(url)
    if url.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
    if url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, pool_pre_ping=True, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
    event.listen(engine, "connect", _sqlite_on_connect)
    event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def _sqlite_on_connect(dbapi_connection: Any, connection_record: ConnectionPoolEntry) -> None:
    dbapi_connection.isolation_level = None
    dbapi_connection.execute("PRAGMA foreign_keys = ON")


def _sqlite_on_begin(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN IMMEDIATE")


class MetadataStore:
    """Repository over the metadata store tables (see the module docstring for the contracts)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._where = masked_db_url(engine.url)

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

    def __enter__(self) -> MetadataStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.dispose()

    def dispose(self) -> None:
        """Close every pooled connection."""
        self._engine.dispose()

    @contextmanager
    def _transaction(self, action: str) -> Iterator[Connection]:
        """One database transaction; database failures become :class:`ReplicationFailure`."""
        try:
            with self._engine.begin() as connection:
                yield connection
        except (OperationalError, InterfaceError) as exc:
            reason = str(exc.orig).strip() or type(exc.orig).__name__
            raise ReplicationFailure(f"metadata store {self._where}: could not {action}: {reason}") from exc

    def migrate(self) -> None:
        """Upgrade the schema to the newest migration, in one transaction; safe to run concurrently."""
        with self._transaction("migrate the schema") as connection:
            if connection.dialect.name == "postgresql":
                connection.execute(select(func.pg_advisory_xact_lock(_PG_MIGRATION_LOCK)))
            try:
                command.upgrade(alembic_config(connection), "head")
            except CommandError as exc:
                raise ReplicationFailure(
                    f"metadata store {self._where}: could not migrate the schema: {exc}"
                ) from exc

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
        with self._transaction("read the schema version") as connection:
            version = MigrationContext.configure(
                connection, opts={"version_table": VERSION_TABLE}
            ).get_current_revision()
        if version is None:
            raise ReplicationFailure(f"metadata store {self._where} has no schema yet: run migrate()")
        return version

    def cursors(self, flow: str) -> dict[PartitionKey, int]:
        """The next source offset to copy, per partition the flow has ever committed."""
        with self._transaction(f"read the cursors of flow {flow!r}") as connection:
            rows = connection.execute(
                select(cursors.c.topic, cursors.c.partition, cursors.c.next_offset).where(cursors.c.flow == flow)
            )
            return {PartitionKey(row.topic, row.partition): row.next_offset for row in rows}

    def begin_batch(self, flow: str, ranges: Sequence[PlannedRange], params: Mapping[str, Any]) -> int:
        """Record a new ``RUNNING`` batch with its planned ranges and JSON ``params``; return its id.

        Raises :class:`ReplicationFailure` if the flow already has a ``RUNNING`` batch.
        """
        _validate_plan(ranges)
        _validate_params(params)
        with self._transaction(f"begin a batch of flow {flow!r}") as connection:
            try:
                batch_id: int = connection.execute(
                    insert(batches).values(
                        flow=flow, state=BatchState.RUNNING, created_at=_utcnow(), params=dict(params)
                    )
                ).inserted_primary_key[0]
            except IntegrityError as exc:
                raise ReplicationFailure(
                    f"flow {flow!r} already has a RUNNING batch: commit or fail it "
                    "(see unfinished_batch) before beginning another"
                ) from exc
            _insert_many(connection, batch_ranges, [_range_row(batch_id, planned) for planned in ranges])
        return batch_id

    def unfinished_batch(self, flow: str) -> BatchRecord | None:
        """The flow's ``RUNNING`` batch, if any."""
        with self._transaction(f"read the unfinished batch of flow {flow!r}") as connection:
            rows = connection.execute(
                select(batches).where(batches.c.flow == flow, batches.c.state == BatchState.RUNNING)
            ).all()
            records = _batch_records(connection, rows)
        return records[0] if records else None

    def replan_range(self, batch_id: int, planned: PlannedRange) -> None:
        """Replace one range of a RUNNING batch (same partition): one that nothing was copied of yet, when
        retention deleted its start (the lost offsets recorded as a gap) or to apply a new cap; or any, to end
        it where its copy got to when the source log diverged below its end."""
        _validate_plan([planned])
        with self._transaction(f"replan {planned.key} of batch {batch_id}") as connection:
            _lock_running_batch(connection, batch_id, "replanned")
            updated = connection.execute(
                batch_ranges.update()
                .where(
                    batch_ranges.c.batch_id == batch_id,
                    batch_ranges.c.topic == planned.topic,
                    batch_ranges.c.partition == planned.partition,
                )
                .values(start_offset=planned.start, end_offset=planned.end, gap_start=planned.gap_start, start_epoch=planned.start_epoch)
            )
            if updated.rowcount != 1:
                raise ValueError(f"batch {batch_id} has no range for {planned.key}")

    def cursor_states(self, flow: str) -> dict[PartitionKey, CursorState]:
        """Every cursor of the flow with the source topic id it belongs to."""
        with self._transaction(f"read the cursors of flow {flow!r}") as connection:
            return incarnations.cursor_states(connection, flow)

    def remote_topic_ids(self, flow: str) -> dict[str, str]:
        """The topic id recorded for each remote topic of the flow."""
        with self._transaction(f"read the remote topic ids of flow {flow!r}") as connection:
            return incarnations.remote_topic_ids(connection, flow)

    def record_remote_topic_ids(self, flow: str, ids: Mapping[str, str]) -> None:
        """Record the ids of remote topics seen for the first time (recorded ids are never replaced)."""
        with self._transaction(f"record remote topic ids of flow {flow!r}") as connection:
            incarnations.record_remote_topic_ids(connection, flow, ids, _utcnow())

    def stops(self, flow: str) -> list[Stop]:
        """The flow's stopped topics and partitions."""
        with self._transaction(f"read the stops of flow {flow!r}") as connection:
            return incarnations.stop_list(connection, flow)

    def stop_partition(self, flow: str, key: PartitionKey, reason: str) -> None:
        """Stop one source partition (replacing an earlier stop of it)."""
        with self._transaction(f"stop {key} in flow {flow!r}") as connection:
            incarnations.add_stop(connection, flow, key.topic, key.partition, reason, _utcnow())

    def stop_remote_topic(self, flow: str, topic: str, remote_topic: str, reason: str) -> None:
        """Stop source ``topic`` because its remote topic changed, and retire its offset-syncs and checkpoints."""
        with self._transaction(f"stop {topic} in flow {flow!r}") as connection:
            incarnations.stop_remote_topic(connection, flow, topic, remote_topic, reason, _utcnow())

    def source_resets(self, flow: str) -> list[SourceReset]:
        """Every source reset of the flow, oldest first."""
        with self._transaction(f"read the source resets of flow {flow!r}") as connection:
            return incarnations.source_reset_list(connection, flow)

    def drop_ranges(self, batch_id: int, keys: Iterable[PartitionKey]) -> None:
        """Remove ranges from a RUNNING batch; their cursors stay where they are."""
        with self._transaction(f"drop ranges of batch {batch_id}") as connection:
            _lock_running_batch(connection, batch_id, "changed")
            incarnations.drop_ranges(connection, batch_id, keys)

    def reset_topic(self, flow: str, topic: str, remote_topic: str) -> list[PartitionKey]:
        """Forget everything about source ``topic`` so the next run copies it from its start
        (:func:`airmirror.store.incarnations.reset_topic`); returns the partitions whose cursors went."""
        with self._transaction(f"reset {topic} in flow {flow!r}") as connection:
            return incarnations.reset_topic(connection, flow, topic, remote_topic)

    def batches(self, flow: str, limit: int = 20) -> list[BatchRecord]:
        """The flow's ``limit`` newest batches, newest first."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        with self._transaction(f"read the batches of flow {flow!r}") as connection:
            rows = connection.execute(
                select(batches).where(batches.c.flow == flow).order_by(batches.c.id.desc()).limit(limit)
            ).all()
            return _batch_records(connection, rows)

    def commit_batch(self, batch_id: int, results: Sequence[RangeResult]) -> None:
        """Commit a ``RUNNING`` batch in one transaction (see the module docstring).

        ``results`` must hold exactly one result per planned range, starting at the planned start
        and ending within the planned range (``ValueError`` otherwise).  A stored cursor must equal
        the cursor the range was planned from, i.e. ``gap_start`` when set and ``start``
        otherwise; a partition without a cursor is accepted.  Raises :class:`StaleCursorError`
        when a cursor moved and :class:`ReplicationFailure` when the batch is not ``RUNNING``;
        either way nothing is written.
        """
        with self._transaction(f"commit batch {batch_id}") as connection:
            flow = _lock_running_batch(connection, batch_id, "committed")
            planned = _ranges_of(connection, [batch_id]).get(batch_id, [])
            pairs = _pair_results(batch_id, planned, results)
            stored = _check_cursors(connection, flow, batch_id, planned)
            now = _utcnow()
            stored_ids = {key: state.source_topic_id for key, state in incarnations.cursor_states(connection, flow).items()}
            incarnations.commit_resets(connection, flow, batch_id, planned, stored_ids, now)
            _advance_cursors(connection, flow, batch_id, pairs, stored, now)
            _store_outcomes(connection, batch_id, pairs)
            _insert_many(
                connection,
                offset_syncs,
                [_offset_sync_row(flow, batch_id, result, run) for _, result in pairs for run in result.runs],
            )
            _insert_many(
                connection,
                gaps,
                [_gap_row(flow, batch_id, gap, now) for plan, _ in pairs if (gap := plan.gap()) is not None],
            )
            connection.execute(
                update(batches)
                .where(batches.c.id == batch_id)
                .values(
                    state=BatchState.COMMITTED,
                    finished_at=now,
                    records=sum(result.records for _, result in pairs),
                    bytes=sum(result.bytes for _, result in pairs),
                )
            )

    def fail_batch(self, batch_id: int, reason: str) -> None:
        """Mark a ``RUNNING`` batch ``FAILED`` with ``reason``; its cursors stay where they were."""
        with self._transaction(f"fail batch {batch_id}") as connection:
            _lock_running_batch(connection, batch_id, "failed")
            connection.execute(
                update(batches)
                .where(batches.c.id == batch_id)
                .values(state=BatchState.FAILED, finished_at=_utcnow(), error=reason)
            )

    def offset_runs(self, flow: str, key: PartitionKey) -> list[OffsetRun]:
        """Every offset sync of one partition, ordered by upstream offset."""
        with self._transaction(f"read the offset syncs of {key} in flow {flow!r}") as connection:
            rows = connection.execute(_runs_of(flow, key).order_by(offset_syncs.c.upstream_start))
            return [_offset_run(row) for row in rows]

    def find_offset_run(self, flow: str, key: PartitionKey, upstream_offset: int) -> OffsetRun | None:
        """The run containing ``upstream_offset``, else the first run after it, else ``None``.

        One probe of the ``upstream_end`` index: runs never overlap, so the first run ending after
        ``upstream_offset`` is the one containing or following it.
        """
        action = f"look up upstream offset {upstream_offset} of {key} in flow {flow!r}"
        with self._transaction(action) as connection:
            row = connection.execute(
                _runs_of(flow, key)
                .where(offset_syncs.c.upstream_end > upstream_offset)
                .order_by(offset_syncs.c.upstream_end)
                .limit(1)
            ).one_or_none()
        return None if row is None else _offset_run(row)

    def last_offset_run(self, flow: str, key: PartitionKey) -> OffsetRun | None:
        """The partition's run with the highest upstream offsets, ``None`` when nothing was copied."""
        with self._transaction(f"read the last offset sync of {key} in flow {flow!r}") as connection:
            row = connection.execute(
                _runs_of(flow, key).order_by(offset_syncs.c.upstream_end.desc()).limit(1)
            ).one_or_none()
        return None if row is None else _offset_run(row)

    def find_offset_run_downstream(self, flow: str, key: PartitionKey, downstream_offset: int) -> OffsetRun | None:
        """The run whose downstream offsets contain ``downstream_offset``, else the first run after it.

        Two probes of the downstream index: the last run starting at or before the offset (it contains
        the offset or ends before it), then the first run starting after it.
        """
        action = f"look up downstream offset {downstream_offset} of {key} in flow {flow!r}"
        start = offset_syncs.c.downstream_start
        with self._transaction(action) as connection:
            row = connection.execute(
                _runs_of(flow, key).where(start <= downstream_offset).order_by(start.desc()).limit(1)
            ).one_or_none()
            if row is not None and downstream_offset < row.downstream_start + row.upstream_end - row.upstream_start:
                return _offset_run(row)
            row = connection.execute(
                _runs_of(flow, key).where(start > downstream_offset).order_by(start).limit(1)
            ).one_or_none()
        return None if row is None else _offset_run(row)

    def save_checkpoints(self, flow: str, saved: Sequence[StoredCheckpoint]) -> None:
        """Make each checkpoint the newest of its (group, topic, partition) in one transaction."""
        with self._transaction(f"save {len(saved)} checkpoints of flow {flow!r}") as connection:
            _upsert(connection, checkpoints, [_checkpoint_row(flow, checkpoint) for checkpoint in saved])

    def checkpoints(self, flow: str, group: str | None = None) -> list[StoredCheckpoint]:
        """The newest checkpoints of the flow (of one group when given), by group, topic and partition."""
        query = select(checkpoints).where(checkpoints.c.flow == flow)
        if group is not None:
            query = query.where(checkpoints.c.group_id == group)
        with self._transaction(f"read the checkpoints of flow {flow!r}") as connection:
            rows = connection.execute(
                query.order_by(checkpoints.c.group_id, checkpoints.c.topic, checkpoints.c.partition)
            )
            return [_stored_checkpoint(row) for row in rows]

    def record_group_sync(self, flow: str, record: GroupSyncRecord) -> None:
        """Make ``record`` the newest group offset sync outcome of its group."""
        with self._transaction(f"record the group offset sync of {record.group!r} in flow {flow!r}") as connection:
            _upsert(connection, group_syncs, [{"flow": flow, "group_id": record.group, **_fields_of(record, "group")}])

    def group_syncs(self, flow: str, group: str | None = None) -> list[GroupSyncRecord]:
        """The newest group offset sync outcome of every group of the flow (or of one group), by group."""
        query = select(group_syncs).where(group_syncs.c.flow == flow)
        if group is not None:
            query = query.where(group_syncs.c.group_id == group)
        with self._transaction(f"read the group offset syncs of flow {flow!r}") as connection:
            rows = connection.execute(query.order_by(group_syncs.c.group_id))
            return [
                GroupSyncRecord(
                    row.group_id, row.outcome, row.target_state, row.offsets_committed, row.detail, row.synced_at
                )
                for row in rows
            ]

    def record_heartbeat_latency(self, flow: str, latency: HeartbeatLatency) -> None:
        """Make ``latency`` the newest observation for its heartbeat source and target aliases."""
        with self._transaction(f"record the heartbeat latency of flow {flow!r}") as connection:
            _upsert(connection, heartbeat_latency, [{"flow": flow, **_fields_of(latency)}])

    def heartbeat_latencies(self, flow: str) -> list[HeartbeatLatency]:
        """The newest latency per heartbeat source and target alias seen by the flow."""
        with self._transaction(f"read the heartbeat latencies of flow {flow!r}") as connection:
            rows = connection.execute(
                select(heartbeat_latency)
                .where(heartbeat_latency.c.flow == flow)
                .order_by(heartbeat_latency.c.source_alias, heartbeat_latency.c.target_alias)
            )
            return [
                HeartbeatLatency(row.source_alias, row.target_alias, row.heartbeat_at, row.observed_at, row.latency_ms)
                for row in rows
            ]

    def record_heartbeat_emitted(self, flow: str, emission: HeartbeatEmission) -> None:
        """Make ``emission`` the flow's newest heartbeat written to its target."""
        with self._transaction(f"record the heartbeat emitted by flow {flow!r}") as connection:
            _upsert(connection, heartbeat_emissions, [{"flow": flow, **_fields_of(emission)}])

    def heartbeat_emission(self, flow: str) -> HeartbeatEmission | None:
        """The flow's newest heartbeat written to its target, ``None`` before the first."""
        with self._transaction(f"read the heartbeat emitted by flow {flow!r}") as connection:
            row = connection.execute(
                select(heartbeat_emissions).where(heartbeat_emissions.c.flow == flow)
            ).one_or_none()
        return None if row is None else HeartbeatEmission(row.topic, row.heartbeat_at)

    def gaps(self, flow: str) -> list[Gap]:
        """Every gap recorded for the flow, by partition then offset."""
        with self._transaction(f"read the gaps of flow {flow!r}") as connection:
            rows = connection.execute(
                select(gaps.c.topic, gaps.c.partition, gaps.c.start_offset, gaps.c.end_offset)
                .where(gaps.c.flow == flow)
                .order_by(gaps.c.topic, gaps.c.partition, gaps.c.start_offset)
            )
            return [Gap(row.topic, row.partition, row.start_offset, row.end_offset) for row in rows]

    def partition_stats(self, flow: str) -> dict[PartitionKey, PartitionStats]:
        """Status of every partition that has a cursor in the flow."""
        with self._transaction(f"read the partition stats of flow {flow!r}") as connection:
            cursor_rows = connection.execute(select(cursors).where(cursors.c.flow == flow)).all()
            copied = _totals_by_partition(connection, _copied_totals(flow))
            lost = _totals_by_partition(connection, _gap_totals(flow))
        stats: dict[PartitionKey, PartitionStats] = {}
        for row in cursor_rows:
            key = PartitionKey(row.topic, row.partition)
            records, size = copied.get(key, (0, 0))
            gap_count, gap_offsets = lost.get(key, (0, 0))
            stats[key] = PartitionStats(
                cursor=row.next_offset,
                records=records,
                bytes=size,
                last_batch_id=row.batch_id,
                last_batch_at=row.updated_at,
                gap_count=gap_count,
                gap_offsets=gap_offsets,
            )
        return stats


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _validate_plan(ranges: Sequence[PlannedRange]) -> None:
    seen: set[PartitionKey] = set()
    for planned in ranges:
        if planned.key in seen:
            raise ValueError(f"partition {planned.key} is planned twice in one batch")
        seen.add(planned.key)
        if not 0 <= planned.start <= planned.end:
            raise ValueError(f"planned range of {planned.key} is invalid: [{planned.start}, {planned.end})")
        if planned.gap_start is not None and not 0 <= planned.gap_start <= planned.start:
            raise ValueError(
                f"planned range of {planned.key}: gap_start {planned.gap_start} is not in [0, {planned.start}]"
            )


def _validate_params(params: Mapping[str, Any]) -> None:
    try:
        json.dumps(dict(params), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"batch params must be JSON-serialisable: {exc}") from exc


def _insert_many(connection: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    if rows:
        connection.execute(insert(table), rows)


def _update_many(connection: Connection, table: Table, keys: Sequence[str], rows: list[dict[str, Any]]) -> None:
    """Update the rows matching each row's ``keys`` columns, setting its other columns."""
    if not rows:
        return
    statement = update(table).where(*(table.c[key] == bindparam(f"match_{key}") for key in keys))
    connection.execute(
        statement,
        [
            {(f"match_{column}" if column in keys else column): value for column, value in row.items()}
            for row in rows
        ],
    )


def _upsert(connection: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert ``rows``; a row whose primary key exists replaces that row's other columns."""
    if not rows:
        return
    dialect_insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
    statement = dialect_insert(table)
    keys = [column.name for column in table.primary_key.columns]
    statement = statement.on_conflict_do_update(
        index_elements=keys,
        set_={column.name: statement.excluded[column.name] for column in table.columns if column.name not in keys},
    )
    connection.execute(statement, rows)


def _fields_of(value: Any, *left_out: str) -> dict[str, Any]:
    """A dataclass's fields as columns, except those named in ``left_out``."""
    return {field.name: getattr(value, field.name) for field in fields(value) if field.name not in left_out}


def _checkpoint_row(flow: str, checkpoint: StoredCheckpoint) -> dict[str, Any]:
    return {
        "flow": flow,
        "group_id": checkpoint.group,
        "commit_metadata": checkpoint.metadata,
        **_fields_of(checkpoint, "group", "metadata"),
    }


def _stored_checkpoint(row: Row[Any]) -> StoredCheckpoint:
    return StoredCheckpoint(
        group=row.group_id,
        topic=row.topic,
        partition=row.partition,
        remote_topic=row.remote_topic,
        upstream_offset=row.upstream_offset,
        downstream_offset=row.downstream_offset,
        metadata=row.commit_metadata,
        emitted_at=row.emitted_at,
    )


def _range_row(batch_id: int, planned: PlannedRange) -> dict[str, Any]:
    return {
        "batch_id": batch_id,
        "topic": planned.topic,
        "partition": planned.partition,
        "start_offset": planned.start,
        "end_offset": planned.end,
        "remote_topic": planned.remote_topic,
        "gap_start": planned.gap_start,
        "moved_from": planned.moved_from,
        "source_topic_id": planned.source_topic_id,
        "reset_from": planned.reset_from,
        "start_epoch": planned.start_epoch,
        "truncated_at": planned.truncated_at,
    }


def _planned_range(row: Row[Any]) -> PlannedRange:
    return PlannedRange(
        topic=row.topic,
        partition=row.partition,
        start=row.start_offset,
        end=row.end_offset,
        remote_topic=row.remote_topic,
        gap_start=row.gap_start,
        moved_from=row.moved_from,
        source_topic_id=row.source_topic_id,
        reset_from=row.reset_from,
        start_epoch=row.start_epoch,
        truncated_at=row.truncated_at,
    )


def _ranges_of(connection: Connection, batch_ids: Sequence[int]) -> dict[int, list[PlannedRange]]:
    """The planned ranges of each batch, ordered by partition."""
    rows = connection.execute(
        select(batch_ranges)
        .where(batch_ranges.c.batch_id.in_(batch_ids))
        .order_by(batch_ranges.c.batch_id, batch_ranges.c.topic, batch_ranges.c.partition)
    )
    ranges: dict[int, list[PlannedRange]] = {}
    for row in rows:
        ranges.setdefault(row.batch_id, []).append(_planned_range(row))
    return ranges


def _batch_records(connection: Connection, rows: Sequence[Row[Any]]) -> list[BatchRecord]:
    ranges = _ranges_of(connection, [row.id for row in rows]) if rows else {}
    return [
        BatchRecord(
            id=row.id,
            flow=row.flow,
            state=row.state,
            created_at=row.created_at,
            finished_at=row.finished_at,
            params=row.params,
            ranges=ranges.get(row.id, []),
            records=row.records,
            bytes=row.bytes,
            error=row.error,
        )
        for row in rows
    ]


def _lock_running_batch(connection: Connection, batch_id: int, outcome: str) -> str:
    """Lock the batch row and return its flow; raise unless the batch is ``RUNNING``."""
    row = connection.execute(
        select(batches.c.flow, batches.c.state).where(batches.c.id == batch_id).with_for_update()
    ).one_or_none()
    if row is None:
        raise ReplicationFailure(f"batch {batch_id} does not exist")
    if row.state is not BatchState.RUNNING:
        raise ReplicationFailure(
            f"batch {batch_id} of flow {row.flow!r} is {row.state.value}: only a RUNNING batch can be {outcome}"
        )
    flow: str = row.flow
    return flow


def _pair_results(
    batch_id: int, planned: Sequence[PlannedRange], results: Sequence[RangeResult]
) -> list[tuple[PlannedRange, RangeResult]]:
    """Match each planned range with its result; every range needs exactly one valid result."""
    plans = {plan.key: plan for plan in planned}
    matched: dict[PartitionKey, RangeResult] = {}
    for result in results:
        key = PartitionKey(result.topic, result.partition)
        plan = plans.get(key)
        if plan is None:
            raise ValueError(f"batch {batch_id} planned no range for {key}")
        if key in matched:
            raise ValueError(f"batch {batch_id} got two results for {key}")
        if result.start != plan.start or not plan.start <= result.end <= plan.end:
            raise ValueError(
                f"batch {batch_id}: result [{result.start}, {result.end}) of {key} does not start the planned "
                f"range [{plan.start}, {plan.end}) or ends outside it"
            )
        _validate_runs(key, result)
        matched[key] = result
    missing = sorted(plans.keys() - matched.keys())
    if missing:
        raise ValueError(f"batch {batch_id} has no result for {', '.join(map(str, missing))}")
    return [(plan, matched[plan.key]) for plan in planned]


def _validate_runs(key: PartitionKey, result: RangeResult) -> None:
    """Runs must be non-empty, ordered, non-overlapping and inside the copied range."""
    previous_end = result.start
    for run in result.runs:
        if run.length <= 0 or run.upstream_start < previous_end or run.upstream_end > result.end:
            raise ValueError(
                f"offset run [{run.upstream_start}, {run.upstream_end}) of {key} is empty, out of order or "
                f"outside the copied range [{result.start}, {result.end})"
            )
        previous_end = run.upstream_end


def _expected_cursor(plan: PlannedRange) -> int:
    """The cursor the range was planned from: the moved cursor, else below the gap when one was detected."""
    if plan.moved_from is not None:
        return plan.moved_from
    if plan.reset_from is not None:
        return plan.reset_from
    return plan.start if plan.gap_start is None else plan.gap_start


def _check_cursors(
    connection: Connection, flow: str, batch_id: int, planned: Sequence[PlannedRange]
) -> dict[PartitionKey, int]:
    """Lock the flow's cursors and return them; raise :class:`StaleCursorError` if any moved."""
    rows = connection.execute(
        select(cursors.c.topic, cursors.c.partition, cursors.c.next_offset)
        .where(cursors.c.flow == flow)
        .with_for_update()
    )
    stored = {PartitionKey(row.topic, row.partition): row.next_offset for row in rows}
    stale = [
        f"{plan.key} is at {stored[plan.key]}, planned from {_expected_cursor(plan)}"
        for plan in planned
        if plan.key in stored and stored[plan.key] != _expected_cursor(plan)
    ]
    if stale:
        raise StaleCursorError(
            f"batch {batch_id} of flow {flow!r} is stale, nothing was committed: {'; '.join(stale)}"
        )
    return stored


def _advance_cursors(
    connection: Connection,
    flow: str,
    batch_id: int,
    pairs: Sequence[tuple[PlannedRange, RangeResult]],
    stored: Mapping[PartitionKey, int],
    now: datetime,
) -> None:
    """Set each copied partition's cursor to the end of what was copied."""
    rows = {
        plan.key: {
            "flow": flow,
            "topic": plan.topic,
            "partition": plan.partition,
            "next_offset": result.end,
            "batch_id": batch_id,
            "updated_at": now,
            "source_topic_id": plan.source_topic_id,
            "leader_epoch": result.end_epoch,
        }
        for plan, result in pairs
    }
    _update_many(connection, cursors, ("flow", "topic", "partition"), [row for k, row in rows.items() if k in stored])
    _insert_many(connection, cursors, [row for k, row in rows.items() if k not in stored])


def _store_outcomes(
    connection: Connection, batch_id: int, pairs: Sequence[tuple[PlannedRange, RangeResult]]
) -> None:
    """Record what was copied of each planned range."""
    _update_many(
        connection,
        batch_ranges,
        ("batch_id", "topic", "partition"),
        [
            {
                "batch_id": batch_id,
                "topic": plan.topic,
                "partition": plan.partition,
                "records": result.records,
                "bytes": result.bytes,
                "downstream_start": result.downstream_start,
                "downstream_end": result.downstream_end,
                "end_epoch": result.end_epoch,
            }
            for plan, result in pairs
        ],
    )


def _offset_sync_row(flow: str, batch_id: int, result: RangeResult, run: OffsetRun) -> dict[str, Any]:
    return {
        "flow": flow,
        "topic": result.topic,
        "partition": result.partition,
        "upstream_start": run.upstream_start,
        "upstream_end": run.upstream_end,
        "downstream_start": run.downstream_start,
        "batch_id": batch_id,
    }


def _gap_row(flow: str, batch_id: int, gap: Gap, now: datetime) -> dict[str, Any]:
    return {
        "flow": flow,
        "topic": gap.topic,
        "partition": gap.partition,
        "start_offset": gap.start,
        "end_offset": gap.end,
        "batch_id": batch_id,
        "detected_at": now,
    }


def _runs_of(flow: str, key: PartitionKey) -> Select[Any]:
    return select(offset_syncs.c.upstream_start, offset_syncs.c.upstream_end, offset_syncs.c.downstream_start).where(
        offset_syncs.c.flow == flow, offset_syncs.c.topic == key.topic, offset_syncs.c.partition == key.partition
    )


def _offset_run(row: Row[Any]) -> OffsetRun:
    return OffsetRun(row.upstream_start, row.upstream_end, row.downstream_start)


def _copied_totals(flow: str) -> Select[Any]:
    """(topic, partition, records, bytes) summed over the flow's committed batches."""
    return (
        select(
            batch_ranges.c.topic,
            batch_ranges.c.partition,
            func.sum(batch_ranges.c.records),
            func.sum(batch_ranges.c.bytes),
        )
        .join(batches, batches.c.id == batch_ranges.c.batch_id)
        .where(batches.c.flow == flow, batches.c.state == BatchState.COMMITTED)
        .group_by(batch_ranges.c.topic, batch_ranges.c.partition)
    )


def _gap_totals(flow: str) -> Select[Any]:
    """(topic, partition, number of gaps, offsets lost) of the flow."""
    return (
        select(gaps.c.topic, gaps.c.partition, func.count(), func.sum(gaps.c.end_offset - gaps.c.start_offset))
        .where(gaps.c.flow == flow)
        .group_by(gaps.c.topic, gaps.c.partition)
    )


def _totals_by_partition(connection: Connection, query: Select[Any]) -> dict[PartitionKey, tuple[int, int]]:
    """Run a ``(topic, partition, a, b)`` aggregate; PostgreSQL sums BIGINTs as NUMERIC, so convert to int."""
    return {
        PartitionKey(topic, partition): (int(first or 0), int(second or 0))
        for topic, partition, first, second in connection.execute(query)
    }
