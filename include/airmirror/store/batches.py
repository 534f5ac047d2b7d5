"""Batches, cursors, offset syncs and gaps: what was planned, what was copied and where each partition's copy
continues (:class:`BatchStore`, a part of :class:`~airmirror.store.metadata_store.MetadataStore`).

Contracts:

* **Cursor**: per (flow, source topic, partition) the next source offset to copy.  A cursor moves
  only when a batch commits, and then to the end of the range that batch copied.
* **Batch life cycle**: :meth:`BatchStore.begin_batch` records the plan (state ``RUNNING``)
  before anything is copied.  A flow has at most one ``RUNNING`` batch, enforced by a unique
  partial index in the database.  :meth:`~BatchStore.commit_batch` or
  :meth:`~BatchStore.fail_batch` ends it; :meth:`~BatchStore.unfinished_batch` finds it
  again after a crash.
* **One-transaction commit**: ``commit_batch`` checks that every cursor is still where the plan
  started from, then moves the cursors, stores each range's outcome, the offset syncs and the gaps, adds
  them to the partitions' totals (``airmirror_partition_totals``, what :meth:`BatchStore.partition_stats`
  reads) and marks the batch ``COMMITTED``, all in ONE database transaction: a reader sees all of it or
  none of it.  If the plan is stale it raises :class:`StaleCursorError` and writes nothing.
* **Exact offset translation**: ``airmirror_offset_syncs`` holds one row per run of copied records consecutive
  on the target (:class:`~airmirror.model.OffsetRun`, with the source offsets inside it that hold no copy as its
  holes), so upstream offset ``u`` inside a run maps to ``downstream_start`` plus the copies of offsets below
  ``u`` with no approximation.  A batch whose first run (without holes) continues the partition's stored exact
  run without holes exactly (on both sides) extends that run instead of adding one.  Retention
  folds a partition's old runs (:mod:`airmirror.store.retention`); every read returns them as folded
  :class:`~airmirror.model.OffsetRun` values, whose translation is at or before the exact one.
* **Takeover**: :meth:`BatchStore.record_takeover` stores what MM2 copied as one committed batch, with
  MM2's imported offset syncs (``airmirror_mm2_syncs``), in one transaction.
* **Errors**: arguments that break these contracts raise ``ValueError``; database failures raise
  :class:`~airmirror.errors.ReplicationFailure` (see :mod:`airmirror.store.engine`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, Select, case, func, select, update
from sqlalchemy.exc import IntegrityError

from airmirror.errors import ReplicationFailure
from airmirror.mm2.wire_formats import OffsetSync
from airmirror.model import (
    BatchJobs,
    BatchRecord,
    BatchState,
    CopiedSince,
    Gap,
    NoJobYet,
    OffsetRun,
    PartitionKey,
    PartitionStats,
    PerPartitionJobs,
    PlannedRange,
    RangeResult,
    TaskJobs,
    TopicCopied,
)
from airmirror.store import incarnation_rows
from airmirror.store.engine import EngineHolder
from airmirror.store.range_commits import (
    commit_ranges,
    lock_running_batch,
    planned_ranges,
    range_columns,
    stored_ranges,
    validate_runs,
)
from airmirror.store.rows import (
    columns_of,
    from_columns,
    insert_many,
    insert_one,
    utcnow,
)
from airmirror.store.schema import batch_ranges, batches, cursors, gaps, mm2_syncs, offset_syncs, partition_totals

PER_PARTITION_COPY_TASKS = 0
"""``airmirror_batches.copy_tasks`` of a batch begun by an earlier airmirror
(:class:`~airmirror.model.PerPartitionJobs`)."""


def jobs_of(copy_tasks: int | None, log_floor: int | None) -> BatchJobs:
    """What a batch's copy jobs left behind, from its ``copy_tasks`` and ``log_floor`` columns."""
    if copy_tasks is None:
        return NoJobYet()
    if copy_tasks == PER_PARTITION_COPY_TASKS:
        return PerPartitionJobs()
    return TaskJobs(copy_tasks, log_floor)


class BatchStore(EngineHolder):
    """Batches, cursors, offset syncs and gaps of the store's flows (see the module docstring for the contracts)."""

    def cursors(self, flow: str) -> dict[PartitionKey, int]:
        """The next source offset to copy, per partition the flow has ever committed."""
        with self._read(f"read the cursors of flow {flow!r}") as connection:
            rows = connection.execute(
                select(cursors.c.topic, cursors.c.partition, cursors.c.next_offset).where(cursors.c.flow == flow)
            )
            return {PartitionKey(row.topic, row.partition): row.next_offset for row in rows}

    def copied_topics(self, flow: str) -> set[str]:
        """The source topics the flow has copied or is copying: those with a cursor or a range in its unfinished
        batch (one row per topic read, however many partitions)."""
        running = select(batches.c.id).where(batches.c.flow == flow, batches.c.state == BatchState.RUNNING)
        with self._read(f"read the copied topics of flow {flow!r}") as connection:
            return set(
                connection.execute(
                    select(cursors.c.topic)
                    .where(cursors.c.flow == flow)
                    .union(select(batch_ranges.c.topic).where(batch_ranges.c.batch_id.in_(running)))
                ).scalars()
            )

    def begin_batch(self, flow: str, ranges: Sequence[PlannedRange], params: Mapping[str, Any]) -> int:
        """Record a new ``RUNNING`` batch with its planned ranges and JSON ``params``; return its id.

        Raises :class:`ReplicationFailure` if the flow already has a ``RUNNING`` batch.
        """
        _validate_plan(ranges)
        _validate_params(params)
        refusal = (
            f"flow {flow!r} already has a RUNNING batch: commit or fail it (see unfinished_batch) before beginning "
            "another"
        )
        with self._write(f"begin a batch of flow {flow!r}") as connection:
            batch_id = _insert_running_batch(connection, flow, ranges, params, refusal)
        return batch_id

    def unfinished_batch(self, flow: str) -> BatchRecord | None:
        """The flow's ``RUNNING`` batch, if any."""
        with self._read(f"read the unfinished batch of flow {flow!r}") as connection:
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
        with self._write(f"replan {planned.key} of batch {batch_id}") as connection:
            lock_running_batch(connection, batch_id, "replanned")
            updated = connection.execute(
                batch_ranges.update()
                .where(
                    batch_ranges.c.batch_id == batch_id,
                    batch_ranges.c.topic == planned.topic,
                    batch_ranges.c.partition == planned.partition,
                )
                .values(
                    start_offset=planned.start,
                    end_offset=planned.end,
                    gap_start=planned.gap_start,
                    start_epoch=planned.start_epoch,
                )
            )
            if updated.rowcount != 1:
                raise ValueError(f"batch {batch_id} has no range for {planned.key}")

    def set_copy_tasks(self, batch_id: int, count: int, log_end: int) -> TaskJobs:
        """Record that the RUNNING batch's copy job is about to run ``count`` copy tasks, the batch log ending at
        ``log_end`` before it: the batch's log floor when this is its first job (a later job keeps the floor, the
        one place this rule lives).  Returns the batch's jobs as stored now.  Call it only after fencing the
        attempts of the jobs recorded before, and before the job starts."""
        if count < 1:
            raise ValueError(f"a copy job runs at least one task, not {count}")
        first_job = batches.c.copy_tasks.is_(None)
        with self._write(f"record the copy tasks of batch {batch_id}") as connection:
            lock_running_batch(connection, batch_id, "copied")
            connection.execute(
                batches.update()
                .where(batches.c.id == batch_id)
                .values(copy_tasks=count, log_floor=case((first_job, log_end), else_=batches.c.log_floor))
            )
            floor: int | None = connection.execute(
                select(batches.c.log_floor).where(batches.c.id == batch_id)
            ).scalar_one()
            return TaskJobs(count, floor)

    def drop_ranges(self, batch_id: int, keys: Iterable[PartitionKey]) -> None:
        """Remove ranges from a RUNNING batch; their cursors stay where they are."""
        with self._write(f"drop ranges of batch {batch_id}") as connection:
            lock_running_batch(connection, batch_id, "changed")
            incarnation_rows.drop_ranges(connection, batch_id, keys)

    def batches(self, flow: str, limit: int = 20) -> list[BatchRecord]:
        """The flow's ``limit`` newest batches, newest first."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        with self._read(f"read the batches of flow {flow!r}") as connection:
            rows = connection.execute(
                select(batches).where(batches.c.flow == flow).order_by(batches.c.id.desc()).limit(limit)
            ).all()
            return _batch_records(connection, rows)

    def newest_batch_id(self, flow: str) -> int:
        """The id of the flow's newest batch, whatever its state (0 before the first)."""
        with self._read(f"read the newest batch of flow {flow!r}") as connection:
            return connection.execute(select(func.max(batches.c.id)).where(batches.c.flow == flow)).scalar() or 0

    def copied_since(self, flow: str, first_batch_id: int) -> CopiedSince:
        """What the flow's batches committed from ``first_batch_id`` on copied, summed per source topic in the
        database (one row per topic, however many batches): what one DAG run copied, live or not."""
        since = [batches.c.flow == flow, batches.c.state == BatchState.COMMITTED, batches.c.id >= first_batch_id]
        with self._read(f"read what flow {flow!r} copied since batch {first_batch_id}") as connection:
            last = connection.execute(select(func.max(batches.c.id)).where(*since)).scalar()
            rows = connection.execute(
                select(batch_ranges.c.topic, func.sum(batch_ranges.c.records), func.sum(batch_ranges.c.bytes))
                .join(batches, batches.c.id == batch_ranges.c.batch_id)
                .where(*since)
                .group_by(batch_ranges.c.topic)
            ).all()
        return CopiedSince(
            last, [TopicCopied(topic, int(records or 0), int(size or 0)) for topic, records, size in rows]
        )

    def commit_batch(self, batch_id: int, results: Sequence[RangeResult]) -> None:
        """Commit a ``RUNNING`` batch in one transaction (see the module docstring).

        ``results`` must hold exactly one result per planned range, starting at the planned start
        and ending within the planned range (``ValueError`` otherwise).  A stored cursor must equal
        the cursor the range was planned from (:attr:`~airmirror.model.PlannedRange.planned_from`); a partition
        without a cursor is accepted.  Raises :class:`StaleCursorError`
        when a cursor moved and :class:`ReplicationFailure` when the batch is not ``RUNNING``;
        either way nothing is written.
        """
        with self._write(f"commit batch {batch_id}") as connection:
            _commit_running(connection, batch_id, results)

    def record_takeover(
        self,
        flow: str,
        ranges: Sequence[PlannedRange],
        results: Sequence[RangeResult],
        syncs: Sequence[OffsetSync],
        params: Mapping[str, Any],
    ) -> int:
        """Record what another replicator (MM2) copied as one committed batch of ``flow``, in ONE transaction:
        its ``ranges`` and ``results`` as :meth:`begin_batch` and :meth:`commit_batch` would store them (the
        cursors move to the results' ends), and its imported offset ``syncs`` in ``airmirror_mm2_syncs``.
        Raises :class:`ReplicationFailure` when the flow has a ``RUNNING`` batch; nothing is written then."""
        _validate_plan(ranges)
        _validate_params(params)
        refusal = f"flow {flow!r} has a RUNNING batch: finish it before a takeover"
        with self._write(f"record the takeover of flow {flow!r}") as connection:
            batch_id = _insert_running_batch(connection, flow, ranges, params, refusal)
            _commit_running(connection, batch_id, results)
            insert_many(
                connection,
                mm2_syncs,
                [
                    {
                        "flow": flow,
                        "topic": sync.topic,
                        "partition": sync.partition,
                        "upstream_offset": sync.upstream_offset,
                        "downstream_offset": sync.downstream_offset,
                        "batch_id": batch_id,
                    }
                    for sync in syncs
                ],
            )
        return batch_id

    def mm2_sync_before(
        self, flow: str, key: PartitionKey, upstream_offset: int
    ) -> tuple[OffsetSync | None, int | None]:
        """The newest imported MM2 sync at or before ``upstream_offset`` (``None`` if none), and where the exact
        positions of a partition taken over from MM2 begin (``None`` when it was not taken over): the first
        upstream offset of the takeover's runs (its walk of MM2's tail), else its cursor (it walked nothing, so
        every offset below the cursor is MM2's copy without exact positions).  The takeover is the flow's first
        committed batch (:meth:`record_takeover` refuses a flow with cursors)."""
        with self._read(f"look up MM2 syncs of {key} in flow {flow!r}") as connection:
            first = takeover_batch(connection, flow)
            if first is None:
                return None, None
            in_takeover = (
                batch_ranges.c.batch_id == first,
                batch_ranges.c.topic == key.topic,
                batch_ranges.c.partition == key.partition,
            )
            cursor = connection.execute(select(batch_ranges.c.end_offset).where(*in_takeover)).scalar()
            if cursor is None:
                return None, None
            walked = connection.execute(
                select(func.min(offset_syncs.c.upstream_start)).where(
                    *partition_runs(flow, key), offset_syncs.c.batch_id == first
                )
            ).scalar()
            row = connection.execute(
                select(mm2_syncs.c.upstream_offset, mm2_syncs.c.downstream_offset)
                .where(
                    mm2_syncs.c.flow == flow,
                    mm2_syncs.c.topic == key.topic,
                    mm2_syncs.c.partition == key.partition,
                    mm2_syncs.c.upstream_offset <= upstream_offset,
                )
                .order_by(mm2_syncs.c.upstream_offset.desc())
                .limit(1)
            ).one_or_none()
        sync = None if row is None else OffsetSync(key.topic, key.partition, row.upstream_offset, row.downstream_offset)
        return sync, cursor if walked is None else walked

    def fail_batch(self, batch_id: int, reason: str) -> None:
        """Mark a ``RUNNING`` batch ``FAILED`` with ``reason``; its cursors stay where they were."""
        with self._write(f"fail batch {batch_id}") as connection:
            lock_running_batch(connection, batch_id, "failed")
            connection.execute(
                update(batches)
                .where(batches.c.id == batch_id)
                .values(state=BatchState.FAILED, finished_at=utcnow(), error=reason)
            )

    def offset_runs(self, flow: str, key: PartitionKey) -> list[OffsetRun]:
        """Every offset sync of one partition, ordered by upstream offset."""
        with self._read(f"read the offset syncs of {key} in flow {flow!r}") as connection:
            rows = connection.execute(runs_of(flow, key).order_by(offset_syncs.c.upstream_start))
            return [offset_run(row) for row in rows]

    def find_offset_run(self, flow: str, key: PartitionKey, upstream_offset: int) -> OffsetRun | None:
        """The run containing ``upstream_offset``, else the first run after it, else ``None``.

        One probe of the ``upstream_end`` index: runs never overlap, so the first run ending after
        ``upstream_offset`` is the one containing or following it.
        """
        action = f"look up upstream offset {upstream_offset} of {key} in flow {flow!r}"
        with self._read(action) as connection:
            row = connection.execute(
                runs_of(flow, key)
                .where(offset_syncs.c.upstream_end > upstream_offset)
                .order_by(offset_syncs.c.upstream_end)
                .limit(1)
            ).one_or_none()
        return None if row is None else offset_run(row)

    def last_offset_run(self, flow: str, key: PartitionKey) -> OffsetRun | None:
        """The partition's run with the highest upstream offsets, ``None`` when nothing was copied."""
        with self._read(f"read the last offset sync of {key} in flow {flow!r}") as connection:
            row = connection.execute(
                runs_of(flow, key).order_by(offset_syncs.c.upstream_end.desc()).limit(1)
            ).one_or_none()
        return None if row is None else offset_run(row)

    def find_offset_run_downstream(self, flow: str, key: PartitionKey, downstream_offset: int) -> OffsetRun | None:
        """The run whose downstream offsets contain ``downstream_offset``, else the first run after it.

        Two probes of the downstream index: the last run starting at or before the offset (it contains
        the offset or stops before it, :attr:`~airmirror.model.OffsetRun.downstream_stop`), then the first run
        starting after it.
        """
        action = f"look up downstream offset {downstream_offset} of {key} in flow {flow!r}"
        start = offset_syncs.c.downstream_start
        with self._read(action) as connection:
            row = connection.execute(
                runs_of(flow, key).where(start <= downstream_offset).order_by(start.desc()).limit(1)
            ).one_or_none()
            if row is not None and downstream_offset < (containing := offset_run(row)).downstream_stop:
                return containing
            row = connection.execute(
                runs_of(flow, key).where(start > downstream_offset).order_by(start).limit(1)
            ).one_or_none()
        return None if row is None else offset_run(row)

    def gaps(self, flow: str) -> list[Gap]:
        """Every gap recorded for the flow, by partition then offset."""
        with self._read(f"read the gaps of flow {flow!r}") as connection:
            rows = connection.execute(
                select(gaps.c.topic, gaps.c.partition, gaps.c.start_offset, gaps.c.end_offset)
                .where(gaps.c.flow == flow)
                .order_by(gaps.c.topic, gaps.c.partition, gaps.c.start_offset)
            )
            return [Gap(row.topic, row.partition, row.start_offset, row.end_offset) for row in rows]

    def partition_stats(self, flow: str) -> dict[PartitionKey, PartitionStats]:
        """Status of every partition that has a cursor in the flow, from its totals (``airmirror_partition_totals``,
        whole even after retention deleted the batches and gaps they add up): one row per partition."""
        with self._read(f"read the partition stats of flow {flow!r}") as connection:
            cursor_rows = connection.execute(select(cursors).where(cursors.c.flow == flow)).all()
            totals = {
                PartitionKey(row.topic, row.partition): row
                for row in connection.execute(select(partition_totals).where(partition_totals.c.flow == flow))
            }
        stats: dict[PartitionKey, PartitionStats] = {}
        for row in cursor_rows:
            key = PartitionKey(row.topic, row.partition)
            total = totals.get(key)
            stats[key] = PartitionStats(
                cursor=row.next_offset,
                records=0 if total is None else total.records,
                bytes=0 if total is None else total.bytes,
                last_batch_id=row.batch_id,
                last_batch_at=row.updated_at,
                gap_count=0 if total is None else total.gap_count,
                gap_offsets=0 if total is None else total.gap_offsets,
                filtered=0 if total is None else total.filtered,
                skipped=0 if total is None else total.skipped,
            )
        return stats


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


def _insert_running_batch(
    connection: Connection, flow: str, ranges: Sequence[PlannedRange], params: Mapping[str, Any], refusal: str
) -> int:
    """Insert a ``RUNNING`` batch of ``flow`` with its planned ``ranges``; return its id.  The flow's second
    ``RUNNING`` batch breaks a unique index: :class:`ReplicationFailure` with ``refusal`` then."""
    try:
        batch_id = insert_one(
            connection,
            batches,
            {"flow": flow, "state": BatchState.RUNNING, "created_at": utcnow(), "params": dict(params)},
        )
    except IntegrityError as exc:
        raise ReplicationFailure(refusal) from exc
    insert_many(connection, batch_ranges, [_range_row(batch_id, planned) for planned in ranges])
    return batch_id


def _range_row(batch_id: int, planned: PlannedRange) -> dict[str, Any]:
    return {"batch_id": batch_id, **range_columns(planned)}


def _batch_records(connection: Connection, rows: Sequence[Row[Any]]) -> list[BatchRecord]:
    ranges = planned_ranges(connection, [row.id for row in rows]) if rows else {}
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
            jobs=jobs_of(row.copy_tasks, row.log_floor),
        )
        for row in rows
    ]


def _commit_running(connection: Connection, batch_id: int, results: Sequence[RangeResult]) -> None:
    """The body of :meth:`BatchStore.commit_batch`, inside the caller's transaction: every planned range with its
    one result, committed and closed (:func:`~airmirror.store.range_commits.commit_ranges`)."""
    flow = lock_running_batch(connection, batch_id, "committed")
    stored = stored_ranges(connection, batch_id)
    pairs = _pair_results(batch_id, [s.plan for s in stored.values()], results)
    commit_ranges(connection, flow, batch_id, pairs, {key: s.recorded for key, s in stored.items()}, close=True)


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
        validate_runs(key, result)
        matched[key] = result
    missing = sorted(plans.keys() - matched.keys())
    if missing:
        raise ValueError(f"batch {batch_id} has no result for {', '.join(map(str, missing))}")
    return [(plan, matched[plan.key]) for plan in planned]


def partition_runs(flow: str, key: PartitionKey) -> tuple[ColumnElement[bool], ...]:
    """The conditions selecting the offset-sync runs of one partition of ``flow``."""
    return offset_syncs.c.flow == flow, offset_syncs.c.topic == key.topic, offset_syncs.c.partition == key.partition


def runs_of(flow: str, key: PartitionKey) -> Select[Any]:
    """A select of the runs of one partition of ``flow`` (every column :func:`offset_run` reads)."""
    return select(*columns_of(offset_syncs, OffsetRun)).where(*partition_runs(flow, key))


def offset_run(row: Row[Any]) -> OffsetRun:
    """The run, exact or folded, of a row selected by :func:`runs_of`."""
    return from_columns(OffsetRun, row)


def takeover_batch(connection: Connection, flow: str) -> int | None:
    """The id of the flow's first committed batch when it is a takeover from MM2 (its ``takeover`` param is
    ``"mm2"``, see :meth:`BatchStore.record_takeover`), else ``None``."""
    first = connection.execute(
        select(batches.c.id, batches.c.params)
        .where(batches.c.flow == flow, batches.c.state == BatchState.COMMITTED)
        .order_by(batches.c.id)
        .limit(1)
    ).one_or_none()
    return None if first is None or first.params.get("takeover") != "mm2" else int(first.id)
