"""Stream batches: a live run's one RUNNING batch whose ranges grow while it copies
(:mod:`airmirror.replication.streaming`), recorded in the metadata DB as it goes.

Contracts (on top of :mod:`airmirror.store.batches`):

* A stream batch is begun like any batch, with ``params["stream"]`` true and every range empty
  (``[start, start)``).  While it runs, a range's stored ``end`` is where the DB has recorded its copy up to,
  and its ``records``/``bytes``/``downstream_*``/``end_epoch`` describe ``[start, end)``.
* :meth:`StreamStore.record_stream` records what the copy committed in Kafka since the last recording, as one
  non-empty *delta* per moved range (``[recorded end, new end)``, its records, bytes and new offset-sync runs), in ONE
  transaction: cursors, runs, gaps, source resets, the partitions' totals and the ranges' running outcome.  A
  range's first recording (its stored ``end`` still equals ``start``) commits what a batch commit would
  (a gap below it, a moved or reset cursor); later ones continue the cursor from the recorded ``end``, so a
  cursor that moved meanwhile raises :class:`~airmirror.store.batches.StaleCursorError` and nothing is written.
* ``final=True`` also records every range never recorded (so its moved cursor or gap commits) and marks the
  batch ``COMMITTED`` with its totals.  The history holds one batch per stream, however long it ran.
* A delta of a partition stopped meanwhile (its remote topic was recreated or deleted, and the stop retired its
  offset-sync runs: :mod:`airmirror.store.incarnation_rows`) records nothing, in the same transaction that sees the
  stop: no cursor, run or total of it is written after the stop, so nothing is translated through the stopped
  topic again.  :meth:`StreamStore.record_stream` returns such partitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, func, select, update

from airmirror.model import BatchState, PartitionKey, PlannedRange, RangeResult, Stop
from airmirror.store import incarnation_rows
from airmirror.store.batches import (
    _add_totals,
    _advance_cursors,
    _check_cursors,
    _gap_row,
    _lock_running_batch,
    _new_run_rows,
    _ranges_of,
    _validate_runs,
)
from airmirror.store.engine import EngineHolder
from airmirror.store.rows import insert_many, update_many, utcnow
from airmirror.store.schema import batch_ranges, batches, gaps, offset_syncs

STREAM_PARAM = "stream"
"""The batch param that marks a stream batch."""


class StreamStore(EngineHolder):
    """Recording a stream batch as it copies (see the module docstring)."""

    def record_stream(self, batch_id: int, deltas: Sequence[RangeResult], *, final: bool = False) -> set[PartitionKey]:
        """Record ``deltas`` of the RUNNING stream batch ``batch_id`` in one transaction; with ``final``, commit
        the batch.  Returns the partitions of the deltas left out because they are stopped (the module docstring).
        ``ValueError`` for a delta of no range, two of one range, or one that does not start at the range's
        recorded end."""
        with self._write(f"record stream batch {batch_id}") as connection:
            return _record_stream(connection, batch_id, deltas, final)

    def stream_recorded(self, batch_id: int) -> dict[PartitionKey, RangeResult]:
        """What the DB has recorded of each range of stream batch ``batch_id`` so far (runs left out)."""
        with self._read(f"read what stream batch {batch_id} recorded") as connection:
            return _recorded(connection, batch_id)


def _recorded(connection: Connection, batch_id: int) -> dict[PartitionKey, RangeResult]:
    rows = connection.execute(select(batch_ranges).where(batch_ranges.c.batch_id == batch_id))
    return {
        PartitionKey(row.topic, row.partition): RangeResult(
            topic=row.topic,
            partition=row.partition,
            start=row.start_offset,
            end=row.end_offset,
            records=row.records or 0,
            bytes=row.bytes or 0,
            downstream_start=row.downstream_start,
            downstream_end=row.downstream_end,
            end_epoch=row.end_epoch,
            schema_passed=row.schema_passed or 0,
            filtered=row.filtered or 0,
            skipped=row.skipped or 0,
        )
        for row in rows
    }


def _record_stream(
    connection: Connection, batch_id: int, deltas: Sequence[RangeResult], final: bool
) -> set[PartitionKey]:
    """The body of :meth:`StreamStore.record_stream`, inside the caller's transaction."""
    flow = _lock_running_batch(connection, batch_id, "recorded")
    if not connection.execute(select(batches.c.params).where(batches.c.id == batch_id)).scalar_one().get(STREAM_PARAM):
        raise ValueError(f"batch {batch_id} is not a stream batch")
    planned = {plan.key: plan for plan in _ranges_of(connection, [batch_id]).get(batch_id, [])}
    recorded = _recorded(connection, batch_id)
    stops = incarnation_rows.stop_list(connection, flow)
    stopped = {PartitionKey(d.topic, d.partition) for d in deltas if any(_covers(stop, d) for stop in stops)}
    by_key: dict[PartitionKey, RangeResult] = {}
    for delta in deltas:
        key = PartitionKey(delta.topic, delta.partition)
        if key in stopped:
            continue
        if key not in planned:
            raise ValueError(f"stream batch {batch_id} has no range for {key}")
        if key in by_key:
            raise ValueError(f"stream batch {batch_id} got two deltas for {key}")
        if delta.start != planned[key].end or delta.end <= delta.start:
            raise ValueError(
                f"stream batch {batch_id}: delta [{delta.start}, {delta.end}) of {key} is empty or does not "
                f"continue its recorded end {planned[key].end}"
            )
        _validate_runs(key, delta)
        by_key[key] = delta
    if final:
        for key, plan in planned.items():
            if key not in by_key and plan.size == 0:
                by_key[key] = plan.empty_result()
    pairs = [(_slice_plan(planned[key], delta), delta) for key, delta in by_key.items()]
    stored = _check_cursors(connection, flow, batch_id, [plan for plan, _ in pairs])
    now = utcnow()
    stored_ids = {key: state.source_topic_id for key, state in incarnation_rows.cursor_states(connection, flow).items()}
    incarnation_rows.commit_resets(connection, flow, batch_id, [plan for plan, _ in pairs], stored_ids, now)
    _advance_cursors(connection, flow, batch_id, pairs, stored, now)
    update_many(
        connection,
        batch_ranges,
        ("batch_id", "topic", "partition"),
        [_outcome(batch_id, recorded[plan.key], delta) for plan, delta in pairs],
    )
    insert_many(connection, offset_syncs, _new_run_rows(connection, flow, batch_id, pairs))
    found = [gap for plan, _ in pairs if (gap := plan.gap()) is not None]
    insert_many(connection, gaps, [_gap_row(flow, batch_id, gap, now) for gap in found])
    _add_totals(connection, flow, pairs, found)
    if final:
        records, size = connection.execute(
            select(
                func.coalesce(func.sum(batch_ranges.c.records), 0), func.coalesce(func.sum(batch_ranges.c.bytes), 0)
            ).where(batch_ranges.c.batch_id == batch_id)
        ).one()
        connection.execute(
            update(batches)
            .where(batches.c.id == batch_id)
            .values(state=BatchState.COMMITTED, finished_at=now, records=records, bytes=size)
        )
    return stopped


def _covers(stop: Stop, delta: RangeResult) -> bool:
    """Whether ``stop`` stops the partition of ``delta``."""
    return stop.topic == delta.topic and stop.partition in (None, delta.partition)


def _slice_plan(plan: PlannedRange, delta: RangeResult) -> PlannedRange:
    """The range a delta commits: at its first recording, the planned range with what it commits besides
    (gap, moved or reset cursor); later, the plain continuation of the recorded end."""
    if plan.end == plan.start:
        return replace(plan, end=delta.end)
    return replace(
        plan, start=plan.end, end=delta.end, gap_start=None, moved_from=None, reset_from=None, truncated_at=None
    )


def _outcome(batch_id: int, recorded: RangeResult, delta: RangeResult) -> dict[str, Any]:
    """A range's stored outcome after ``delta``: it covers ``[start, delta.end)``."""
    return {
        "batch_id": batch_id,
        "topic": delta.topic,
        "partition": delta.partition,
        "end_offset": delta.end,
        "records": recorded.records + delta.records,
        "bytes": recorded.bytes + delta.bytes,
        "downstream_start": recorded.downstream_start
        if recorded.downstream_start is not None
        else delta.downstream_start,
        "downstream_end": delta.downstream_end if delta.records else recorded.downstream_end,
        "end_epoch": delta.end_epoch if delta.end_epoch is not None else recorded.end_epoch,
        "schema_passed": recorded.schema_passed + delta.schema_passed,
        "filtered": recorded.filtered + delta.filtered,
        "skipped": recorded.skipped + delta.skipped,
    }
