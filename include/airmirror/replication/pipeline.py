"""One micro-batch of a flow, in four steps shared by the CLI, the Airflow tasks and the tests.

1. :func:`sync_flow_topics` - select the source topics and create/grow/reconfigure remote topics.
2. :func:`plan_batch` - resume the flow's unfinished batch if there is one, otherwise plan a new one from
   the stored cursors and store it (state RUNNING) before anything is copied.  A resumed batch keeps its
   original ranges: a retry never re-plans data that may already be committed in Kafka.
3. :func:`run_batch` - the Spark job; each range is a sequence of bounded Kafka transactions (see
   :mod:`airmirror.replication.spark.partition_writer` for the exactly-once protocol).
4. :func:`record_batch` - read every range's committed progress and offset-sync runs from the target's
   batch log and commit cursors, offset-syncs and gaps in ONE metadata-DB transaction.  It refuses to
   commit a batch with any range not yet done in Kafka, so the DB never runs ahead of the target.  Then
   it tombstones the batch's runs records (the DB holds them now) and stores the replication latency of
   copied heartbeats (:func:`airmirror.heartbeats.emission.observe_heartbeats`).
"""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from airmirror import names
from airmirror.config import FlowConfig
from airmirror.config.mirror_config import BATCH_LOG_REPLICATION_FACTOR_KEY
from airmirror.errors import InputError, ReplicationFailure
from airmirror.heartbeats.emission import observe_heartbeats
from airmirror.model import PartitionKey, PlannedRange, RangeResult
from airmirror.replication.options import BatchOptions
from airmirror.replication.offset_runs import merge_runs
from airmirror.replication.planner import needs_work, plan_range, requested_start
from airmirror.replication.spark.batch_log import (
    LOG_TOPIC_CONFIG,
    Progress,
    RunsRecord,
    tombstone,
    read_runs,
    runs_key,
)
from airmirror.replication.spark.progress import fence_partitions, range_progress, unfinished, untouched
from airmirror.kafka.offsets import divergence_points, list_offsets, partition_offsets
from airmirror.store import FlowLease, MetadataStore, describe_holder
from airmirror.replication.incarnations import diverged_cursors, raise_for_stops, record_remote_topics, refuse_source_resets, writable_mappings
from airmirror.kafka.topics import (
    TopicMapping,
    TopicSyncReport,
    alter_configs,
    describe_topic_configs,
    ensure_internal_topic,
    replicated_topics,
    sync_topics,
    topic_ids,
)
from airmirror.kafka.clients import source_admin, target_admin

log = logging.getLogger(__name__)


@dataclass
class PlannedBatch:
    """A batch ready to run: ``batch_id`` is None for a dry run, which stores nothing."""

    batch_id: int | None
    ranges: list[PlannedRange]
    resumed: bool = False


@dataclass
class BatchSummary:
    """The committed outcome of a batch."""

    batch_id: int
    results: list[RangeResult] = field(default_factory=list)

    @property
    def records(self) -> int:
        return sum(r.records for r in self.results)

    @property
    def bytes(self) -> int:
        return sum(r.bytes for r in self.results)


def sync_flow_topics(flow: FlowConfig, store: MetadataStore, options: BatchOptions) -> TopicSyncReport:
    """Step 1: select topics and sync them to the target (nothing changes in a dry run).

    A ``start_from`` that would move existing cursors without ``reset_cursor`` is rejected first, before
    anything changes.  Remote topics deleted or recreated under the flow are stopped, never recreated
    (:mod:`airmirror.replication.incarnations`); the report's mappings leave them out.
    """
    source, target = source_admin(flow), target_admin(flow)
    mappings = writable_mappings(flow, store, target, replicated_topics(flow, source, options.topics_regex), dry_run=options.dry_run)
    if options.start_from != "stored" and not options.reset_cursor:
        plan_ranges(flow, store, mappings, replace(options, dry_run=True))
    report = sync_topics(flow, source, target, mappings, dry_run=options.dry_run)
    if not options.dry_run:
        record_remote_topics(flow, store, target, mappings)
        ensure_batch_log(flow, target)
    return report


def ensure_batch_log(flow: FlowConfig, target: AdminClient) -> None:
    """Create the flow's batch-log topic, or give an existing one the batch log's configs (a topic created by
    an earlier airmirror was not compacted, so it would one day delete progress records)."""
    name = names.batch_log_topic(flow.source)
    if ensure_internal_topic(flow, target, name, LOG_TOPIC_CONFIG, BATCH_LOG_REPLICATION_FACTOR_KEY):
        return
    current = describe_topic_configs(target, [name])[name]
    stale = {key: value for key, value in LOG_TOPIC_CONFIG.items() if key not in current or current[key].value != value}
    if stale:
        log.warning("%s: setting %s", name, stale)
        alter_configs(target, {name: stale})


def plan_batch(flow: FlowConfig, store: MetadataStore, mappings: list[TopicMapping], options: BatchOptions) -> PlannedBatch:
    """Step 2: resume the unfinished batch, or plan and store a new one (see the module docstring)."""
    unfinished_batch = store.unfinished_batch(flow.name)
    if unfinished_batch is not None:
        log.warning("resuming unfinished batch %s of %s", unfinished_batch.id, flow.name)
        if options.dry_run:
            return PlannedBatch(None, list(unfinished_batch.ranges), resumed=True)
        ranges = revise_resumed_ranges(flow, store, unfinished_batch.id, list(unfinished_batch.ranges), mappings, record_cap(flow, options))
        return PlannedBatch(unfinished_batch.id, ranges, resumed=True)
    ranges = plan_ranges(flow, store, mappings, options)
    if options.dry_run or not ranges:
        return PlannedBatch(None, ranges)
    return PlannedBatch(store.begin_batch(flow.name, ranges, options.params()), ranges)


def plan_ranges(flow: FlowConfig, store: MetadataStore, mappings: list[TopicMapping], options: BatchOptions) -> list[PlannedRange]:
    """One range per partition that needs work (see :mod:`airmirror.replication.planner`); under
    ``airmirror.source.reset.policy = fail`` partitions whose source incarnation changed are stopped instead."""
    remote = {m.source_topic: m.remote_topic for m in mappings}
    keys = [PartitionKey(m.source_topic, p) for m in mappings for p in range(m.partitions)]
    source = source_admin(flow)
    ids = topic_ids(source, remote)
    offsets = {key: replace(o, topic_id=ids[key.topic]) for key, o in partition_offsets(source, keys, options.until_ms, options.start_ms).items()}
    cursors = store.cursor_states(flow.name)
    diverged = diverged_cursors(flow, cursors, offsets)
    max_records = record_cap(flow, options)
    ranges = []
    for key in keys:
        stored = cursors.get(key)
        cursor = stored.next_offset if stored is not None else None
        planned = plan_range(
            key.topic,
            key.partition,
            remote[key.topic],
            cursor,
            offsets[key],
            auto_offset_reset=flow.auto_offset_reset,
            max_records=max_records,
            start_at=requested_start(options.start_from, offsets[key]),
            stored_topic_id=stored.source_topic_id if stored is not None else None,
            stored_epoch=stored.leader_epoch if stored is not None else None,
            diverged_at=diverged.get(key),
        )
        if needs_work(planned, cursor):
            ranges.append(planned)
    moved = [r for r in ranges if r.moved_from is not None]
    if moved and not options.reset_cursor:
        listed = ", ".join(f"{r.topic}-{r.partition} ({r.moved_from} -> {r.start})" for r in moved)
        raise InputError(f"start_from '{options.start_from}' would move existing cursors: {listed}; set reset_cursor to allow it")
    stored_ids = {key: state.source_topic_id for key, state in cursors.items()}
    return refuse_source_resets(flow, store, ranges, stored_ids, dry_run=options.dry_run)


def run_batch(flow: FlowConfig, planned: PlannedBatch, spark: Any) -> list[dict]:
    """Step 3: the Spark copy job (``spark`` is a SparkSession)."""
    from airmirror.replication.spark.copy_job import run_copy_job

    if planned.batch_id is None:
        raise ValueError("a dry-run plan cannot be run")
    return run_copy_job(spark, flow, planned.batch_id, planned.ranges)


def record_cap(flow: FlowConfig, options: BatchOptions) -> int | None:
    """Records per partition a batch may copy: ``--max-records``, else the flow's cap, else none."""
    return options.max_records if options.max_records is not None else flow.max_records_per_partition


def revise_resumed_ranges(
    flow: FlowConfig,
    store: MetadataStore,
    batch_id: int,
    ranges: list[PlannedRange],
    mappings: list[TopicMapping],
    cap: int | None,
) -> list[PlannedRange]:
    """Resuming: after fencing every attempt still at work on them, drop the unfinished ranges that can no
    longer be finished (:mod:`airmirror.replication.incarnations`), end the ranges whose source log diverged below where
    they stand (:func:`end_diverged_ranges`), and re-plan the ranges the batch has not started yet
    (:func:`replan_untouched`).  So a batch that cannot finish as planned never blocks the flow: changing the
    topic filter or the cap, deleting a source topic, or an unclean leader election takes effect on the next
    run."""
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


@dataclass(frozen=True)
class CommittedBatch:
    """What the target's batch log says a batch copied: per range the result, and the runs records read."""

    results: list[RangeResult]
    runs: dict[tuple[str, int], list[RunsRecord]]


def committed_batch(flow: FlowConfig, batch_id: int, ranges: list[PlannedRange]) -> CommittedBatch:
    """Every range's result as committed in the target's batch log; fails if any range is not done."""
    progress = range_progress(flow, ranges)
    pending = unfinished(ranges, progress, batch_id)
    if pending:
        listed = ", ".join(str(r.key) for r in pending)
        raise ReplicationFailure(
            f"batch {batch_id} of {flow.name} is not committed in Kafka for {listed}; run the batch again to resume it"
        )
    done = {(key.topic, key.partition): p for key, p in progress.items() if p is not None}
    runs = read_runs(flow.target_client("consumer"), names.batch_log_topic(flow.source), flow.name, batch_id, done)
    return CommittedBatch([range_result(r, done.get((r.topic, r.partition)), runs) for r in ranges], runs)


def range_result(planned: PlannedRange, progress: Progress | None, runs: dict[tuple[str, int], list[RunsRecord]]) -> RangeResult:
    """One range's committed result: an empty range copied nothing; any other has done progress."""
    if progress is None:
        return RangeResult(planned.topic, planned.partition, planned.start, planned.end, 0, 0, end_epoch=planned.start_epoch)
    copied = merge_runs(run for record in runs[(planned.topic, planned.partition)] for run in record.runs)
    return RangeResult(
        planned.topic,
        planned.partition,
        progress.start,
        progress.position,
        progress.records,
        progress.bytes,
        tuple(copied),
        progress.downstream_start,
        progress.downstream_position if progress.records else None,
        progress.leader_epoch,
    )


def discard_batch_runs(flow: FlowConfig, batch_id: int, runs: dict[tuple[str, int], list[RunsRecord]]) -> None:
    """Tombstone the batch's runs records once the DB holds them; a failure only leaves them for longer."""
    keys = [
        runs_key(flow.name, topic, partition, batch_id, record.chunk, record.part)
        for (topic, partition), records in runs.items()
        for record in records
    ]
    try:
        tombstone(flow.target_client("producer"), names.batch_log_topic(flow.source), keys)
    except Exception as error:  # noqa: BLE001 - the batch is committed; leftover runs records are harmless
        log.warning("could not discard the batch-log runs of batch %s of %s: %s", batch_id, flow.name, error)


def record_batch(flow: FlowConfig, store: MetadataStore, planned: PlannedBatch, lease: FlowLease | None = None) -> BatchSummary:
    """Step 4: commit the batch's Kafka-committed results to the metadata DB, discard its runs records from
    the batch log, then expose source lag and heartbeat latency.  With a ``lease``, nothing is committed
    unless it still holds the flow."""
    if planned.batch_id is None:
        raise ValueError("a dry-run plan cannot be recorded")
    committed = committed_batch(flow, planned.batch_id, planned.ranges)
    if lease is not None:
        lease.check()
    store.commit_batch(planned.batch_id, committed.results)
    discard_batch_runs(flow, planned.batch_id, committed.runs)
    commit_source_progress(flow, committed.results)
    observe_heartbeats(flow, store, planned.ranges, committed.results)
    return BatchSummary(planned.batch_id, committed.results)


def commit_source_progress(flow: FlowConfig, results: list[RangeResult]) -> None:
    """Commit the new cursors to the source as group offsets (informational: the DB stays authoritative)."""
    if not results:
        return
    consumer = Consumer({**flow.source_client("consumer"), "group.id": names.source_progress_group(flow.source, flow.target), "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(r.topic, r.partition, r.end) for r in results], asynchronous=False)
    except Exception as error:  # noqa: BLE001 - lag display must never fail a committed batch
        log.warning("could not commit source progress for %s: %s", flow.name, error)
    finally:
        consumer.close()


@dataclass
class ReplicateReport:
    """What one ``airmirror replicate`` did."""

    topics: TopicSyncReport
    planned: PlannedBatch
    summary: BatchSummary | None
    seconds: float


def replicate_once(
    flow: FlowConfig, store: MetadataStore, options: BatchOptions, spark_factory: Any, holder: str | None = None
) -> ReplicateReport:
    """All four steps in one process (the CLI); ``spark_factory()`` returns a SparkSession when needed.

    Unless it is a dry run, the run holds the flow's lease (:mod:`airmirror.store.flow_lease`) from before
    step 1 to the end: a second run of the flow fails at once, having changed nothing, and says which run
    holds the flow.  Stopped topics or partitions fail the run after everything else was copied."""
    started = time.monotonic()
    holding = nullcontext() if options.dry_run else store.hold_flow(flow.name, holder or describe_holder("airmirror replicate"))
    with holding as lease:
        topics = sync_flow_topics(flow, store, options)
        planned = plan_batch(flow, store, topics.mappings, options)
        summary = None
        if planned.batch_id is not None:
            if any(r.size > 0 for r in planned.ranges):
                run_batch(flow, planned, spark_factory())
            summary = record_batch(flow, store, planned, lease)
    if not options.dry_run:
        raise_for_stops(flow, store)
    return ReplicateReport(topics, planned, summary, time.monotonic() - started)
