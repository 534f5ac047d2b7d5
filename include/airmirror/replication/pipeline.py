"""One micro-batch of a flow, in four steps shared by the CLI, the Airflow tasks and the tests.

1. :func:`sync_flow_topics` - select the source topics, refuse a ``start_from`` that would move existing
   cursors without ``reset_cursor`` (before anything changes), create/grow/reconfigure remote topics, and copy
   topic ACLs (:mod:`airmirror.kafka.acl_sync`), and copy their subjects to the target's schema registry
   (:mod:`airmirror.replication.schema_sync`).
2. :func:`plan_batch` - resume the flow's unfinished batch if there is one (:mod:`airmirror.replication.resume`),
   otherwise plan a new one from the stored cursors (:mod:`airmirror.replication.plan_inputs`) and store it
   (state RUNNING) before anything is copied.  A resumed batch keeps its original ranges: a retry never
   re-plans data that may already be committed in Kafka, and a range with committed chunks stays in the batch
   whatever the run selects now.
3. :func:`run_batch` - the Spark job; each range is a sequence of bounded Kafka transactions (see
   :mod:`airmirror.replication.spark.task_writer` for the exactly-once protocol).
4. :func:`record_batch` - read every range's committed progress and offset-sync runs from the target's
   batch log and commit cursors, offset-syncs and gaps in ONE metadata-DB transaction.  It refuses to
   commit a batch with any range not yet done in Kafka, so the DB never runs ahead of the target.  Then the
   after-commit actions run (:data:`airmirror.replication.recording.AFTER_COMMIT`).

Data flows one way: each step reads what the one before it stored or returned, and nothing calls back.

A run that holds the flow's lease passes its store fenced by the lease
(:meth:`~airmirror.store.engine.EngineHolder.fenced_by`) to every step: once the lease is lost, no step writes the
metadata DB, commits a job token or fences a copy attempt (:mod:`airmirror.store.flow_lease`, fencing;
:mod:`airmirror.replication.spark.progress`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from airmirror import names
from airmirror.config import FlowConfig
from airmirror.config.mirror_config import BATCH_LOG_REPLICATION_FACTOR_KEY
from airmirror.config.settings_registry import DEAD_LETTER_REPLICATION_FACTOR
from airmirror.kafka.acl_sync import sync_topic_acls
from airmirror.kafka.clients import ClusterAdmin, shared_clients, source_admin, target_admin
from airmirror.kafka.topics import (
    TopicMapping,
    TopicSyncReport,
    alter_configs,
    describe_topic_configs,
    ensure_internal_topic,
    select_topics,
    sync_topics,
)
from airmirror.model import BatchJobs, Json, NoJobYet, PartitionKey, PlannedRange, RangeCopied, RangeResult, StoredJobs
from airmirror.replication.incarnations import raise_for_stops, record_remote_topics, writable_mappings
from airmirror.replication.job_driver import start_copy_job, watch_copy_job
from airmirror.replication.options import BatchOptions
from airmirror.replication.plan_inputs import plan_ranges, record_cap, refuse_moving_cursors
from airmirror.replication.recording import after_commit, committed_batch, warm_writers
from airmirror.replication.resume import revise_resumed_ranges
from airmirror.replication.schema_sync import store_new_ids, sync_schemas
from airmirror.replication.spark.batch_log import LOG_TOPIC_CONFIG
from airmirror.replication.streaming import close_stream, stream_ranges
from airmirror.store import MetadataStore, describe_holder
from airmirror.store.streams import STREAM_PARAM

log = logging.getLogger(__name__)


TRANSFORMS_PARAM = "transforms"
"""The batch param holding the flow's transform settings when the batch was planned (:class:`PlannedBatch`)."""


@dataclass
class PlannedBatch:
    """A batch ready to run: ``batch_id`` is None for a dry run, which stores nothing.  ``jobs`` is what the stored
    batch's copy jobs left behind (:class:`~airmirror.model.BatchRecord`), ``transforms`` the settings of the
    transform chain it was planned with (``None``: the flow's chain now), which a resumed batch applies: a changed
    chain applies from the next batch.  ``waiting`` names the partitions the plan left where they stand because they
    have no leader now, with the broker's error (:mod:`airmirror.replication.plan_inputs`)."""

    batch_id: int | None
    ranges: list[PlannedRange]
    resumed: bool = False
    jobs: BatchJobs = field(default_factory=NoJobYet)
    stream: bool = False
    transforms: dict[str, str] | None = None
    waiting: dict[PartitionKey, str] = field(default_factory=dict)

    @property
    def offsets(self) -> int:
        """Source offsets the batch plans to copy (0: it only sets cursors or records gaps)."""
        return sum(r.size for r in self.ranges)

    @property
    def stored_jobs(self) -> StoredJobs:
        """What the stored batch's copy jobs left behind; a dry run's batch was never stored (``ValueError``)."""
        if self.batch_id is None:
            raise ValueError("a dry run's batch is not stored")
        return StoredJobs(self.batch_id, self.jobs)


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
    """Step 1: select topics and sync them, with their ACLs, to the target (nothing changes in a dry run).

    A ``start_from`` that would move existing cursors without ``reset_cursor`` is rejected first
    (:func:`~airmirror.replication.plan_inputs.refuse_moving_cursors`), before anything changes.  Remote topics
    deleted or recreated under the flow are stopped, never recreated (:mod:`airmirror.replication.incarnations`);
    the report's mappings leave them out.  A copied source topic the cluster hides (a revoked DESCRIBE ACL) fails
    the run naming the ACL (:func:`~airmirror.kafka.topics.select_topics`): it is not taken for deleted.  Copied
    source topics (those with cursors or in the unfinished batch) the cluster no longer holds are recorded as gone
    (:mod:`airmirror.store.gone_topics`), and forgotten as gone once they are back.
    """
    source, target = source_admin(flow), target_admin(flow)
    selection = select_topics(flow, source, options.topics_regex, store.copied_topics(flow.name))
    mappings = writable_mappings(flow, store, target, selection.mappings, dry_run=options.dry_run)
    refuse_moving_cursors(flow, store, mappings, options)
    report = sync_topics(flow, source, target, mappings, dry_run=options.dry_run)
    if not options.dry_run:
        store.record_gone_topics(flow.name, selection.looked_for, selection.gone)
        record_remote_topics(flow, store, target, mappings)
        ensure_batch_log(flow, target)
        if flow.copy.dead_letter_topic is not None:
            ensure_internal_topic(flow, target, flow.copy.dead_letter_topic, {}, DEAD_LETTER_REPLICATION_FACTOR.name)
        if flow.topic_sync.sync_acls_enabled:
            sync_topic_acls(flow, source, target)
        sync_schemas(flow, store, report.mappings)
    return report


def ensure_batch_log(flow: FlowConfig, target: ClusterAdmin) -> None:
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


def unfinished_batch(flow: FlowConfig, store: MetadataStore) -> PlannedBatch | None:
    """The flow's unfinished batch as it is stored (resumed), or ``None``: what steps 3 and 4 work on."""
    batch = store.unfinished_batch(flow.name)
    if batch is None:
        return None
    return PlannedBatch(
        batch.id,
        list(batch.ranges),
        resumed=True,
        jobs=batch.jobs,
        stream=bool(batch.params.get(STREAM_PARAM)),
        transforms=stored_transforms(batch.params.get(TRANSFORMS_PARAM)),
    )


def stored_transforms(stored: Json) -> dict[str, str] | None:
    """The transform settings a batch's params hold (:data:`TRANSFORMS_PARAM`), ``None`` for a batch stored without."""
    return {str(key): str(value) for key, value in stored.items()} if isinstance(stored, dict) else None


def plan_batch(
    flow: FlowConfig, store: MetadataStore, mappings: list[TopicMapping], options: BatchOptions, *, stream: bool = False
) -> PlannedBatch:
    """Step 2: resume the unfinished batch, or plan and store a new one (see the module docstring).  A stream
    batch a dead driver left is closed first (:func:`~airmirror.replication.streaming.close_stream`), never
    resumed.  With ``stream``, a new batch is a stream batch of every partition of ``mappings``
    (:mod:`airmirror.replication.streaming`); an unfinished bounded batch is resumed first all the same."""
    resumed = unfinished_batch(flow, store)
    if resumed is not None and resumed.stream and resumed.batch_id is not None:
        if options.dry_run:
            return PlannedBatch(None, resumed.ranges, resumed=True, stream=True)
        close_stream(flow, store, resumed.stored_jobs, resumed.ranges)
        resumed = None
    waiting: dict[PartitionKey, str] = {}
    if stream and resumed is None and not options.dry_run:
        ranges = stream_ranges(plan_ranges(flow, store, mappings, options, every_partition=True, waiting=waiting))
        return PlannedBatch(
            store.begin_batch(flow.name, ranges, {**options.params(), STREAM_PARAM: True}) if ranges else None,
            ranges,
            stream=True,
            waiting=waiting,
        )
    if resumed is not None and resumed.batch_id is not None:
        log.warning("resuming unfinished batch %s of %s", resumed.batch_id, flow.name)
        if options.dry_run:
            return PlannedBatch(None, resumed.ranges, resumed=True)
        ranges = revise_resumed_ranges(
            flow, store, resumed.stored_jobs, resumed.ranges, mappings, record_cap(flow, options)
        )
        return replace(resumed, ranges=ranges)
    ranges = plan_ranges(flow, store, mappings, options, waiting=waiting)
    if options.dry_run or not ranges:
        return PlannedBatch(None, ranges, waiting=waiting)
    params = {**options.params(), TRANSFORMS_PARAM: flow.transform_settings}
    batch_id = store.begin_batch(flow.name, ranges, params)
    return PlannedBatch(batch_id, ranges, transforms=flow.transform_settings, waiting=waiting)


def run_batch(
    flow: FlowConfig, store: MetadataStore, planned: PlannedBatch, spark: Callable[[], Any]
) -> list[RangeCopied]:
    """Step 3: the Spark copy job (``spark()`` returns the SparkSession; it is asked for only once the driver's
    reads of the batch log and the target are done, so a session still starting overlaps them); returns what
    the job copied of each range it copied.

    The job is started and watched as a stream's is (:mod:`airmirror.replication.job_driver`): a batch whose copy
    job ran before has its attempts fenced first, a lost lease cancels the job and raises the loss, and a job that
    fails once the run lost its lease raises the loss (the other run superseded it), not the job's failure.  A dry
    run's plan cannot be run (``ValueError``)."""
    from airmirror.replication.spark.copy_job import spark_slots

    started = start_copy_job(
        flow,
        store,
        planned.stored_jobs,
        planned.ranges,
        lambda: spark_slots(spark()),
        chain=flow.stored_chain(planned.transforms),
    )
    if not started.tasks:
        return []
    planned.jobs = started.jobs
    job = watch_copy_job(store, spark(), started.tasks, f"airmirror-batch-{planned.batch_id}")
    job.raise_failure(store)
    return job.copied


def record_batch(flow: FlowConfig, store: MetadataStore, planned: PlannedBatch) -> BatchSummary:
    """Step 4: commit the batch's Kafka-committed results to the metadata DB, then run the after-commit
    actions.  A store fenced by the run's lease commits nothing once the lease is lost."""
    if planned.batch_id is None:
        raise ValueError("a dry-run plan cannot be recorded")
    committed = committed_batch(flow, planned.stored_jobs, planned.ranges, check_lease=store.check_lease)
    store_new_ids(flow, store, committed.runs.values())
    store.commit_batch(planned.batch_id, committed.results)
    after_commit(flow, store, committed)
    return BatchSummary(planned.batch_id, committed.results)


def copy_and_record(flow: FlowConfig, store: MetadataStore, planned: PlannedBatch, spark_factory: Any) -> BatchSummary:
    """Steps 3 and 4 of a stored batch in one process: the Spark job only when the batch plans offsets to copy
    (``spark_factory()`` is not called otherwise), then the commit."""
    if planned.offsets:
        warm_writers(flow)
        run_batch(flow, store, planned, spark_factory)
    return record_batch(flow, store, planned)


@dataclass
class ReplicateReport:
    """What one ``airmirror replicate`` did."""

    topics: TopicSyncReport
    planned: PlannedBatch
    summary: BatchSummary | None
    seconds: float


@runtime_checkable
class StartsEarly(Protocol):
    """A Spark session factory that can begin making its session before its first call."""

    def start(self) -> object: ...


def start_early(spark_factory: object) -> None:
    """Begin making the session now if the factory can (a
    :class:`~airmirror.replication.spark.session.BackgroundSession`); called once the run holds the flow's lease,
    so a run that loses the lease never starts Spark."""
    if isinstance(spark_factory, StartsEarly):
        spark_factory.start()


def replicate_once(
    flow: FlowConfig, store: MetadataStore, options: BatchOptions, spark_factory: Any, holder: str | None = None
) -> ReplicateReport:
    """All four steps in one process (the CLI); ``spark_factory()`` returns a SparkSession when needed
    (a :class:`~airmirror.replication.spark.session.BackgroundSession` is started once the lease is held).

    Unless it is a dry run, the run holds the flow's lease (:mod:`airmirror.store.flow_lease`) from before
    step 1 to the end: a second run of the flow fails at once, having changed nothing, and says which run
    holds the flow.  Stopped topics or partitions fail the run after everything else was copied.  The run shares
    one admin client per cluster (:func:`~airmirror.kafka.clients.shared_clients`)."""
    started = time.monotonic()
    holding = (
        nullcontext()
        if options.dry_run
        else store.hold_flow(flow.name, holder or describe_holder("airmirror replicate"))
    )
    with shared_clients(), holding as lease:
        fenced = store if lease is None else store.fenced_by(lease)
        start_early(spark_factory)
        topics = sync_flow_topics(flow, fenced, options)
        planned = plan_batch(flow, fenced, topics.mappings, options)
        summary = None if planned.batch_id is None else copy_and_record(flow, fenced, planned, spark_factory)
    if not options.dry_run:
        raise_for_stops(flow, store)
    return ReplicateReport(topics, planned, summary, time.monotonic() - started)
