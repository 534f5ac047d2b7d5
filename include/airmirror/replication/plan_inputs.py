"""Step 2's reading: the source's offsets and the stored cursors, through the planner's rules, to one range
per partition.  The same reading serves ``status``, so status shows where the next run would start.

- :func:`plan_partitions` reads, for every partition of the mappings, the broker's offsets (log start, last
  stable offset, ``until``/``start_from`` offsets, leader epoch, topic id) and the stored cursor, validates
  cursors whose leader epoch changed (:func:`~airmirror.replication.incarnations.diverged_cursors`) and plans
  each partition with :func:`airmirror.replication.plan_arithmetic.plan_range`.  Read-only.
- :func:`plan_ranges` keeps the ranges that need work, refuses a ``start_from`` that moves existing cursors
  without ``reset_cursor`` (:class:`~airmirror.errors.InputError`) and applies ``airmirror.source.reset.policy``.
- :func:`refuse_moving_cursors` is that ``start_from`` check alone, for step 1 to run before anything changes;
  it reads only the partitions that have a cursor, through the same ``requested_start`` rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from airmirror.config import FlowConfig
from airmirror.errors import InputError
from airmirror.kafka.clients import source_admin
from airmirror.kafka.offsets import partition_offsets
from airmirror.kafka.topics import TopicMapping, topic_ids
from airmirror.model import CursorState, PartitionKey, PartitionOffsets, PlannedRange
from airmirror.replication.incarnations import diverged_cursors, refuse_source_resets
from airmirror.replication.options import BatchOptions
from airmirror.replication.plan_arithmetic import moved_from, needs_work, plan_range, requested_start, source_reset
from airmirror.store import MetadataStore


@dataclass(frozen=True)
class PartitionPlan:
    """One partition as planning sees it: the broker's offsets, the stored cursor (``None`` for a partition
    never copied), where its log diverged below the cursor (if it did) and the planned range."""

    key: PartitionKey
    offsets: PartitionOffsets
    stored: CursorState | None
    diverged_at: int | None
    planned: PlannedRange

    @property
    def cursor(self) -> int | None:
        return None if self.stored is None else self.stored.next_offset

    @property
    def source_reset(self) -> str | None:
        """Why the stored cursor no longer applies (:func:`airmirror.replication.plan_arithmetic.source_reset`)."""
        stored_id = None if self.stored is None else self.stored.source_topic_id
        return source_reset(self.cursor, stored_id, self.offsets, self.diverged_at)


def record_cap(flow: FlowConfig, options: BatchOptions) -> int | None:
    """Records per partition a batch may copy: ``--max-records``, else the flow's cap, else none."""
    return options.max_records if options.max_records is not None else flow.copy.max_records_per_partition


def plan_partitions(
    flow: FlowConfig, store: MetadataStore, mappings: Sequence[TopicMapping], options: BatchOptions | None = None
) -> list[PartitionPlan]:
    """Every partition of ``mappings`` planned per ``options`` (none: from the stored cursors, to the last
    stable offset, capped only by the flow's ``airmirror.batch.max.records.per.partition``).  Read-only."""
    options = options or BatchOptions()
    remote = {m.source_topic: m.remote_topic for m in mappings}
    keys = [PartitionKey(m.source_topic, p) for m in mappings for p in range(m.partitions)]
    source = source_admin(flow)
    ids = topic_ids(source, remote)
    listed = partition_offsets(source, keys, options.until_ms, options.start_ms)
    offsets = {key: replace(o, topic_id=ids[key.topic]) for key, o in listed.items()}
    cursors = store.cursor_states(flow.name)
    diverged = diverged_cursors(flow, cursors, offsets)
    cap = record_cap(flow, options)
    plans = []
    for key in keys:
        stored = cursors.get(key)
        planned = plan_range(
            key.topic,
            key.partition,
            remote[key.topic],
            None if stored is None else stored.next_offset,
            offsets[key],
            auto_offset_reset=flow.auto_offset_reset,
            max_records=cap,
            start_at=requested_start(options.start_from, offsets[key]),
            stored_topic_id=None if stored is None else stored.source_topic_id,
            stored_epoch=None if stored is None else stored.leader_epoch,
            diverged_at=diverged.get(key),
        )
        plans.append(PartitionPlan(key, offsets[key], stored, diverged.get(key), planned))
    return plans


def plan_ranges(
    flow: FlowConfig,
    store: MetadataStore,
    mappings: Sequence[TopicMapping],
    options: BatchOptions,
    *,
    every_partition: bool = False,
) -> list[PlannedRange]:
    """One range per partition that needs work (with ``every_partition``, per partition: a stream's); see the
    module docstring.  Under ``airmirror.source.reset.policy = fail`` partitions whose source incarnation
    changed are stopped instead."""
    plans = [
        p for p in plan_partitions(flow, store, mappings, options) if every_partition or needs_work(p.planned, p.cursor)
    ]
    if not options.reset_cursor:
        refuse_moves(
            options, {p.key: (p.planned.moved_from, p.planned.start) for p in plans if p.planned.moved_from is not None}
        )
    stored_ids = {p.key: p.stored.source_topic_id for p in plans if p.stored is not None}
    return refuse_source_resets(flow, store, [p.planned for p in plans], stored_ids, dry_run=options.dry_run)


def refuse_moving_cursors(
    flow: FlowConfig, store: MetadataStore, mappings: Sequence[TopicMapping], options: BatchOptions
) -> None:
    """Raise InputError when ``options.start_from`` would move an existing cursor without ``reset_cursor``."""
    if options.start_from == "stored" or options.reset_cursor:
        return
    cursors = store.cursor_states(flow.name)
    keys = [key for m in mappings for p in range(m.partitions) if (key := PartitionKey(m.source_topic, p)) in cursors]
    if not keys:
        return
    offsets = partition_offsets(source_admin(flow), keys, start_ms=options.start_ms)
    starts = {key: requested_start(options.start_from, offsets[key]) for key in keys}
    moves = {
        key: (moved, start)
        for key in keys
        if (start := starts[key]) is not None and (moved := moved_from(cursors[key].next_offset, start)) is not None
    }
    refuse_moves(options, moves)


def refuse_moves(options: BatchOptions, moves: dict[PartitionKey, tuple[int, int]]) -> None:
    """InputError listing every ``cursor -> requested start`` move, when there is one."""
    if moves:
        listed = ", ".join(f"{key.topic}-{key.partition} ({old} -> {new})" for key, (old, new) in sorted(moves.items()))
        raise InputError(
            f"start_from '{options.start_from}' would move existing cursors: {listed}; set reset_cursor to allow it"
        )
