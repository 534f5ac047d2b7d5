"""Step 4's reading and its after-commit actions.

:func:`committed_batch` reads what the target's batch log says a batch copied; it refuses a batch with any
range not yet done in Kafka, so the metadata DB never runs ahead of the target.

After the DB commit, :data:`AFTER_COMMIT` runs in order.  These actions only tidy up or inform: each failure is
logged and never undoes the committed batch; a refusal (a missing ACL) fails the run once all have run.
1. :func:`discard_batch_runs` tombstones the batch's runs records (the DB holds them now);
2. :func:`commit_source_progress` commits the new cursors to the source as group offsets, so any Kafka lag
   tool shows the flow's lag (the DB stays authoritative);
3. :func:`emit_offset_syncs` writes MM2's offset-syncs topic (:mod:`airmirror.replication.offset_syncs_topic`);
4. :func:`record_heartbeat_latency` stores the replication latency of copied heartbeats;
5. :func:`record_lag` stores a lag sample of every partition the batch planned
   (:mod:`airmirror.replication.lag`), so the figures are kept over time;
6. :func:`prune_history` deletes the flow's history older than ``airmirror.metadata.retention``, and the
   offset-sync runs of the batch's partitions that lie below both clusters' log starts, and folds those
   partitions' old runs (:mod:`airmirror.store.retention`), at most once per ``airmirror.metadata.prune.interval``
   (or retention, if shorter) per partition, whichever process copies it, so a live run committing a batch every
   few seconds, or a flow whose every batch is a fresh process, does not pay for it every batch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import OffsetSpec

from airmirror import names
from airmirror.config import FlowConfig
from airmirror.config.settings_registry import METADATA_PRUNE_INTERVAL
from airmirror.errors import AccessDenied, ReplicationFailure
from airmirror.heartbeats.heartbeat_emitter import observe_heartbeats
from airmirror.kafka.authorization import naming_refusals
from airmirror.kafka.clients import REQUEST_TIMEOUT_S, source_admin, target_admin
from airmirror.kafka.offsets import list_offsets
from airmirror.kafka.records import warm_writer
from airmirror.kafka.retry import retry_transient
from airmirror.model import PartitionKey, PlannedRange, RangeResult, StoredJobs
from airmirror.replication.lag import sample_lag
from airmirror.replication.offset_runs import merge_runs
from airmirror.replication.offset_syncs_topic import write_offset_syncs
from airmirror.replication.spark.batch_log import Progress, RunsRecord, read_runs, runs_key, tombstone
from airmirror.replication.spark.progress import range_progress, unfinished
from airmirror.store import FlowBusyError, MetadataStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CommittedBatch:
    """What the target's batch log says batch ``batch_id`` copied: its ``planned`` ranges, per range the
    result, and the runs records read."""

    batch_id: int
    planned: list[PlannedRange]
    results: list[RangeResult]
    runs: dict[tuple[str, int], list[RunsRecord]]


def warm_writers(flow: FlowConfig) -> None:
    """Start connecting, in this run's shared clients, the producers :data:`AFTER_COMMIT` writes with (the batch
    log's tombstones on the target; MM2 offset syncs where the flow emits them), so a batch's commit does not
    wait for their connections and producer ids: call it before the copy job."""
    warm_writer(flow)
    if flow.offset_syncs.emit_enabled:
        warm_writer(flow, flow.offset_syncs_place()[0])


def committed_batch(
    flow: FlowConfig,
    batch: StoredJobs,
    ranges: list[PlannedRange],
    *,
    check_lease: Callable[[], None],
) -> CommittedBatch:
    """Every range's result of the stored ``batch`` as committed in the target's batch log; fails if any range is
    not done.  ``check_lease`` runs before the lookup fences anything
    (:func:`~airmirror.replication.spark.progress.range_progress`)."""
    batch_id, jobs = batch.batch_id, batch.jobs
    progress = range_progress(flow, ranges, jobs, jobs.scan_from, check_lease=check_lease)
    pending = unfinished(ranges, progress, batch_id)
    if pending:
        listed = ", ".join(str(r.key) for r in pending)
        raise ReplicationFailure(
            f"batch {batch_id} of {flow.name} is not committed in Kafka for {listed}; run the batch again to resume it"
        )
    done = {(key.topic, key.partition): p for key, p in progress.items() if p is not None}
    runs = read_runs(flow, batch_id, done)
    return CommittedBatch(
        batch_id, ranges, [range_result(r, done.get((r.topic, r.partition)), runs) for r in ranges], runs
    )


def range_result(
    planned: PlannedRange, progress: Progress | None, runs: dict[tuple[str, int], list[RunsRecord]]
) -> RangeResult:
    """One range's committed result: an empty range copied nothing; any other has done progress, whose result is
    what it adds to nothing recorded (:func:`progress_result`: a bounded batch is a stream recorded once)."""
    if progress is None:
        return planned.empty_result()
    return progress_result(nothing_recorded(planned), progress, runs[(planned.topic, planned.partition)])


def nothing_recorded(planned: PlannedRange) -> RangeResult:
    """What the metadata DB holds of a range before its first recording: nothing copied, from its start."""
    return RangeResult(
        topic=planned.topic, partition=planned.partition, start=planned.start, end=planned.start, records=0, bytes=0
    )


def progress_result(recorded: RangeResult, progress: Progress, records: Iterable[RunsRecord]) -> RangeResult:
    """The one reading of the batch log into a range's result, for a bounded batch's commit and a stream's
    recordings alike: what a partition's ``progress`` adds to what the DB ``recorded`` of it, source offsets
    ``[recorded.end, progress.position)`` with the runs of ``records`` inside them, taken in (chunk, part) order
    (runs below ``recorded.end`` are recorded already).  Raises :class:`~airmirror.errors.ReplicationFailure`
    when the runs do not account for every record copied since (runs records are only discarded after the DB
    recorded them, so the batch log was tampered with, or the caller lacks some)."""
    runs = merge_runs(
        run
        for record in sorted(records, key=lambda r: (r.chunk, r.part))
        for run in record.runs
        if run.upstream_start >= recorded.end
    )
    copied = sum(run.copies for run in runs)
    if copied != progress.records - recorded.records:
        raise ReplicationFailure(
            f"the batch log holds runs for {copied} of the {progress.records - recorded.records} records batch "
            f"{progress.batch_id} copied from {recorded.topic}-{recorded.partition} since it was last recorded"
        )
    return RangeResult(
        topic=recorded.topic,
        partition=recorded.partition,
        start=recorded.end,
        end=progress.position,
        records=copied,
        bytes=progress.bytes - recorded.bytes,
        runs=tuple(runs),
        downstream_start=runs[0].downstream_start if runs else None,
        downstream_end=progress.downstream_position if copied else None,
        end_epoch=progress.leader_epoch,
        schema_passed=progress.passed - recorded.schema_passed,
        filtered=progress.filtered - recorded.filtered,
        skipped=progress.skipped - recorded.skipped,
    )


def discard_batch_runs(flow: FlowConfig, store: MetadataStore, committed: CommittedBatch) -> None:
    """Tombstone the batch's runs records once the DB holds them; leftovers would only stay for longer."""
    keys = [
        runs_key(flow.name, topic, partition, committed.batch_id, record.chunk, record.part)
        for (topic, partition), records in committed.runs.items()
        for record in records
    ]
    tombstone(flow, keys)


def commit_source_progress(flow: FlowConfig, store: MetadataStore, committed: CommittedBatch) -> None:
    """Commit the new cursors to the source as group offsets (informational: the DB stays authoritative)."""
    if not committed.results:
        return
    group = names.source_progress_group(flow.source, flow.target)
    admin = source_admin(flow)
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(r.topic, r.partition, r.end) for r in committed.results]
    )
    with naming_refusals(admin.access, group=group):
        retry_transient(
            lambda: admin.alter_consumer_group_offsets([request], request_timeout=REQUEST_TIMEOUT_S)[group].result(),
            f"commit the position of {flow.name} as group '{group}' on cluster '{flow.source}'",
        )


def emit_offset_syncs(flow: FlowConfig, store: MetadataStore, committed: CommittedBatch) -> None:
    """Write the runs the batch committed (its results', in order) to MM2's offset-syncs topic
    (``emit.offset-syncs.enabled``)."""
    if not flow.offset_syncs.emit_enabled:
        return
    runs = {(result.topic, result.partition): list(result.runs) for result in committed.results if result.runs}
    write_offset_syncs(flow, runs, int(time.time() * 1000))


def record_heartbeat_latency(flow: FlowConfig, store: MetadataStore, committed: CommittedBatch) -> None:
    """Store the replication latency of the heartbeats the batch copied."""
    observe_heartbeats(flow, store, committed.planned, committed.results)


def record_lag(flow: FlowConfig, store: MetadataStore, committed: CommittedBatch) -> None:
    """Store a lag sample of every partition of the batch, taken from its new cursor."""
    positions = {PartitionKey(r.topic, r.partition): r.end for r in committed.results}
    store.record_lag_samples(flow.name, sample_lag(flow, store, positions))


def prune_history(flow: FlowConfig, store: MetadataStore, committed: CommittedBatch) -> None:
    """Delete the flow's history older than its retention and the runs of the batch's partitions below both
    clusters' log starts (read now), then fold those partitions' old runs: for the partitions that no process
    pruned within the prune interval (``airmirror.metadata.prune.interval``, or the retention if shorter), and
    nothing when there are none.  A flow of thousands of partitions whose batches each run in a fresh process (a
    CLI run, an Airflow task) so pays for the reads and the prune once per interval, not per batch
    (:meth:`~airmirror.store.retention.RetentionStore.claim_prunes`)."""
    planned = {planned.key: PartitionKey(planned.remote_topic, planned.partition) for planned in committed.planned}
    remote = {
        key: planned[key]
        for key in store.claim_prunes(
            flow.name, planned, min(flow.value(METADATA_PRUNE_INTERVAL), flow.metadata_retention)
        )
    }
    if not remote:
        return
    pruned = store.prune_history(flow.name, datetime.now(UTC) - flow.metadata_retention)
    leaderless: dict[PartitionKey, str] = {}  # left for a later claim of theirs
    sources = list_offsets(source_admin(flow), remote, OffsetSpec.earliest(), waiting=leaderless)
    targets = list_offsets(target_admin(flow), remote.values(), OffsetSpec.earliest(), waiting=leaderless)
    starts = {key: (sources[key], targets[copy]) for key, copy in remote.items() if key in sources and copy in targets}
    runs = store.prune_runs(flow.name, starts)
    folded = store.fold_runs(flow.name, remote)
    log.info(
        "pruned the history of %s older than %s: %s, %d offset-sync runs; %d runs folded away",
        flow.name,
        flow.metadata_retention,
        pruned,
        runs,
        folded,
    )


AfterCommit = Callable[[FlowConfig, MetadataStore, CommittedBatch], None]
AFTER_COMMIT: tuple[AfterCommit, ...] = (
    discard_batch_runs,
    commit_source_progress,
    emit_offset_syncs,
    record_heartbeat_latency,
    record_lag,
    prune_history,
)
SAMPLED: tuple[AfterCommit, ...] = (commit_source_progress, record_heartbeat_latency, record_lag)
"""The actions that only report where the copy stands (each reads a cluster): a stream, which records twice a
second, runs them at its own sampling interval on each partition's newest recording, and the others every
recording."""
EVERY_RECORDING: tuple[AfterCommit, ...] = tuple(action for action in AFTER_COMMIT if action not in SAMPLED)


def after_commit(
    flow: FlowConfig, store: MetadataStore, committed: CommittedBatch, actions: tuple[AfterCommit, ...] = AFTER_COMMIT
) -> None:
    """Run ``actions`` (:data:`AFTER_COMMIT` unless given) in order; a failing action is logged and the next one
    still runs.  A refusal (:class:`~airmirror.errors.AccessDenied`) is raised once all have run: the batch stays
    committed, but the flow's user lacks an ACL the flow needs.  A lost lease
    (:class:`~airmirror.store.flow_lease.FlowBusyError`) is raised at once: the run must stop."""
    denied: AccessDenied | None = None
    for action in actions:
        try:
            action(flow, store, committed)
        except AccessDenied as error:
            denied = denied or error
        except FlowBusyError:
            raise  # the run lost its lease: it writes nothing more
        except Exception as error:
            log.warning("%s after batch %s of %s failed: %s", action.__name__, committed.batch_id, flow.name, error)
    if denied is not None:
        raise denied
