"""The Spark job of one batch: the batch's ranges spread over at most as many copy tasks as Spark has slots.

Shape: the ranges that have records to copy and are not done in Kafka yet are spread over copy tasks by size
(:func:`spread`: the largest first, each to the task with the fewest offsets so far), at most one task per Spark
slot and never more tasks than ranges.  Each task copies all of its ranges with one read_committed consumer and
one transactional producer (:func:`~airmirror.replication.spark.task_writer.run_attempt`), so the job's fixed
work (fencing, producers, transactions, offset commits, Spark tasks) grows with the slots, not with the
partitions; a partition with nothing to copy is in no task.  The tasks are parallelized into exactly one Spark
partition each, so each Spark task receives only its own task (a function closing over every task would be
unpickled whole by every Spark task).  A retried Spark task re-runs the same copy task under the same
``transactional.id``, fences the older attempt and continues after its last committed chunk, which is what
makes it exactly-once.  The job returns one summary per range; the authoritative results are committed in
Kafka's batch log and collected by the driver.

Why the records stay in the task's Python worker, rather than in a DataFrame of records produced by Spark's
Kafka connector or a Python data source and written by a second stage: both ends of the copy are
librdkafka clients (one translation of the MM2 client settings; transactions whose delivery reports give
the real downstream offsets; read_committed reads that stop exactly at the planned bound even when a range
ends in aborted records or markers, which Spark's Kafka connector does not promise).  A records DataFrame
between them carries every byte from Python into the JVM, converts it to rows, back to Arrow and into a
second Python worker.  Measured on 500,000 x 1 KiB records over 6 partitions on 2 cores
(``benchmarks/bench.py``), that copy took 13.5 s against 4.5 s here.  The job's own input and output are a
few small values per task, so it is a plain RDD job.
"""

from __future__ import annotations

import heapq
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from confluent_kafka.admin import OffsetSpec
from pyspark.sql import SparkSession

from airmirror import names
from airmirror.config import FlowConfig
from airmirror.config.transforms import TransformChain
from airmirror.errors import ReplicationFailure
from airmirror.kafka.authorization import access_scope
from airmirror.kafka.clients import source_admin, target_admin
from airmirror.kafka.offsets import list_offsets
from airmirror.kafka.topic_ids import settled_topic_ids
from airmirror.model import NoJobYet, PartitionKey, PlannedRange, RangeCopied, ResetsCursor
from airmirror.replication.spark.progress import log_end, range_progress, unfinished
from airmirror.replication.spark.range_reader import OPEN_END
from airmirror.replication.spark.task_buffer import TaskBuffer, bounded
from airmirror.replication.spark.task_writer import CopyTask, RangeTask, TransactionBounds, run_tasks
from airmirror.schemas.record_ids import RecordIds

log = logging.getLogger(__name__)


def transaction_bounds(flow: FlowConfig, streaming: bool = False) -> TransactionBounds:
    """The flow's ``airmirror.transaction.max.*`` settings; a stream's chunks end within
    ``airmirror.live.transaction.max.ms`` of their first record (if that is sooner)."""
    seconds = float(flow.copy.transaction_max_seconds)
    if streaming:
        seconds = min(seconds, flow.copy.live_transaction_max_ms / 1000)
    return TransactionBounds(flow.copy.transaction_max_records, flow.copy.transaction_max_bytes, seconds)


def remote_topic_ids(flow: FlowConfig, remote_topics: set[str], recorded: Mapping[str, str]) -> dict[str, str]:
    """The ids of the remote topics the job writes; one still missing after
    :data:`~airmirror.kafka.clients.NEW_TOPIC_WAIT_S` (a topic created a moment ago may not be known to every
    broker yet) fails the job before anything is written (a producer could otherwise create it with broker
    defaults), and so does one whose id is not the one ``recorded`` in the metadata DB (the incarnation airmirror
    writes to: the topic was deleted and created again since the run's topic sync looked)."""
    ids = settled_topic_ids(target_admin(flow), remote_topics)
    if missing := sorted(name for name, topic_id in ids.items() if topic_id is None):
        raise ReplicationFailure(
            f"remote topics {', '.join(missing)} do not exist on cluster {flow.target}; the next run's topic sync "
            "stops them (see `airmirror status`)"
        )
    if recreated := sorted(name for name, topic_id in ids.items() if recorded.get(name, topic_id) != topic_id):
        raise ReplicationFailure(
            f"remote topics {', '.join(recreated)} on cluster {flow.target} were recreated since airmirror wrote to "
            "them; nothing is written, and the next round's topic sync stops them (see `airmirror status`)"
        )
    return {name: topic_id for name, topic_id in ids.items() if topic_id is not None}


def spread(ranges: list[PlannedRange], count: int) -> list[list[PlannedRange]]:
    """``ranges`` over ``count`` tasks (``count`` >= 1): the largest range first, each to the task with the fewest
    offsets so far (ties to the lowest task); each task's ranges in plan order.  Deterministic."""
    order = {r.key: index for index, r in enumerate(ranges)}
    tasks: list[list[PlannedRange]] = [[] for _ in range(count)]
    loads = [(0, index) for index in range(count)]
    for r in sorted(ranges, key=lambda r: (-r.size, order[r.key])):
        load, index = heapq.heappop(loads)
        tasks[index].append(r)
        heapq.heappush(loads, (load + r.size, index))
    return [sorted(task, key=lambda r: order[r.key]) for task in tasks if task]


def plan_copy_tasks(
    flow: FlowConfig,
    batch_id: int,
    ranges: list[PlannedRange],
    slots: Callable[[], int],
    job: str,
    scan_from: int | None,
    stream_until: float | None = None,
    record_ids: RecordIds | None = None,
    chain: TransformChain | None = None,
    *,
    recorded_remote_ids: Mapping[str, str],
) -> list[CopyTask]:
    """The copy tasks of the batch's ranges that have records to copy and are not done in Kafka yet, at most
    ``slots()`` of them (see the module docstring; asked last, after the reads of the batch log and the target,
    so a Spark session still starting overlaps them); each range carries the progress the driver found for it (see
    :mod:`airmirror.replication.spark.progress`; call it only after fencing the attempts of the batch's jobs
    before, as :func:`airmirror.replication.pipeline.run_batch` does) and each task the flow's
    ``airmirror.task.max.buffer.bytes``.  Client settings above their share of it are
    lowered here, with one warning each on the driver (:func:`~airmirror.replication.spark.task_buffer.bounded`).
    ``job`` is the token the driver committed for this job
    (:func:`~airmirror.replication.spark.progress.supersede_jobs`).  ``scan_from`` is where a range without a
    trusted anchor is looked up in the batch log (the batch's :data:`~airmirror.model.BatchJobs` ``scan_from``); a
    task's retries look up from there too, or, in the batch's first job (``None``), from the log's end before it.
    With ``stream_until`` (a stream batch, :mod:`airmirror.replication.streaming`), every range is open and in a
    task, which streams until then and at least up to the source's last stable offsets of now (rule 14 of
    :mod:`airmirror.replication.spark.task_writer`).  ``record_ids`` (``airmirror.schema.ids`` not ``off``, see
    :func:`airmirror.replication.schema_sync.record_ids`) goes to every task, and each range gets the steps of
    ``chain`` (default: the flow's) for its topic (:meth:`~airmirror.config.FlowConfig.transform_steps`).
    ``recorded_remote_ids`` are the remote topic ids the metadata DB holds (:func:`remote_topic_ids`)."""
    catch_up: dict[PartitionKey, int] = {}
    if stream_until is not None:
        ranges = [replace(r, end=OPEN_END) for r in ranges]
        leaderless: dict[PartitionKey, str] = {}  # streamed all the same, without a catch-up to reach
        catch_up = list_offsets(source_admin(flow), [r.key for r in ranges], OffsetSpec.latest(), waiting=leaderless)
    # The attempts before were fenced: nothing is fenced before a scan, and no lease checked.
    progress = range_progress(flow, ranges, NoJobYet(), scan_from, check_lease=lambda: None)
    ranges = unfinished(ranges, progress, batch_id)
    if not ranges:
        return []
    buffer = TaskBuffer(flow.copy.task_max_buffer_bytes)
    producer = bounded(flow.target_client("producer"), buffer.producer_limits(), f"{flow.target}.producer")
    consumer = flow.target_client("consumer")
    source_consumer = bounded(flow.source_client("consumer"), buffer.consumer_limits(), f"{flow.source}.consumer")
    bounds = transaction_bounds(flow, streaming=stream_until is not None)
    source_access, target_access = access_scope(flow, flow.source), access_scope(flow, flow.target)
    remote_ids = remote_topic_ids(flow, {r.remote_topic for r in ranges}, recorded_remote_ids)
    steps = {topic: flow.transform_steps(topic, chain) for topic in {r.topic for r in ranges}}
    end = log_end(flow)
    return [
        CopyTask(
            flow=flow.name,
            batch_id=batch_id,
            transactional_ids=names.copy_task_transactional_ids(flow.source, flow.target, index),
            anchor_group=names.anchor_group(flow.source, flow.target),
            log_topic=names.batch_log_topic(flow.source),
            log_end=end,
            scan_from=end if scan_from is None else scan_from,
            job=job,
            bounds=bounds,
            ranges=tuple(
                RangeTask(
                    topic=r.topic,
                    partition=r.partition,
                    start=r.start,
                    end=r.end,
                    remote_topic=r.remote_topic,
                    source_topic_id=r.source_topic_id,
                    remote_topic_id=remote_ids[r.remote_topic],
                    resets=isinstance(r.begins, ResetsCursor),
                    start_epoch=r.start_epoch,
                    known=progress[r.key],
                    catch_up=catch_up.get(r.key),
                    transforms=steps[r.topic],
                )
                for r in task_ranges
            ),
            source_access=source_access,
            target_access=target_access,
            buffer=buffer,
            producer_config=producer,
            target_consumer_config=consumer,
            target_admin_config=flow.target_client("admin"),
            source_consumer_config=source_consumer,
            stream_until=stream_until,
            record_ids=record_ids,
            skip_failed_records=flow.copy.skip_failed_records,
            dead_letter_topic=flow.copy.dead_letter_topic,
            dead_letter_headers=flow.copy.dead_letter_headers,
        )
        for index, task_ranges in enumerate(spread(ranges, max(1, min(slots(), len(ranges)))))
    ]


AIRMIRROR_ERROR = re.compile(r"^airmirror\.errors\.\w+: (.+)$", re.MULTILINE)
WORKER_ERROR = re.compile(r"^((?:\w+\.)*\w*(?:Error|Exception)): (.+)$", re.MULTILINE)
"""The last line of a Python traceback: the exception a worker raised, with its module path."""
CAUSE_CHARS = 500


def task_failure(error: Exception) -> ReplicationFailure:
    """What to raise when the Spark job failed: the airmirror error a copy task raised (Spark wraps it in
    a Python worker traceback, repeated per attempt), else a :class:`~airmirror.errors.ReplicationFailure` naming
    the last exception a worker raised (or the first line of Spark's error), so that a live run retries the job
    (rule 8 of :mod:`airmirror.replication.continuous`) and a single run says in one line what failed."""
    text = str(error)
    messages = AIRMIRROR_ERROR.findall(text)
    if messages:
        return ReplicationFailure(messages[-1])
    causes = WORKER_ERROR.findall(text)
    lines = text.strip().splitlines()
    cause = ": ".join(causes[-1]) if causes else lines[0] if lines else type(error).__name__
    return ReplicationFailure(
        f"the Spark job failed: {cause[:CAUSE_CHARS]} (the Spark driver's log has the whole trace)"
    )


def spark_slots(spark: SparkSession) -> int:
    """How many tasks the Spark application runs at once: its default parallelism."""
    slots: int = spark.sparkContext.defaultParallelism
    return slots


def run_copy_job(spark: SparkSession, tasks: list[CopyTask], job_group: str | None = None) -> list[RangeCopied]:
    """Run the copy tasks (:func:`plan_copy_tasks`); returns what each range's last attempt copied.  With
    ``job_group``, the job runs in that Spark job group, which ``SparkContext.cancelJobGroup`` can cancel (its
    tasks are interrupted: the caller must fence their transactional ids before trusting the batch log)."""
    if not tasks:
        return []
    started = time.monotonic()
    context = spark.sparkContext
    if job_group is not None:
        context.setJobGroup(job_group, f"copy tasks of batch {tasks[0].batch_id}", interruptOnCancel=True)
    try:
        rows: list[RangeCopied] = context.parallelize(tasks, len(tasks)).mapPartitions(run_tasks).collect()
    except Exception as error:
        raise task_failure(error) from error
    log.info(
        "copy job of batch %s: %d ranges, %d records, %d bytes in %.3f s (%d copy tasks)",
        tasks[0].batch_id,
        len(rows),
        sum(r.records for r in rows),
        sum(r.bytes for r in rows),
        time.monotonic() - started,
        len(tasks),
    )
    return rows
