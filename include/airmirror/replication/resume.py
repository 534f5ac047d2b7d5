"""Resuming an unfinished batch: what may change in it, and what may not.

A resumed batch keeps its ranges, since parts of them may already be committed in Kafka.  Before anything
else, every attempt still at work on its partitions is fenced
(:func:`~airmirror.replication.spark.progress.supersede_jobs`); then, from the progress the target's batch log holds:

1. an unfinished range that cannot finish as planned (:func:`unfinishable`):

   - this batch copied none of it, and its source topic is gone or another incarnation, or the run does not
     write its topic (``--topics``, the DAG's ``topics`` param or ``topics``/``topics.exclude`` leave it out,
     or its remote topic is stopped): it drops out, and its cursor stays where it is;
   - chunks of it are committed, and its remote topic is stopped (deleted or recreated on the target, see
     :mod:`airmirror.replication.incarnations`): it drops out; the stop fails every run until
     ``airmirror reset``, which also makes the batch log forget the topic's progress;
   - chunks of it are committed, and its source topic is gone or another incarnation: it ends where its copy
     got to, so the batch commits the cursor there; the next plan then treats the partition as any deleted
     or recreated source topic (a source reset, or a stop under ``airmirror.source.reset.policy = fail``);
   - chunks of it are committed, and the run no longer selects its topic: it is kept and finished, whatever
     the selection says, once its remote topic passed the same incarnation check as a selected topic's.

   So a record committed in Kafka is committed in the DB with its batch: a range dropped after some of its
   chunks were committed would leave the target ahead of the partition's cursor, and every later copy of the
   partition would refuse to write duplicates;
2. an unfinished range whose source log diverged below where it stands ends there
   (:func:`end_diverged_ranges`); the next plan starts the partition again at the divergence point;
3. a range not started yet is planned again (:func:`replan_untouched`): a start that retention deleted
   meanwhile moves to the log start (the lost offsets become a gap), and a new cap applies.

So a batch that cannot finish as planned never blocks the flow, and never leaves it at a dead end.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from confluent_kafka.admin import OffsetSpec

from airmirror.config import FlowConfig
from airmirror.kafka.clients import source_admin, target_admin
from airmirror.kafka.offsets import divergence_points, list_offsets
from airmirror.kafka.topic_ids import topic_ids
from airmirror.kafka.topics import TopicMapping
from airmirror.model import PartitionKey, PlannedRange, StoredJobs
from airmirror.replication.incarnations import writable_mappings
from airmirror.replication.spark.batch_log import Progress
from airmirror.replication.spark.progress import take_over, unfinished, untouched
from airmirror.replication.spark.standing import PartCopied, range_standing
from airmirror.store import MetadataStore

log = logging.getLogger(__name__)


def revise_resumed_ranges(
    flow: FlowConfig,
    store: MetadataStore,
    batch: StoredJobs,
    ranges: list[PlannedRange],
    mappings: list[TopicMapping],
    cap: int | None,
) -> list[PlannedRange]:
    """Apply rules 1-3 of the module docstring to the resumed ``batch``'s ``ranges``, after fencing every attempt
    still at work on them; returns the ranges as they stand now.  ``mappings`` are the topics the run selected whose
    remote topics may be written (step 1's)."""
    pending = [r for r in ranges if r.size > 0]
    if not pending:
        return ranges
    batch_id = batch.batch_id
    progress = take_over(flow, batch, [r.key for r in pending], ranges, check_lease=store.check_lease)
    open_ranges = unfinished(ranges, progress, batch_id)
    committed = {
        r.key: standing.progress.position
        for r in open_ranges
        if isinstance(standing := range_standing(batch_id, progress[r.key], start=r.start), PartCopied)
    }
    verdict = unfinishable(flow, store, open_ranges, committed, mappings)
    if verdict.dropped:
        store.drop_ranges(batch_id, verdict.dropped)
        log.warning(
            "batch %s of %s drops %s: see the errors above",
            batch_id,
            flow.name,
            ", ".join(map(str, sorted(verdict.dropped))),
        )
    ended = [end_at(store, batch_id, r, verdict.ended[r.key]) for r in ranges if r.key in verdict.ended]
    live = [r for r in ranges if r.key not in verdict.dropped and r.key not in verdict.ended]
    live = end_diverged_ranges(flow, store, batch_id, live, progress)
    live = replan_untouched(flow, store, batch_id, live, untouched(live, progress, batch_id), cap)
    revised = {r.key: r for r in [*live, *ended]}
    return [revised[r.key] for r in ranges if r.key in revised]


def end_at(store: MetadataStore, batch_id: int, planned: PlannedRange, position: int) -> PlannedRange:
    """End ``planned`` at ``position``, where its committed copy got to; the copy job then marks it done."""
    ended = replace(planned, end=position)
    store.replan_range(batch_id, ended)
    return ended


def end_diverged_ranges(
    flow: FlowConfig,
    store: MetadataStore,
    batch_id: int,
    ranges: list[PlannedRange],
    progress: dict[PartitionKey, Progress | None],
) -> list[PlannedRange]:
    """End each unfinished range whose source log diverged below where it stands (its committed progress in
    this batch, else its start) at that position: the batch can then commit what it copied, and the next plan
    starts the partition again at the divergence point (:mod:`airmirror.replication.plan_arithmetic`)."""
    positions = {}
    for r in unfinished(ranges, progress, batch_id):
        standing = range_standing(batch_id, progress[r.key], start=r.start)
        position, epoch = (
            (standing.progress.position, standing.progress.leader_epoch)
            if isinstance(standing, PartCopied)
            else (r.start, r.start_epoch)
        )
        if epoch is not None:
            positions[r.key] = (position, epoch)
    diverged = divergence_points(flow.source_client("consumer"), positions)
    ended = {}
    for r in ranges:
        if r.key in diverged:
            ended[r.key] = end_at(store, batch_id, r, positions[r.key][0])
            log.warning(
                "%s: the source log diverged at %d, below %d; the range ends there",
                r.key,
                diverged[r.key],
                positions[r.key][0],
            )
    return [ended.get(r.key, r) for r in ranges]


@dataclass(frozen=True)
class Unfinishable:
    """Rule 1's verdict: the ranges that leave the batch, and those that end at a position (where their
    committed copy got to)."""

    dropped: set[PartitionKey] = field(default_factory=set)
    ended: dict[PartitionKey, int] = field(default_factory=dict)


def unfinishable(
    flow: FlowConfig,
    store: MetadataStore,
    pending: list[PlannedRange],
    committed: Mapping[PartitionKey, int],
    mappings: list[TopicMapping],
) -> Unfinishable:
    """Rule 1 for the unfinished ``pending`` ranges; ``committed`` holds the position of each one with committed
    chunks in this batch.  Reads the source topic ids, and checks the remote topics of unselected topics that
    carry committed chunks as step 1 checks selected ones (a remote topic deleted or recreated is stopped; the
    partition count of the mappings built for that check plays no part in it)."""
    selected = {m.source_topic for m in mappings}
    carried = [
        TopicMapping(r.topic, r.remote_topic, 0) for r in pending if r.topic not in selected and r.key in committed
    ]
    still_writable = (
        writable_mappings(flow, store, target_admin(flow), list(dict.fromkeys(carried)), dry_run=False)
        if carried
        else []
    )
    writable = selected | {m.source_topic for m in still_writable}
    return sort_unfinishable(
        pending, committed, selected, writable, topic_ids(source_admin(flow), {r.topic for r in pending})
    )


def sort_unfinishable(
    pending: list[PlannedRange],
    committed: Mapping[PartitionKey, int],
    selected: set[str],
    writable: set[str],
    source_ids: Mapping[str, str | None],
) -> Unfinishable:
    """Rule 1, pure: ``selected`` are the topics the run selects, ``writable`` those whose remote topic may be
    written (selected or not), ``source_ids`` each pending topic's source topic id now (``None``: gone)."""
    verdict = Unfinishable()
    for r in pending:
        current = source_ids[r.topic]
        source = None
        if current is None or (r.source_topic_id is not None and current != r.source_topic_id):
            source = (
                "is gone" if current is None else f"is another incarnation (topic id {r.source_topic_id} -> {current})"
            )
        if r.key not in committed and (source is not None or r.topic not in selected):
            why = (
                f"its source topic {source}"
                if source is not None
                else "the run does not write its topic (not selected, or stopped)"
            )
            log.error("%s: %s, and this batch copied none of it; the range drops out of the batch", r.key, why)
            verdict.dropped.add(r.key)
        elif r.topic not in writable:
            log.error("%s: its remote topic %s is stopped; the range drops out of the batch", r.key, r.remote_topic)
            verdict.dropped.add(r.key)
        elif source is not None:
            log.warning(
                "%s: its source topic %s; the range ends at %d, where its copy got to", r.key, source, committed[r.key]
            )
            verdict.ended[r.key] = committed[r.key]
        elif r.topic not in selected:
            log.warning(
                "%s: the run does not select its topic, but this batch copied part of it; the batch finishes it", r.key
            )
    return verdict


def replan_untouched(
    flow: FlowConfig,
    store: MetadataStore,
    batch_id: int,
    ranges: list[PlannedRange],
    pending: list[PlannedRange],
    cap: int | None,
) -> list[PlannedRange]:
    """Re-plan the not yet started ``pending`` ranges: one whose start retention deleted meanwhile starts at the
    log start (the lost offsets become a gap), and none is longer than ``cap``."""
    if not pending:
        return ranges
    leaderless: dict[PartitionKey, str] = {}  # their log starts are not known now: they keep their start
    log_starts = list_offsets(source_admin(flow), [r.key for r in pending], OffsetSpec.earliest(), waiting=leaderless)
    replanned = {}
    for r in pending:
        revised = r
        if r.start < log_starts.get(r.key, r.start):
            gap_start = r.start if r.gap_start is None else r.gap_start
            revised = replace(r, start=min(log_starts[r.key], r.end), gap_start=gap_start)
            log.warning(
                "%s: retention deleted [%d, %d) before it was copied; recorded as a gap",
                r.key,
                r.start,
                log_starts[r.key],
            )
        if cap is not None and revised.size > cap:
            revised = replace(revised, end=revised.start + cap)
        if revised != r:
            store.replan_range(batch_id, revised)
            replanned[r.key] = revised
    return [replanned.get(r.key, r) for r in ranges]
