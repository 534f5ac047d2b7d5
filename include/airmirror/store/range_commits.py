"""Committing copied ranges: the one metadata-DB commit of what a batch's copy committed in Kafka, whether a bounded
batch commits at its end (:meth:`~airmirror.store.batches.BatchStore.commit_batch`) or a stream records as it goes
(:meth:`~airmirror.store.streams.StreamStore.record_stream`).

Rules of :func:`commit_ranges`, each in the caller's one transaction:

1. **Cursors first.**  Every cursor the ranges continue must still be where its range was planned from
   (:attr:`~airmirror.model.PlannedRange.planned_from`); any that moved raises :class:`StaleCursorError` and nothing
   is written.
2. **Then everything a copied range changes, at once**: source resets (:mod:`airmirror.store.incarnation_rows`), the
   cursors (to each range's end, with the leader epoch there), the range's running outcome in
   ``airmirror_batch_ranges`` (what was recorded before plus the result), its offset-sync runs (the first extends the
   partition's stored exact run when it continues it exactly on both sides), its gap and the partitions' totals.
3. **Closing** marks the batch ``COMMITTED`` with its totals summed from its ranges' outcomes in the database.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Connection, Row, Select, func, select, tuple_, update

from airmirror.errors import ReplicationFailure
from airmirror.model import (
    BatchState,
    ContinuesCursor,
    Gap,
    MovesCursor,
    OffsetRun,
    PartitionKey,
    PlannedRange,
    RangeResult,
    RangeStart,
    ResetsCursor,
)
from airmirror.store import incarnation_rows
from airmirror.store.rows import as_columns, insert_many, update_many, upsert, utcnow
from airmirror.store.schema import batch_ranges, batches, cursors, gaps, offset_syncs, partition_totals


class StaleCursorError(ReplicationFailure):
    """A cursor moved after the batch was planned, so its ranges no longer continue the cursors.

    Nothing was written and the batch is still ``RUNNING``: fail it and plan again.
    """


RANGE_COLUMNS = {"start": "start_offset", "end": "end_offset"}
"""How :class:`~airmirror.model.PlannedRange` fields are named as columns of ``airmirror_batch_ranges``."""


def planned_range(row: Row[Any]) -> PlannedRange:
    """The planned range of an ``airmirror_batch_ranges`` row; its ``moved_from``, ``reset_from`` and
    ``truncated_at`` columns hold how it starts (:data:`~airmirror.model.RangeStart`)."""
    begins: RangeStart = ContinuesCursor()
    if row.moved_from is not None:
        begins = MovesCursor(row.moved_from)
    elif row.reset_from is not None:
        begins = ResetsCursor(row.reset_from, row.truncated_at)
    return PlannedRange(
        topic=row.topic,
        partition=row.partition,
        start=row.start_offset,
        end=row.end_offset,
        remote_topic=row.remote_topic,
        gap_start=row.gap_start,
        begins=begins,
        source_topic_id=row.source_topic_id,
        start_epoch=row.start_epoch,
    )


def range_columns(planned: PlannedRange) -> dict[str, Any]:
    """The ``airmirror_batch_ranges`` columns of a planned range, as :func:`planned_range` reads them."""
    begins = planned.begins
    return {
        **as_columns(planned, RANGE_COLUMNS, left_out=("begins",)),
        "moved_from": begins.cursor if isinstance(begins, MovesCursor) else None,
        "reset_from": begins.cursor if isinstance(begins, ResetsCursor) else None,
        "truncated_at": begins.truncated_at if isinstance(begins, ResetsCursor) else None,
    }


def planned_ranges(connection: Connection, batch_ids: Sequence[int]) -> dict[int, list[PlannedRange]]:
    """The planned ranges of each batch, ordered by partition."""
    rows = connection.execute(
        select(batch_ranges)
        .where(batch_ranges.c.batch_id.in_(batch_ids))
        .order_by(batch_ranges.c.batch_id, batch_ranges.c.topic, batch_ranges.c.partition)
    )
    ranges: dict[int, list[PlannedRange]] = {}
    for row in rows:
        ranges.setdefault(row.batch_id, []).append(planned_range(row))
    return ranges


def lock_running_batch(connection: Connection, batch_id: int, outcome: str) -> str:
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


def commit_ranges(
    connection: Connection,
    flow: str,
    batch_id: int,
    pairs: Sequence[tuple[PlannedRange, RangeResult]],
    recorded: Mapping[PartitionKey, RangeResult],
    *,
    close: bool,
) -> None:
    """Commit each range's ``RangeResult`` (what its copy committed in Kafka since the range's ``recorded`` outcome;
    validated by :func:`validate_runs`) against the ``PlannedRange`` it continues, as the module's rules say; with
    ``close``, commit the batch (rule 3).  The caller locked the ``RUNNING`` batch (:func:`lock_running_batch`) and
    read its ranges (:func:`stored_ranges`)."""
    stored = _check_cursors(connection, flow, batch_id, [plan for plan, _ in pairs])
    now = utcnow()
    stored_ids = {key: state.source_topic_id for key, state in incarnation_rows.cursor_states(connection, flow).items()}
    incarnation_rows.commit_resets(connection, flow, batch_id, [plan for plan, _ in pairs], stored_ids, now)
    _advance_cursors(connection, flow, batch_id, pairs, stored, now)
    update_many(
        connection,
        batch_ranges,
        ("batch_id", "topic", "partition"),
        [_outcome(batch_id, plan, recorded[plan.key], result) for plan, result in pairs],
    )
    insert_many(connection, offset_syncs, _new_run_rows(connection, flow, batch_id, pairs))
    found = [gap for plan, _ in pairs if (gap := plan.gap()) is not None]
    insert_many(connection, gaps, [_gap_row(flow, batch_id, gap, now) for gap in found])
    _add_totals(connection, flow, pairs, found)
    if close:
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


class StoredRange(NamedTuple):
    """A range of a batch as the DB holds it: as planned, and what has been recorded of it (runs left out)."""

    plan: PlannedRange
    recorded: RangeResult


def stored_ranges(connection: Connection, batch_id: int) -> dict[PartitionKey, StoredRange]:
    """Every range of batch ``batch_id``, ordered by partition, in one read: before any commit, nothing is
    recorded of ``[start, end)``."""
    rows = connection.execute(
        select(batch_ranges)
        .where(batch_ranges.c.batch_id == batch_id)
        .order_by(batch_ranges.c.topic, batch_ranges.c.partition)
    )
    return {PartitionKey(row.topic, row.partition): StoredRange(planned_range(row), _recorded(row)) for row in rows}


def _recorded(row: Row[Any]) -> RangeResult:
    return RangeResult(
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


def _outcome(batch_id: int, plan: PlannedRange, recorded: RangeResult, result: RangeResult) -> dict[str, Any]:
    """A range's stored outcome once ``result`` is committed on top of what was ``recorded``: it ends at the end of
    ``plan`` (a bounded batch's planned end, a stream's new recorded end)."""
    return {
        "batch_id": batch_id,
        "topic": plan.topic,
        "partition": plan.partition,
        "end_offset": plan.end,
        "records": recorded.records + result.records,
        "bytes": recorded.bytes + result.bytes,
        "downstream_start": recorded.downstream_start
        if recorded.downstream_start is not None
        else result.downstream_start,
        "downstream_end": result.downstream_end if result.records else recorded.downstream_end,
        "end_epoch": result.end_epoch if result.end_epoch is not None else recorded.end_epoch,
        "schema_passed": recorded.schema_passed + result.schema_passed,
        "filtered": recorded.filtered + result.filtered,
        "skipped": recorded.skipped + result.skipped,
    }


def validate_runs(key: PartitionKey, result: RangeResult) -> None:
    """Runs must be non-empty, ordered, non-overlapping and inside the copied range."""
    previous_end = result.start
    for run in result.runs:
        if run.length <= 0 or run.upstream_start < previous_end or run.upstream_end > result.end:
            raise ValueError(
                f"offset run [{run.upstream_start}, {run.upstream_end}) of {key} is empty, out of order or "
                f"outside the copied range [{result.start}, {result.end})"
            )
        previous_end = run.upstream_end


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
        f"{plan.key} is at {stored[plan.key]}, planned from {plan.planned_from}"
        for plan in planned
        if plan.key in stored and stored[plan.key] != plan.planned_from
    ]
    if stale:
        raise StaleCursorError(f"batch {batch_id} of flow {flow!r} is stale, nothing was committed: {'; '.join(stale)}")
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
    update_many(connection, cursors, ("flow", "topic", "partition"), [row for k, row in rows.items() if k in stored])
    insert_many(connection, cursors, [row for k, row in rows.items() if k not in stored])


TOTALS = ("records", "bytes", "gap_count", "gap_offsets", "schema_passed", "filtered", "skipped")


def _add_totals(
    connection: Connection, flow: str, pairs: Sequence[tuple[PlannedRange, RangeResult]], found: Sequence[Gap]
) -> None:
    """Add the committed ranges' records and bytes and the gaps ``found`` to the partitions' totals."""
    added = {
        plan.key: {
            "records": result.records,
            "bytes": result.bytes,
            "gap_count": 0,
            "gap_offsets": 0,
            "schema_passed": result.schema_passed,
            "filtered": result.filtered,
            "skipped": result.skipped,
        }
        for plan, result in pairs
    }
    for gap in found:
        more = added[PartitionKey(gap.topic, gap.partition)]
        more["gap_count"], more["gap_offsets"] = 1, gap.end - gap.start
    if not added:
        return
    stored = {
        PartitionKey(row.topic, row.partition): row._mapping
        for row in connection.execute(select(partition_totals).where(partition_totals.c.flow == flow))
    }
    zero = dict.fromkeys(TOTALS, 0)
    rows = [
        {
            "flow": flow,
            "topic": key.topic,
            "partition": key.partition,
            **{n: stored.get(key, zero)[n] + more[n] for n in TOTALS},
        }
        for key, more in added.items()
    ]
    upsert(connection, partition_totals, rows)


PROBES_PER_QUERY = 500


class _StoredRunStart(NamedTuple):
    """Where a stored exact run starts, on both sides."""

    upstream_start: int
    downstream_start: int


def _new_run_rows(
    connection: Connection, flow: str, batch_id: int, pairs: Sequence[tuple[PlannedRange, RangeResult]]
) -> list[dict[str, Any]]:
    """The rows of the batch's runs still to insert.  Where a range's first run (without holes) continues its
    partition's stored exact run (never a folded one, nor one with holes) that ends where it starts exactly (on
    both sides), that run is extended in place (keeping its ``batch_id``) and the first run is left out.
    Translation is unchanged: every offset of both runs maps as before.  The stored runs are found by the unique
    ``upstream_end`` index in one query per :data:`PROBES_PER_QUERY` partitions, and extended in one statement:
    nothing here is paid per partition."""
    firsts = {plan.key: result.runs[0] for plan, result in pairs if result.runs and not result.runs[0].holes}
    previous: dict[PartitionKey, _StoredRunStart] = {}
    probes = [(key.topic, key.partition, run.upstream_start) for key, run in firsts.items()]
    for begin in range(0, len(probes), PROBES_PER_QUERY):
        rows = connection.execute(
            run_starts(flow).where(
                offset_syncs.c.downstream_end.is_(None),
                offset_syncs.c.holes.is_(None),
                tuple_(offset_syncs.c.topic, offset_syncs.c.partition, offset_syncs.c.upstream_end).in_(
                    probes[begin : begin + PROBES_PER_QUERY]
                ),
            )
        )
        previous.update(
            {
                PartitionKey(row.topic, row.partition): _StoredRunStart(row.upstream_start, row.downstream_start)
                for row in rows
            }
        )
    extended: list[dict[str, Any]] = []
    new_rows: list[dict[str, Any]] = []
    for plan, result in pairs:
        runs = result.runs
        first, stored = firsts.get(plan.key), previous.get(plan.key)
        if (
            first is not None
            and stored is not None
            and stored.downstream_start + first.upstream_start - stored.upstream_start == first.downstream_start
        ):
            extended.append(
                {
                    "flow": flow,
                    "topic": plan.topic,
                    "partition": plan.partition,
                    "upstream_start": stored.upstream_start,
                    "upstream_end": first.upstream_end,
                }
            )
            runs = runs[1:]
        new_rows.extend(run_row(flow, plan.key, batch_id, run) for run in runs)
    update_many(connection, offset_syncs, ("flow", "topic", "partition", "upstream_start"), extended)
    return new_rows


def run_row(flow: str, key: PartitionKey, batch_id: int | None, run: OffsetRun) -> dict[str, Any]:
    """The ``airmirror_offset_syncs`` row of ``run``, a run of partition ``key`` of ``flow``."""
    return {"flow": flow, "topic": key.topic, "partition": key.partition, "batch_id": batch_id, **as_columns(run)}


def run_starts(flow: str) -> Select[Any]:
    """A select of where each offset-sync run of ``flow`` starts on both sides, with its partition: rows of
    ``topic``, ``partition``, ``upstream_start`` and ``downstream_start``, in that order; narrow it with
    ``.where()``."""
    return select(
        offset_syncs.c.topic,
        offset_syncs.c.partition,
        offset_syncs.c.upstream_start,
        offset_syncs.c.downstream_start,
    ).where(offset_syncs.c.flow == flow)


def _gap_row(flow: str, batch_id: int, gap: Gap, now: datetime) -> dict[str, Any]:
    return {"flow": flow, "batch_id": batch_id, "detected_at": now, **as_columns(gap, RANGE_COLUMNS)}
