"""Where every range of a batch stands in Kafka, as the driver sees it (before and after the copy job).

The newest committed :class:`~airmirror.replication.spark.batch_log.Progress` of each partition comes from its
anchor when that is trusted, else from a scan of the batch log.  A read_committed scan cannot pass an open
transaction of another partition, and such a transaction can belong to an attempt that died (its own retry
would abort it, but may be waiting for a Spark slot held by the scan).  So before scanning a batch log that
holds an open transaction (its last stable offset is below its high watermark), the driver fences every
attempt of the batch's copy job (:func:`attempt_ids`): their open transactions are aborted and the scan never
waits on them.  The driver only reads progress while no copy job of the flow runs (the flow's lease guarantees
it).

**Only the lease holder fences.**  Every function here that commits a job token or fences attempts takes
``check_lease`` (the run's :meth:`~airmirror.store.engine.EngineHolder.check_lease`) and calls it right before, so a
run that lost its lease (a driver thawed after another run took the flow over) stops before it touches the owner's
copy job: it neither supersedes the owner's job nor fences its tasks.  (What a run does between that check and the
Kafka call costs the owner a retried job at worst, never a record twice: the owner's next round supersedes again,
and the stale run's next metadata-DB write fails: :mod:`airmirror.store.flow_lease`, fencing.)
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from airmirror import names
from airmirror.config import FlowConfig
from airmirror.kafka.authorization import access_scope, naming_refusals
from airmirror.kafka.clients import REQUEST_TIMEOUT_S, target_admin
from airmirror.model import BatchJobs, NoJobYet, PartitionKey, PerPartitionJobs, PlannedRange, StoredJobs, TaskJobs
from airmirror.replication.spark.batch_log import (
    Progress,
    commit_job,
    progress_key,
    read_progress,
    tombstone,
    while_log_is_new,
)
from airmirror.replication.spark.standing import Done, committed_by_batch, range_standing
from airmirror.replication.spark.task_writer import fence_attempts


def range_progress(
    flow: FlowConfig,
    ranges: list[PlannedRange],
    jobs: BatchJobs,
    scan_from: int | None,
    *,
    check_lease: Callable[[], None],
) -> dict[PartitionKey, Progress | None]:
    """The newest committed progress of every range that copies records, as far as it concerns the batch; a range
    without a trusted anchor is looked up in the batch log from ``scan_from`` on (a batch's
    :attr:`~airmirror.model.BatchJobs` ``scan_from``), after fencing the attempts of its ``jobs`` when an open
    transaction would hold the scan up."""
    copied = {(r.remote_topic, r.partition): (r.topic, r.partition) for r in ranges if r.size > 0}
    keys = [PartitionKey(topic, partition) for topic, partition in copied.values()]
    group, log_topic = names.anchor_group(flow.source, flow.target), names.batch_log_topic(flow.source)
    with naming_refusals(access_scope(flow, flow.target), group=group, topic=log_topic):
        found = read_progress(
            flow.target_client("consumer"),
            group,
            log_topic,
            flow.name,
            copied,
            scan_from,
            before_scan=lambda: fence_if_open(flow, keys, jobs, check_lease=check_lease),
        )
    return {PartitionKey(*copied[remote]): progress for remote, progress in found.items()}


def take_over(
    flow: FlowConfig,
    batch: StoredJobs,
    fenced: Iterable[PartitionKey],
    ranges: list[PlannedRange],
    *,
    check_lease: Callable[[], None],
) -> dict[PartitionKey, Progress | None]:
    """Take a stored batch over from whatever attempts of its jobs may still run: supersede them on the ``fenced``
    partitions (:func:`supersede_jobs`), then read where every range of ``ranges`` stands (:func:`range_progress`,
    from the batch's log floor)."""
    supersede_jobs(flow, fenced, batch.jobs, batch.batch_id, check_lease=check_lease)
    return range_progress(flow, ranges, batch.jobs, batch.jobs.scan_from, check_lease=check_lease)


def attempt_ids(flow: FlowConfig, keys: Iterable[PartitionKey], jobs: BatchJobs) -> list[str]:
    """The transactional ids under which attempts of the unfinished batch's ``jobs`` may still be at work on the
    source partitions ``keys``: none before its first job; the ids of its copy tasks (both of each:
    :func:`airmirror.names.copy_task_transactional_ids`); for a batch begun by an earlier airmirror, the
    per-partition ids of ``keys``.  The attempts of committed batches write nothing more (rule 3 of
    :mod:`airmirror.replication.spark.task_writer`)."""
    match jobs:
        case NoJobYet():
            return []
        case PerPartitionJobs():
            return [names.transactional_id(flow.source, flow.target, key.topic, key.partition) for key in keys]
        case TaskJobs(tasks=count):
            return [
                transactional_id
                for index in range(count)
                for transactional_id in names.copy_task_transactional_ids(flow.source, flow.target, index)
            ]


def supersede_jobs(
    flow: FlowConfig,
    keys: Iterable[PartitionKey],
    jobs: BatchJobs,
    batch_id: int | None,
    *,
    check_lease: Callable[[], None],
) -> str:
    """Make every earlier copy job of the flow write nothing more, and return the token of the job that may run next
    (:func:`~airmirror.replication.spark.batch_log.commit_job`): first commit a new job token (of ``batch_id``),
    which any later attempt of an earlier job reads and stops at, then fence every attempt of the unfinished batch
    that may be at work on these source partitions (:func:`attempt_ids` of its ``jobs``; see
    :func:`~airmirror.replication.spark.task_writer.fence_attempts`)."""
    job = f"{batch_id}-{uuid.uuid4().hex}"
    check_lease()
    group, log_topic = names.anchor_group(flow.source, flow.target), names.batch_log_topic(flow.source)
    with naming_refusals(access_scope(flow, flow.target), group=group):
        commit_job(flow.target_client("consumer"), group, log_topic, job)
    fence_ids(flow, attempt_ids(flow, keys, jobs))
    return job


def fence_partitions(
    flow: FlowConfig, keys: Iterable[PartitionKey], jobs: BatchJobs, *, check_lease: Callable[[], None]
) -> None:
    """Fence every copy attempt of the unfinished batch that may be at work on these source partitions
    (:func:`attempt_ids` of its ``jobs``; see
    :func:`~airmirror.replication.spark.task_writer.fence_attempts`).  Only :func:`supersede_jobs` also stops the
    later attempts of those jobs; this is for the driver's reads while no job runs."""
    ids = attempt_ids(flow, keys, jobs)
    if ids:
        check_lease()
        fence_ids(flow, ids)


def fence_ids(flow: FlowConfig, transactional_ids: list[str]) -> None:
    """Fence the attempts under these transactional ids of the flow's copy tasks
    (:func:`~airmirror.replication.spark.task_writer.fence_attempts`); the caller checked its lease."""
    fence_attempts(flow.target_client("producer"), transactional_ids, access_scope(flow, flow.target))


def forget_progress(flow: FlowConfig, topic: str, remote_topic: str, partitions: Iterable[int]) -> None:
    """``airmirror reset``: forget what the batch log says was copied of these partitions of ``topic``.  Their
    progress records are tombstoned and their anchors overwritten with an offset that carries no progress (so
    no anchor is trusted).  The next copy of the re-seeded topic then starts afresh instead of being refused
    as a target ahead of the metadata DB.  Call only after fencing every attempt at the partitions
    (:func:`supersede_jobs`).  A remote topic that no longer exists has no anchors to overwrite."""
    numbers = sorted(set(partitions))
    if not numbers:
        return
    tombstone(flow, [progress_key(flow.name, topic, p) for p in numbers])
    group = names.anchor_group(flow.source, flow.target)
    admin = target_admin(flow)
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(remote_topic, p, 0) for p in numbers])
    try:
        with naming_refusals(admin.access, group=group):
            admin.alter_consumer_group_offsets([request], request_timeout=REQUEST_TIMEOUT_S)[group].result()
    except KafkaException as error:
        if error.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise


def fence_if_open(
    flow: FlowConfig, keys: Iterable[PartitionKey], jobs: BatchJobs, *, check_lease: Callable[[], None]
) -> None:
    """Fence the attempts at ``keys`` when the flow's batch log holds an open transaction, or when the broker
    cannot say yet (a batch log created a moment ago): fencing is always safe."""
    if log_may_hold_open_transactions(flow):
        fence_partitions(flow, keys, jobs, check_lease=check_lease)


def log_end(flow: FlowConfig, level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED) -> int:
    """The batch log's end offset: its high watermark, or (read_committed) its last stable offset (asked again
    while the log is new: :func:`~airmirror.replication.spark.batch_log.while_log_is_new`)."""
    log = TopicPartition(names.batch_log_topic(flow.source), 0)
    admin = target_admin(flow)  # held until the answer came: a client dropped meanwhile would never answer

    def ask() -> int:
        try:
            end: int = (
                admin.list_offsets(
                    {log: OffsetSpec.latest()}, isolation_level=level, request_timeout=REQUEST_TIMEOUT_S
                )[log]
                .result()
                .offset
            )
            return end
        except KafkaException as error:
            if error.args[0].code() == KafkaError._NOENT:
                # A shared admin client may have cached the cluster before topic sync created the log; librdkafka
                # looks the leader up in that cache ("No leaders found") until its periodic refresh, minutes
                # later.  Refresh it for the log before the next attempt.
                admin.list_topics(log.topic, timeout=REQUEST_TIMEOUT_S)
            raise

    offset: int = while_log_is_new(ask)
    return offset


def log_may_hold_open_transactions(flow: FlowConfig) -> bool:
    """False only when the batch log's last stable offset equals its high watermark."""
    try:
        return log_end(flow, IsolationLevel.READ_COMMITTED) < log_end(flow)
    except KafkaException:
        return True


def untouched(
    ranges: list[PlannedRange], progress: dict[PartitionKey, Progress | None], batch_id: int
) -> list[PlannedRange]:
    """Ranges with records to copy of which batch ``batch_id`` has committed nothing yet
    (:func:`~airmirror.replication.spark.standing.range_standing`, as the driver sees it)."""
    return [
        r
        for r in ranges
        if r.size > 0 and not committed_by_batch(range_standing(batch_id, progress[r.key], start=r.start))
    ]


def unfinished(
    ranges: list[PlannedRange], progress: dict[PartitionKey, Progress | None], batch_id: int
) -> list[PlannedRange]:
    """Ranges with records to copy that batch ``batch_id`` has not finished
    (:func:`~airmirror.replication.spark.standing.range_standing`, as the driver sees it)."""
    return [
        r
        for r in ranges
        if r.size > 0 and not isinstance(range_standing(batch_id, progress[r.key], start=r.start), Done)
    ]
