"""Stream batches: a live run's one RUNNING batch whose ranges grow while it copies
(:mod:`airmirror.replication.streaming`), recorded in the metadata DB as it goes.

Contracts (on top of :mod:`airmirror.store.batches`):

* Each recording is committed by :func:`~airmirror.store.range_commits.commit_ranges`, as a bounded batch's
  commit is: what differs is only which ranges and which part of each a recording commits.
* A stream batch is begun like any batch, with ``params["stream"]`` true and every range empty
  (``[start, start)``).  While it runs, a range's stored ``end`` is where the DB has recorded its copy up to,
  and its ``records``/``bytes``/``downstream_*``/``end_epoch`` describe ``[start, end)``.
* :meth:`StreamStore.record_stream` records what the copy committed in Kafka since the last recording, as one
  non-empty *delta* per moved range (``[recorded end, new end)``, its records, bytes and new offset-sync runs), in ONE
  transaction: cursors, runs, gaps, source resets, the partitions' totals and the ranges' running outcome.  A
  range's first recording (its stored ``end`` still equals ``start``) commits what a batch commit would
  (a gap below it, a moved or reset cursor); later ones continue the cursor from the recorded ``end``, so a
  cursor that moved meanwhile raises :class:`~airmirror.store.range_commits.StaleCursorError` and nothing is written.
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

from sqlalchemy import Connection, select

from airmirror.model import ContinuesCursor, PartitionKey, PlannedRange, RangeResult, Stop
from airmirror.store import incarnation_rows
from airmirror.store.engine import EngineHolder
from airmirror.store.range_commits import (
    commit_ranges,
    lock_running_batch,
    stored_ranges,
    validate_runs,
)
from airmirror.store.schema import batches

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
            return {key: s.recorded for key, s in stored_ranges(connection, batch_id).items()}


def _record_stream(
    connection: Connection, batch_id: int, deltas: Sequence[RangeResult], final: bool
) -> set[PartitionKey]:
    """The body of :meth:`StreamStore.record_stream`, inside the caller's transaction."""
    flow = lock_running_batch(connection, batch_id, "recorded")
    if not connection.execute(select(batches.c.params).where(batches.c.id == batch_id)).scalar_one().get(STREAM_PARAM):
        raise ValueError(f"batch {batch_id} is not a stream batch")
    stored = stored_ranges(connection, batch_id)
    planned = {key: s.plan for key, s in stored.items()}
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
        validate_runs(key, delta)
        by_key[key] = delta
    if final:
        for key, plan in planned.items():
            if key not in by_key and plan.size == 0:
                by_key[key] = plan.empty_result()
    pairs = [(_slice_plan(planned[key], delta), delta) for key, delta in by_key.items()]
    commit_ranges(connection, flow, batch_id, pairs, {key: s.recorded for key, s in stored.items()}, close=final)
    return stopped


def _covers(stop: Stop, delta: RangeResult) -> bool:
    """Whether ``stop`` stops the partition of ``delta``."""
    return stop.topic == delta.topic and stop.partition in (None, delta.partition)


def _slice_plan(plan: PlannedRange, delta: RangeResult) -> PlannedRange:
    """The range a delta commits: at its first recording, the planned range with what it commits besides
    (gap, moved or reset cursor); later, the plain continuation of the recorded end."""
    if plan.end == plan.start:
        return replace(plan, end=delta.end)
    return replace(plan, start=plan.end, end=delta.end, gap_start=None, begins=ContinuesCursor())
