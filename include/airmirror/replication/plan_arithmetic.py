"""Planning arithmetic: from a stored cursor and the broker's offsets to one bounded range per partition.

Pure functions, no I/O.  Offsets follow Kafka's convention (``[start, end)``, a cursor is the next offset
to copy).  For each source partition:

- ``start`` is the stored cursor; a partition never seen starts at the log start offset
  (``auto.offset.reset=earliest``, MM2's default) or at the end (``latest``).
- A cursor below the log start offset means retention deleted ``[cursor, log_start)`` before it was
  copied: the range starts at the log start and carries ``gap_start`` so the gap is recorded, once.
- A requested start (``start_from``: earliest, latest or a timestamp) replaces the cursor; when it moves an
  existing cursor the range carries ``moved_from`` (the caller must have the user's ``reset_cursor``).
- **Source incarnations.**  A cursor remembers the source topic id it was taken on.  When the topic now
  has another id (deleted and recreated) or the cursor is above the log end (a recreated topic whose id is
  unknown, or a log truncated by an unclean leader election), the stored offsets mean nothing any more:
  like MM2's consumer under ``auto.offset.reset``, the range starts at the log start (``earliest``) or end
  (``latest``).  The range carries ``reset_from`` (the abandoned cursor) and :func:`source_reset` names the
  case, so the caller can apply ``airmirror.source.reset.policy`` and record it.
- **Truncation, with leader epochs.**  A cursor also remembers the leader epoch of the last record copied.
  When the partition's leader epoch has changed since, the caller validates the cursor against the leader
  (KIP-320's offset-for-leader-epoch, :func:`airmirror.kafka.offsets.divergence_points`): ``diverged_at``
  below the cursor means the new leader's log diverged there from what was copied.  The range then starts
  exactly at ``diverged_at`` (``truncated_at``), whether or not the leader has written past the old cursor
  since, so no record of the new lineage is skipped and none below the divergence is copied twice.  Without
  an epoch (cursors from before epochs were kept) only a cursor above the log end is seen, as above.
- ``end`` is the last stable offset (the read_committed end: open transactions are never crossed), lowered
  to the ``--until`` offset (the first offset whose timestamp is at or after the until time) and capped at
  ``start + max_records``.  It never goes below ``start``.
"""

from __future__ import annotations

from airmirror.model import ContinuesCursor, MovesCursor, PartitionOffsets, PlannedRange, RangeStart, ResetsCursor

RECREATED = "recreated"
TRUNCATED = "truncated"


def source_reset(
    cursor: int | None, stored_topic_id: str | None, offsets: PartitionOffsets, diverged_at: int | None = None
) -> str | None:
    """Why a stored cursor no longer applies to the partition (:data:`RECREATED`, :data:`TRUNCATED`), or
    ``None`` when it still does (see the module docstring)."""
    if cursor is None:
        return None
    if stored_topic_id is not None and offsets.topic_id is not None and stored_topic_id != offsets.topic_id:
        return RECREATED
    if diverged_at is not None and diverged_at < cursor:
        return TRUNCATED
    if cursor > offsets.stable_end:
        return TRUNCATED if stored_topic_id is not None and stored_topic_id == offsets.topic_id else RECREATED
    return None


def needs_validation(cursor: int | None, stored_epoch: int | None, offsets: PartitionOffsets) -> bool:
    """Whether a cursor must be validated against the leader before planning from it: its epoch is known,
    the leader's epoch has changed since, and records below the cursor still exist."""
    return (
        cursor is not None
        and stored_epoch is not None
        and offsets.leader_epoch is not None
        and stored_epoch != offsets.leader_epoch
        and offsets.log_start < cursor
    )


def requested_start(start_from: str, offsets: PartitionOffsets) -> int | None:
    """Where ``start_from`` asks a partition to start: None for ``stored`` (keep the cursor)."""
    if start_from == "stored":
        return None
    if start_from == "earliest":
        return offsets.log_start
    if start_from == "latest":
        return offsets.stable_end
    if start_from == "timestamp":
        return offsets.start_offset
    raise ValueError(f"unknown start_from {start_from!r}")


def moved_from(cursor: int | None, start_at: int | None) -> int | None:
    """The cursor a requested start moves (``None`` when nothing is requested, there is no cursor, or the
    requested start is the cursor itself)."""
    return cursor if start_at is not None and cursor is not None and cursor != start_at else None


def plan_range(
    topic: str,
    partition: int,
    remote_topic: str,
    cursor: int | None,
    offsets: PartitionOffsets,
    *,
    auto_offset_reset: str = "earliest",
    max_records: int | None = None,
    start_at: int | None = None,
    stored_topic_id: str | None = None,
    stored_epoch: int | None = None,
    diverged_at: int | None = None,
) -> PlannedRange:
    """Plan one partition's range (see the module docstring for the rules)."""
    gap_start: int | None = None
    begins: RangeStart = ContinuesCursor()
    reset = source_reset(cursor, stored_topic_id, offsets, diverged_at)
    if start_at is not None:
        start = start_at
        if (moved := moved_from(cursor, start_at)) is not None:
            begins = MovesCursor(moved)
    elif reset == TRUNCATED and diverged_at is not None and cursor is not None:
        start, begins = max(diverged_at, offsets.log_start), ResetsCursor(cursor, truncated_at=diverged_at)
    elif cursor is None or reset is not None:
        start = offsets.log_start if auto_offset_reset == "earliest" else offsets.stable_end
        if cursor is not None:
            begins = ResetsCursor(cursor)
    elif cursor < offsets.log_start:
        start, gap_start = offsets.log_start, cursor
    else:
        start = cursor
    end = offsets.stable_end
    if offsets.until_offset is not None:
        end = min(end, offsets.until_offset)
    if max_records is not None:
        end = min(end, start + max_records)
    return PlannedRange(
        topic=topic,
        partition=partition,
        start=start,
        end=max(start, end),
        remote_topic=remote_topic,
        gap_start=gap_start,
        begins=begins,
        source_topic_id=offsets.topic_id,
        start_epoch=stored_epoch if start == cursor and reset is None else None,
    )


def needs_work(planned: PlannedRange, cursor: int | None) -> bool:
    """A range belongs in a batch when it copies records, records a gap, or sets, moves or resets a cursor."""
    return planned.size > 0 or planned.gap() is not None or cursor is None or planned.begins != ContinuesCursor()
