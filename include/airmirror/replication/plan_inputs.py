"""Step 2's reading: the source's offsets and the stored cursors, through the planner's rules, to one range
per partition.  The same reading serves ``status``, so status shows where the next run would start.

- :func:`plan_partitions` reads, for every partition of the mappings, the broker's offsets (log start, last
  stable offset, ``until``/``start_from`` offsets, leader epoch, topic id) and the stored cursor, validates
  cursors whose leader epoch changed (:func:`~airmirror.replication.incarnations.diverged_cursors`) and plans
  each partition with :func:`airmirror.replication.plan_arithmetic.plan_range`.  Read-only.  **A sick partition
  stays alone**: one without a leader (or whose leader does not answer,
  :data:`~airmirror.kafka.offsets.LEADER_WAIT_S`) is not planned: it stays where it stands, named in ``waiting``
  with the broker's error, and every other partition is planned as usual; it is planned again once its leader
  answers.
- :func:`plan_ranges` keeps the ranges that need work, refuses a ``start_from`` that moves existing cursors
  without ``reset_cursor`` (:class:`~airmirror.errors.InputError`) and applies ``airmirror.source.reset.policy``.
- :func:`refuse_moving_cursors` is that ``start_from`` check alone, for step 1 to run before anything changes;
  it reads only the partitions that have a cursor, through the same ``requested_start`` rule.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

from airmirror.config import FlowConfig
from airmirror.errors import InputError
from airmirror.kafka.clients import source_admin
from airmirror.kafka.offsets import partition_offsets
from airmirror.kafka.topic_ids import topic_ids
from airmirror.kafka.topics import TopicMapping
from airmirror.model import CursorState, MovesCursor, PartitionKey, PartitionOffsets, PlannedRange
from airmirror.replication.incarnations import diverged_cursors, refuse_source_resets
from airmirror.replication.options import BatchOptions
from airmirror.replication.plan_arithmetic import moved_from, needs_work, plan_range, requested_start, source_reset
from airmirror.store import MetadataStore

log = logging.getLogger(__name__)


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
    flow: FlowConfig,
    store: MetadataStore,
    mappings: Sequence[TopicMapping],
    options: BatchOptions | None = None,
    *,
    waiting: dict[PartitionKey, str] | None = None,
) -> list[PartitionPlan]:
    """Every partition of ``mappings`` planned per ``options`` (none: from the stored cursors, to the last
    stable offset, capped only by the flow's ``airmirror.batch.max.records.per.partition``), but those without a
    leader, which go to ``waiting`` (the module docstring).  Read-only."""
    options = options or BatchOptions()
    remote = {m.source_topic: m.remote_topic for m in mappings}
    source = source_admin(flow)
    ids = topic_ids(source, remote)
    leaderless: dict[PartitionKey, str] = {} if waiting is None else waiting
    every = [PartitionKey(m.source_topic, p) for m in mappings for p in range(m.partitions)]
    listed = partition_offsets(source, every, options.until_ms, options.start_ms, waiting=leaderless)
    keys = [key for key in every if key in listed]
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
    waiting: dict[PartitionKey, str] | None = None,
) -> list[PlannedRange]:
    """One range per partition that needs work (with ``every_partition``, per partition: a stream's) but those
    without a leader, which go to ``waiting``, each logged and recorded (unless a dry run:
    :meth:`~airmirror.store.leader_waits.LeaderWaitStore.record_leader_waits`); see the module docstring.  Under
    ``airmirror.source.reset.policy = fail`` partitions whose source incarnation changed are stopped instead."""
    leaderless: dict[PartitionKey, str] = {} if waiting is None else waiting
    partitions = plan_partitions(flow, store, mappings, options, waiting=leaderless)
    for key, error in sorted(leaderless.items()):
        log.warning("flow %s: %s has no leader (%s): it stays where it stands; the others go on", flow.name, key, error)
    if not options.dry_run:
        store.record_leader_waits(flow.name, [*(p.key for p in partitions), *leaderless], leaderless)
    plans = [p for p in partitions if every_partition or needs_work(p.planned, p.cursor)]
    if not options.reset_cursor:
        moves = {
            p.key: (move.cursor, p.planned.start) for p in plans if isinstance(move := p.planned.begins, MovesCursor)
        }
        refuse_moves(options, moves)
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
