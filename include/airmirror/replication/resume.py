"""Resuming an unfinished batch: what may change in it, and what may not.

A resumed batch keeps its ranges, since parts of them may already be committed in Kafka.  Before anything
else, every attempt still at work on its partitions is fenced (:func:`~airmirror.replication.spark.progress.fence_partitions`);
then, from the progress the target's batch log holds:

1. an unfinished range that can no longer finish drops out (:func:`unfinishable`: its source topic is gone
   or recreated, its remote topic is stopped, or the flow no longer selects it);
2. an unfinished range whose source log diverged below where it stands ends there
   (:func:`end_diverged_ranges`); the next plan starts the partition again at the divergence point;
3. a range not started yet is planned again (:func:`replan_untouched`): a start that retention deleted
   meanwhile moves to the log start (the lost offsets become a gap), and a new cap applies.

So a batch that cannot finish as planned never blocks the flow.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from confluent_kafka.admin import OffsetSpec

from airmirror.config import FlowConfig
from airmirror.kafka.clients import source_admin
from airmirror.kafka.offsets import divergence_points, list_offsets
from airmirror.kafka.topics import TopicMapping, topic_ids
from airmirror.model import PartitionKey, PlannedRange
from airmirror.replication.spark.batch_log import Progress
from airmirror.replication.spark.progress import fence_partitions, range_progress, unfinished, untouched
from airmirror.store import MetadataStore

log = logging.getLogger(__name__)


def revise_resumed_ranges(
    flow: FlowConfig,
    store: MetadataStore,
    batch_id: int,
    ranges: list[PlannedRange],
    mappings: list[TopicMapping],
    cap: int | None,
) -> list[PlannedRange]:
    """Apply rules 1-3 of the module docstring to a resumed batch's ``ranges``, after fencing every attempt
    still at work on them; returns the ranges as they stand now."""
    pending = [r for r in ranges if r.size > 0]
    if not pending:
        return ranges
    fence_partitions(flow, [r.key for r in pending])
    progress = range_progress(flow, ranges)
    dropped = unfinishable(flow, unfinished(ranges, progress, batch_id), mappings)
    if dropped:
        store.drop_ranges(batch_id, dropped)
        log.warning("batch %s of %s drops %s: see the errors above", batch_id, flow.name, ", ".join(map(str, dropped)))
    kept = end_diverged_ranges(flow, store, batch_id, [r for r in ranges if r.key not in dropped], progress)
    return replan_untouched(flow, store, batch_id, kept, untouched(kept, progress, batch_id), cap)


def end_diverged_ranges(
    flow: FlowConfig, store: MetadataStore, batch_id: int, ranges: list[PlannedRange], progress: dict[PartitionKey, Progress | None]
) -> list[PlannedRange]:
    """End each unfinished range whose source log diverged below where it stands (its committed progress in
    this batch, else its start) at that position: the batch can then commit what it copied, and the next plan
    starts the partition again at the divergence point (:mod:`airmirror.replication.planner`)."""
    positions = {}
    for r in unfinished(ranges, progress, batch_id):
        p = progress[r.key]
        position, epoch = (p.position, p.leader_epoch) if p is not None and p.batch_id == batch_id else (r.start, r.start_epoch)
        if epoch is not None:
            positions[r.key] = (position, epoch)
    diverged = divergence_points(flow.source_client("consumer"), positions)
    ended = {}
    for r in ranges:
        if r.key in diverged:
            ended[r.key] = replace(r, end=positions[r.key][0])
            store.replan_range(batch_id, ended[r.key])
            log.warning("%s: the source log diverged at %d, below %d; the range ends there", r.key, diverged[r.key], positions[r.key][0])
    return [ended.get(r.key, r) for r in ranges]


def unfinishable(flow: FlowConfig, pending: list[PlannedRange], mappings: list[TopicMapping]) -> set[PartitionKey]:
    """Unfinished ranges whose topic the flow no longer writes (stopped, deselected) or whose source topic is
    gone or another incarnation."""
    writable = {m.source_topic for m in mappings}
    ids = topic_ids(source_admin(flow), {r.topic for r in pending})
    dropped = set()
    for r in pending:
        current = ids[r.topic]
        if r.topic not in writable or current is None or (r.source_topic_id is not None and current != r.source_topic_id):
            log.error("%s: planned on source topic id %s, now %s; the range drops out of the batch", r.key, r.source_topic_id, current)
            dropped.add(r.key)
    return dropped


def replan_untouched(
    flow: FlowConfig, store: MetadataStore, batch_id: int, ranges: list[PlannedRange], pending: list[PlannedRange], cap: int | None
) -> list[PlannedRange]:
    """Re-plan the not yet started ``pending`` ranges: one whose start retention deleted meanwhile starts at the
    log start (the lost offsets become a gap), and none is longer than ``cap``."""
    if not pending:
        return ranges
    log_starts = list_offsets(source_admin(flow), [r.key for r in pending], OffsetSpec.earliest())
    replanned = {}
    for r in pending:
        revised = r
        if r.start < log_starts[r.key]:
            gap_start = r.start if r.gap_start is None else r.gap_start
            revised = replace(r, start=min(log_starts[r.key], r.end), gap_start=gap_start)
            log.warning("%s: retention deleted [%d, %d) before it was copied; recorded as a gap", r.key, r.start, log_starts[r.key])
        if cap is not None and revised.size > cap:
            revised = replace(revised, end=revised.start + cap)
        if revised != r:
            store.replan_range(batch_id, revised)
            replanned[r.key] = revised
    return [replanned.get(r.key, r) for r in ranges]
