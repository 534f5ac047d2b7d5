"""What ``airmirror verify`` may compare of one partition, and what it must not call equal.  Pure logic: the
caller (:mod:`airmirror.migration.verification`) brings what the clusters and the store say.

Contract:
- A partition with a cursor is compared only when its source topic and remote topic are the incarnations the
  flow copied between, and it is not stopped.  Otherwise it gets a verdict of its own (:func:`uncomparable`),
  checked in this order: ``stopped``, ``source_deleted``, ``source_recreated``, ``target_deleted``,
  ``target_recreated``; then ``no_runs`` when the source holds records below the cursor that no offset-sync run
  maps (the cursor was moved by ``--start-from``, a reset or a takeover without MM2 offset syncs): nothing
  proves they reached the target, unless the flow's transforms may drop the topic's records (``may_drop``: all
  of them may have been dropped), and then the partition is compared from its source log start, where a kept
  record no run maps is missing.  None of these verdicts is ``equal``.
- The compared source range starts at the first copied offset, the remote range at its copy (:func:`compared_bounds`);
  records a flow's transforms dropped before it are not compared.  Records deleted from the start of a side are left out
  only when retention explains them: the other side deleted them too, or the side's ``cleanup.policy`` deletes and its
  ``retention.ms`` is shorter than their age (every deleted record is older than the other side's first record younger
  than ``now - retention.ms``: ``horizon``).  Otherwise they stay in the comparison as a
  :class:`~airmirror.migration.partition_compare.Lost` range, **missing** unless the side's ``retention.bytes`` explains
  them once it has been read.
- Through a folded offset-sync run, where a copy lies is known only at or before it: a side's read starts
  there, and order pairing (:mod:`~airmirror.migration.folded_alignment`) finds the rest.  Where retention
  explains the records deleted from one side but a compared start falls inside a folded run, both sides start
  at that run's end instead and the note says so (reading from an estimate there would call the other side's
  extra records differences).  Where the target lost, without such an explanation, copies up to inside a folded
  run, the :class:`~airmirror.migration.partition_compare.Lost` range reaches that run's end: what the
  target lacks of it is lost, what it holds is compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from airmirror.migration.partition_compare import Lost
from airmirror.model import CursorState, OffsetRun, PartitionOffsets, Stop, Verdict


@dataclass(frozen=True)
class Retention:
    """A topic's deletion settings on one side: ``ms`` and ``bytes`` are ``-1`` when unlimited or when its
    ``cleanup.policy`` does not delete."""

    ms: int
    bytes: int

    @classmethod
    def of(cls, cleanup_policy: str, retention_ms: str | None, retention_bytes: str | None) -> Retention:
        if "delete" not in cleanup_policy:
            return cls(-1, -1)
        return cls(int(retention_ms or -1), int(retention_bytes or -1))


@dataclass(frozen=True)
class Topics:
    """What a partition's two topics are now and were when copied: the ids of the source and remote topic now
    (``None``: deleted), their partition counts, the source id the cursor was taken on and the remote id the
    flow recorded when it first wrote there."""

    source_id: str | None
    source_partitions: int
    target_id: str | None
    target_partitions: int
    cursor_source_id: str | None
    recorded_target_id: str | None


def uncomparable(partition: int, topics: Topics, stop: Stop | None, remote_topic: str) -> tuple[Verdict, str] | None:
    """The verdict and reason of a partition that cannot be compared for a reason of its topics (see the
    module contract), or ``None`` when its records can be read on both sides."""
    if stop is not None:
        return Verdict.STOPPED, f"replication stopped at {stop.stopped_at.isoformat(timespec='seconds')}: {stop.reason}"
    if topics.source_id is None:
        return Verdict.SOURCE_DELETED, "the source topic no longer exists: its copies cannot be compared"
    if partition >= topics.source_partitions:
        return Verdict.SOURCE_DELETED, "the source partition no longer exists: its copies cannot be compared"
    if topics.cursor_source_id is not None and topics.cursor_source_id != topics.source_id:
        return (
            Verdict.SOURCE_RECREATED,
            f"the source topic was recreated (topic id {topics.source_id}; the cursor belongs to "
            f"{topics.cursor_source_id}): its records are not the ones that were copied",
        )
    if topics.target_id is None or partition >= topics.target_partitions:
        return (
            Verdict.TARGET_DELETED,
            f"remote topic {remote_topic} (partition {partition}) does not exist on the target",
        )
    if topics.recorded_target_id is not None and topics.recorded_target_id != topics.target_id:
        return (
            Verdict.TARGET_RECREATED,
            f"remote topic {remote_topic} was recreated (topic id {topics.target_id}; the flow wrote to "
            f"{topics.recorded_target_id}): the copies are gone",
        )
    return None


def unmapped_below_cursor(
    runs: Sequence[OffsetRun], cursor: CursorState, source: PartitionOffsets, may_drop: bool = False
) -> str | None:
    """Why a partition without offset-sync runs cannot be proven (``no_runs``), or ``None`` when the source
    holds no record below its cursor (nothing was there to copy) or ``may_drop`` (see the module contract), so that
    comparing is a proof."""
    if runs or cursor.next_offset <= source.log_start or may_drop:
        return None
    return (
        f"source offsets {source.log_start} to {cursor.next_offset - 1} lie below the cursor but no offset-sync run "
        "maps them (the cursor was moved by --start-from, a reset or a takeover without MM2 offset syncs): nothing "
        "proves they reached the target"
    )


@dataclass(frozen=True)
class Bounds:
    """Where the comparison of a partition starts on each side, what retention explains (``note``) and what
    was deleted from one side only without an explanation by age (``lost``)."""

    source_start: int
    target_start: int
    note: str = ""
    lost: Lost | None = None


@dataclass(frozen=True)
class Horizons:
    """Per side, the first offset younger than the *other* side's ``retention.ms`` (``None``: unlimited): every
    record below it is old enough for the other side's retention to have deleted its counterpart."""

    source: int | None
    target: int | None


def compared_bounds(
    runs: Sequence[OffsetRun],
    cursor: int,
    source: PartitionOffsets,
    target: PartitionOffsets,
    retention: tuple[Retention, Retention],
    horizons: Horizons,
    may_drop: bool = False,
) -> Bounds:
    """The compared ranges' starts (see the module contract); ``retention`` is (source's, target's)."""
    if not runs:
        return Bounds(source.log_start if may_drop else cursor, target.log_start)
    first = runs[0].upstream_start
    on_source = max(first, source.log_start)  # the first copied offset the source still holds
    on_target = first_source_copied_at_or_after(runs, target.log_start)  # ... whose copy the target still holds
    on_target = cursor if on_target is None else max(first, on_target)
    both_dropped = min(on_source, on_target)
    notes = (
        [f"offsets {first} to {both_dropped - 1} deleted on both sides by retention, not compared"]
        if both_dropped > first
        else []
    )
    if on_source > on_target:  # the source lost records whose copies the target holds
        last_copy = last_copy_below(runs, on_source)
        target_start = max(target.log_start, first_copy_at_or_after(runs, on_target, target.stable_end))
        if horizons.target is not None and last_copy is not None and last_copy < horizons.target:
            notes.append(
                f"source offsets {on_target} to {on_source - 1} deleted by the source's retention.ms, not compared"
            )
            return _from(runs, on_source, target, notes)
        return Bounds(
            on_source, target_start, "; ".join(notes), Lost("source", on_target, on_source, retention[0].bytes)
        )
    if on_target > on_source:  # the target lost copies of records the source holds
        if horizons.source is not None and on_target - 1 < horizons.source:
            notes.append(
                f"copies of source offsets {on_source} to {on_target - 1} deleted by the target's retention.ms, "
                "not compared"
            )
            if _folded_around(runs, on_target) is None:
                return Bounds(on_target, target.log_start, "; ".join(notes))
            return _from(runs, on_target, target, notes)
        inside = _folded_around(runs, on_target)  # which of its records the target still holds, order pairing finds
        lost_end = on_target if inside is None else inside.upstream_end
        return Bounds(
            on_source, target.log_start, "; ".join(notes), Lost("target", on_source, lost_end, retention[1].bytes)
        )
    return _from(runs, on_source, target, notes)


def _from(runs: Sequence[OffsetRun], source_start: int, target: PartitionOffsets, notes: list[str]) -> Bounds:
    """Bounds starting at ``source_start`` on the source and at its copy on the target, with nothing lost; past
    the folded run around ``source_start``, where the copy of a record inside a folded run is not known."""
    inside = _folded_around(runs, source_start)
    if inside is not None:
        notes.append(
            f"source offsets {source_start} to {inside.upstream_end - 1} lie inside a folded offset-sync run that no "
            "longer says where their copies begin, not compared"
        )
        source_start = inside.upstream_end
    return Bounds(
        source_start,
        max(target.log_start, first_copy_at_or_after(runs, source_start, target.stable_end)),
        "; ".join(notes),
    )


def _folded_around(runs: Sequence[OffsetRun], source_offset: int) -> OffsetRun | None:
    """The folded run holding ``source_offset`` past its first offset, if any."""
    return next((run for run in runs if not run.exact and run.upstream_start < source_offset < run.upstream_end), None)


def first_source_copied_at_or_after(runs: Sequence[OffsetRun], target_offset: int) -> int | None:
    """The first source offset whose copy is at or after ``target_offset`` (at or before it inside a folded run:
    :meth:`~airmirror.model.OffsetRun.upstream_at_most`); ``None`` when no copy is."""
    for run in runs:
        if run.downstream_stop > target_offset:
            return run.upstream_at_most(max(run.downstream_start, target_offset))
    return None


def first_copy_at_or_after(runs: Sequence[OffsetRun], source_offset: int, otherwise: int) -> int:
    """The target offset of the first copy of a source offset at or after ``source_offset`` (at or before it
    inside a folded run: :meth:`~airmirror.model.OffsetRun.downstream_at_most`; ``otherwise`` when none is
    copied)."""
    for run in runs:
        if run.upstream_end > source_offset:
            return run.downstream_at_most(max(run.upstream_start, source_offset))
    return otherwise


def last_copy_below(runs: Sequence[OffsetRun], source_offset: int) -> int | None:
    """The target offset of the copy of the last copied source offset below ``source_offset``, or one after it
    inside a folded run (never before it); ``None`` when no offset below is copied."""
    below = [run for run in runs if run.upstream_start < source_offset]
    if not below:
        return None
    run = max(below, key=lambda r: r.upstream_start)
    last = min(run.upstream_end, source_offset) - 1
    if run.exact:
        return run.downstream_start + run.copies_below(last + 1) - 1
    return min(
        run.downstream_stop - 1, run.downstream_start + last - run.upstream_start + run.downstream_length - run.copies
    )
