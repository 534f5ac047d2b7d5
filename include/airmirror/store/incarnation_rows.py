"""SQL side of topic incarnations (see :mod:`airmirror.replication.incarnations` for the rules): cursor incarnations,
remote topic ids, stops, source resets, and what a reset or a retired remote topic removes.

Contracts:

* A cursor row carries the source topic id it was taken on (``None`` for cursors from before ids were kept).
* :func:`commit_resets` runs inside a batch commit: for every range that reset its source cursor it deletes the
  partition's offset-sync runs and checkpoints (the new runs of the same commit are the new generation),
  records a :class:`SourceReset`, and clears the partition's stop.  After a truncation whose divergence point
  leader epochs gave (``truncated_at``), only the runs and checkpoints at or above that offset go: below it
  the source log is the one that was copied.  A run across the divergence point is cut there (a folded run
  keeps at-or-before translation, see :func:`~airmirror.store.folding.cut`).
* :func:`stop_remote_topic` stops a source topic whose remote topic changed and deletes its offset-sync runs
  and checkpoints in the same transaction, so nothing is ever translated through them again.
* :func:`reset_topic` (``airmirror reset``) deletes, in one transaction, the topic's cursors, offset-sync
  runs, checkpoints, stops and recorded remote topic id, and drops its ranges from the flow's unfinished
  batch: the next run copies the topic from its start as if it were new.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from sqlalchemy import Connection, delete, select

from airmirror.model import (
    BatchState,
    CursorState,
    OffsetRun,
    PartitionKey,
    PlannedRange,
    ResetsCursor,
    SourceReset,
    Stop,
)
from airmirror.store.folding import cut
from airmirror.store.rows import columns_of, from_columns
from airmirror.store.schema import (
    WHOLE_TOPIC,
    batch_ranges,
    batches,
    checkpoints,
    cursors,
    offset_syncs,
    remote_topics,
    source_resets,
    stops,
)


def cursor_states(connection: Connection, flow: str) -> dict[PartitionKey, CursorState]:
    rows = connection.execute(
        select(
            cursors.c.topic,
            cursors.c.partition,
            cursors.c.next_offset,
            cursors.c.source_topic_id,
            cursors.c.leader_epoch,
        ).where(cursors.c.flow == flow)
    )
    return {
        PartitionKey(row.topic, row.partition): CursorState(row.next_offset, row.source_topic_id, row.leader_epoch)
        for row in rows
    }


def remote_topic_ids(connection: Connection, flow: str) -> dict[str, str]:
    rows = connection.execute(
        select(remote_topics.c.topic, remote_topics.c.topic_id).where(remote_topics.c.flow == flow)
    )
    return {row.topic: row.topic_id for row in rows}


def remote_topic_sources(connection: Connection, flow: str) -> dict[str, str | None]:
    rows = connection.execute(
        select(remote_topics.c.topic, remote_topics.c.source_topic).where(remote_topics.c.flow == flow)
    )
    return {row.topic: row.source_topic for row in rows}


def record_remote_topic_ids(
    connection: Connection, flow: str, ids: Mapping[str, str], sources: Mapping[str, str], now: datetime
) -> None:
    known = remote_topic_ids(connection, flow)
    rows = [
        {"flow": flow, "topic": topic, "topic_id": topic_id, "recorded_at": now, "source_topic": sources.get(topic)}
        for topic, topic_id in ids.items()
        if topic not in known
    ]
    if rows:
        connection.execute(remote_topics.insert(), rows)


def stop_list(connection: Connection, flow: str) -> list[Stop]:
    rows = connection.execute(select(stops).where(stops.c.flow == flow).order_by(stops.c.topic, stops.c.partition))
    return [
        Stop(row.topic, None if row.partition == WHOLE_TOPIC else row.partition, row.reason, row.stopped_at)
        for row in rows
    ]


def add_stop(connection: Connection, flow: str, topic: str, partition: int | None, reason: str, now: datetime) -> None:
    number = WHOLE_TOPIC if partition is None else partition
    connection.execute(delete(stops).where(stops.c.flow == flow, stops.c.topic == topic, stops.c.partition == number))
    connection.execute(stops.insert().values(flow=flow, topic=topic, partition=number, reason=reason, stopped_at=now))


def retire_translation(connection: Connection, flow: str, topic: str, partitions: Iterable[int] | None = None) -> None:
    """Delete the offset-sync runs and checkpoints of a topic (of some of its partitions, when given)."""
    for table in (offset_syncs, checkpoints):
        condition = [table.c.flow == flow, table.c.topic == topic]
        if partitions is not None:
            condition.append(table.c.partition.in_(list(partitions)))
        connection.execute(delete(table).where(*condition))


def retire_translation_from(connection: Connection, flow: str, key: PartitionKey, offset: int) -> None:
    """Delete a partition's offset-sync runs and checkpoints from source ``offset`` on, cutting the run that
    spans it (a folded run stays folded, with the bounds :func:`~airmirror.store.folding.cut` gives)."""
    where = [offset_syncs.c.flow == flow, offset_syncs.c.topic == key.topic, offset_syncs.c.partition == key.partition]
    connection.execute(delete(offset_syncs).where(*where, offset_syncs.c.upstream_start >= offset))
    spanning = connection.execute(
        select(*columns_of(offset_syncs, OffsetRun)).where(*where, offset_syncs.c.upstream_end > offset)
    ).one_or_none()
    if spanning is not None:
        kept = cut(from_columns(OffsetRun, spanning), offset)
        connection.execute(
            offset_syncs.update()
            .where(*where, offset_syncs.c.upstream_start == kept.upstream_start)
            .values(upstream_end=kept.upstream_end, records=kept.records, holes=kept.holes)
        )
    connection.execute(
        delete(checkpoints).where(
            checkpoints.c.flow == flow,
            checkpoints.c.topic == key.topic,
            checkpoints.c.partition == key.partition,
            checkpoints.c.upstream_offset > offset,
        )
    )


def stop_remote_topic(
    connection: Connection, flow: str, topic: str, remote_topic: str, reason: str, now: datetime
) -> None:
    retire_translation(connection, flow, topic)
    add_stop(connection, flow, topic, None, reason, now)


def commit_resets(
    connection: Connection,
    flow: str,
    batch_id: int,
    planned: Sequence[PlannedRange],
    stored: Mapping[PartitionKey, str | None],
    now: datetime,
) -> None:
    """Inside a batch commit, before its new runs are stored: the reset rules of the module docstring."""
    for plan in planned:
        if not isinstance(reset := plan.begins, ResetsCursor):
            continue
        if reset.truncated_at is None:
            retire_translation(connection, flow, plan.topic, [plan.partition])
        else:
            retire_translation_from(connection, flow, PartitionKey(plan.topic, plan.partition), reset.truncated_at)
        connection.execute(
            delete(stops).where(stops.c.flow == flow, stops.c.topic == plan.topic, stops.c.partition == plan.partition)
        )
        connection.execute(
            source_resets.insert().values(
                flow=flow,
                topic=plan.topic,
                partition=plan.partition,
                batch_id=batch_id,
                old_topic_id=stored.get(plan.key),
                new_topic_id=plan.source_topic_id,
                old_cursor=reset.cursor,
                new_start=plan.start,
                reset_at=now,
            )
        )


def source_reset_list(connection: Connection, flow: str) -> list[SourceReset]:
    rows = connection.execute(select(source_resets).where(source_resets.c.flow == flow).order_by(source_resets.c.id))
    return [
        SourceReset(
            row.topic,
            row.partition,
            row.batch_id,
            row.old_topic_id,
            row.new_topic_id,
            row.old_cursor,
            row.new_start,
            row.reset_at,
        )
        for row in rows
    ]


def drop_ranges(connection: Connection, batch_id: int, keys: Iterable[PartitionKey]) -> None:
    for key in keys:
        connection.execute(
            delete(batch_ranges).where(
                batch_ranges.c.batch_id == batch_id,
                batch_ranges.c.topic == key.topic,
                batch_ranges.c.partition == key.partition,
            )
        )


def reset_topic(connection: Connection, flow: str, topic: str, remote_topic: str) -> list[PartitionKey]:
    """The reset of the module docstring; returns the partitions whose cursors were removed."""
    running = (
        connection.execute(select(batches.c.id).where(batches.c.flow == flow, batches.c.state == BatchState.RUNNING))
        .scalars()
        .all()
    )
    for batch_id in running:
        connection.execute(
            delete(batch_ranges).where(batch_ranges.c.batch_id == batch_id, batch_ranges.c.topic == topic)
        )
    removed = [
        PartitionKey(row.topic, row.partition)
        for row in connection.execute(
            select(cursors.c.topic, cursors.c.partition).where(cursors.c.flow == flow, cursors.c.topic == topic)
        )
    ]
    connection.execute(delete(cursors).where(cursors.c.flow == flow, cursors.c.topic == topic))
    retire_translation(connection, flow, topic)
    connection.execute(delete(stops).where(stops.c.flow == flow, stops.c.topic == topic))
    connection.execute(delete(remote_topics).where(remote_topics.c.flow == flow, remote_topics.c.topic == remote_topic))
    return removed
