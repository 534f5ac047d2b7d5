"""The Spark job of one batch: one Spark task per planned range reads the range and writes it transactionally.

Shape: the tasks of the ranges that have records to copy, parallelized into exactly one Spark partition
per range, so each Spark task receives only its own range (a function closing over every range's task would be
unpickled whole by every Spark task: work that grows with the square of the partition count).  Each task
opens a read_committed read of its range
(:class:`~airmirror.replication.spark.range_reader.RangeReader`), which yields the range's records as Arrow
record batches with key, value, headers, timestamp, partition and offset
(:data:`~airmirror.replication.spark.record_schema.RECORD_ARROW_SCHEMA`), and copies them in source order, in
bounded chunk transactions, with :func:`~airmirror.replication.spark.partition_writer.copy_range`.  A retried
task re-runs the same range under the same ``transactional.id``, fences the older attempt and continues
after its last committed chunk, which is what makes it exactly-once.  The job returns one summary per range; the
authoritative results are committed in Kafka's batch log and collected by the driver.

Why the records stay in the task's Python worker, rather than in a DataFrame of records produced by Spark's
Kafka connector or a Python data source and written by a second stage: both ends of the copy are
librdkafka clients (one translation of the MM2 client settings; transactions whose delivery reports give
the real downstream offsets; read_committed reads that stop exactly at the planned bound even when a range
ends in aborted records or markers, which Spark's Kafka connector does not promise).  A records DataFrame
between them carries every byte from Python into the JVM, converts it to rows, back to Arrow and into a
second Python worker.  Measured on 500,000 x 1 KiB records over 6 partitions on 2 cores
(``benchmarks/bench.py``), that copy took 13.5 s against 4.5 s here.  The job's own input and output are one
small value per range, so it is a plain RDD job: a DataFrame ``mapInArrow`` over range indexes starts
about 1 s later in a fresh session (Spark's Arrow classes load on first use).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from typing import Any

from pyspark import TaskContext
from pyspark.sql import SparkSession

from airmirror import names
from airmirror.config import FlowConfig
from airmirror.errors import ReplicationFailure
from airmirror.kafka.authorization import access_scope
from airmirror.kafka.clients import target_admin
from airmirror.kafka.topics import topic_ids
from airmirror.model import PlannedRange
from airmirror.replication.spark.partition_writer import PartitionTask, TransactionBounds, copy_range
from airmirror.replication.spark.progress import range_progress
from airmirror.replication.spark.task_buffer import TaskBuffer, bounded

log = logging.getLogger(__name__)
NEW_TOPIC_WAIT_S = 10.0


def transaction_bounds(flow: FlowConfig) -> TransactionBounds:
    """The flow's ``airmirror.transaction.max.*`` settings."""
    return TransactionBounds(flow.copy.transaction_max_records, flow.copy.transaction_max_bytes, flow.copy.transaction_max_seconds)


def remote_topic_ids(flow: FlowConfig, remote_topics: set[str]) -> dict[str, str]:
    """The ids of the remote topics the job writes; one still missing after :data:`NEW_TOPIC_WAIT_S` (a topic
    created a moment ago may not be known to every broker yet) fails the job before anything is written (a
    producer could otherwise create it with broker defaults)."""
    admin = target_admin(flow)
    ids = topic_ids(admin, remote_topics)
    deadline = time.monotonic() + NEW_TOPIC_WAIT_S
    while (missing := sorted(name for name, topic_id in ids.items() if topic_id is None)) and time.monotonic() < deadline:
        time.sleep(0.5)
        ids.update(topic_ids(admin, missing))
    if missing:
        raise ReplicationFailure(
            f"remote topics {', '.join(missing)} do not exist on cluster {flow.target}; the next run's topic sync "
            "stops them (see `airmirror status`)"
        )
    return {name: topic_id for name, topic_id in ids.items() if topic_id is not None}


def partition_tasks(flow: FlowConfig, batch_id: int, ranges: list[PlannedRange]) -> list[PartitionTask]:
    """One task per range that has records to copy and is not done in Kafka yet, in plan order; each carries
    the progress the driver found for it (see :mod:`airmirror.replication.spark.progress`) and the flow's
    ``airmirror.task.max.buffer.bytes``.  Client settings above their share of it are lowered here, with one
    warning each on the driver (:func:`~airmirror.replication.spark.task_buffer.bounded`)."""
    progress = range_progress(flow, ranges)
    ranges = [r for r in ranges if r.size > 0 and not ((p := progress[r.key]) is not None and p.batch_id == batch_id and p.done)]
    buffer = TaskBuffer(flow.copy.task_max_buffer_bytes)
    producer = bounded(flow.target_client("producer"), buffer.producer_limits(), f"{flow.target}.producer")
    consumer = flow.target_client("consumer")
    source_consumer = bounded(flow.source_client("consumer"), buffer.consumer_limits(), f"{flow.source}.consumer")
    bounds = transaction_bounds(flow)
    source_access, target_access = access_scope(flow, flow.source), access_scope(flow, flow.target)
    remote_ids = remote_topic_ids(flow, {r.remote_topic for r in ranges if r.size > 0})
    return [
        PartitionTask(
            flow=flow.name,
            batch_id=batch_id,
            topic=r.topic,
            partition=r.partition,
            start=r.start,
            end=r.end,
            remote_topic=r.remote_topic,
            transactional_id=names.transactional_id(flow.source, flow.target, r.topic, r.partition),
            anchor_group=names.anchor_group(flow.source, flow.target),
            log_topic=names.batch_log_topic(flow.source),
            bounds=bounds,
            source_topic_id=r.source_topic_id,
            remote_topic_id=remote_ids[r.remote_topic],
            resets=r.reset_from is not None,
            start_epoch=r.start_epoch,
            known=progress[r.key],
            source_access=source_access,
            target_access=target_access,
            buffer=buffer,
            producer_config=producer,
            target_consumer_config=consumer,
            source_consumer_config=source_consumer,
        )
        for r in ranges
    ]


def copy_tasks(tasks: Iterator[PartitionTask]) -> Iterator[dict[str, Any]]:
    """The per-partition function: copy the ranges of the tasks that arrive (one per Spark partition)."""
    context = TaskContext.get()
    first_attempt = context is not None and context.attemptNumber() == 0
    for task in tasks:
        yield copy_range(task, first_attempt)


AIRMIRROR_ERROR = re.compile(r"^airmirror\.errors\.\w+: (.+)$", re.MULTILINE)


def task_failure(error: Exception) -> Exception:
    """What to raise when the Spark job failed: the airmirror error a copy task raised (Spark wraps it in
    a Python worker traceback, repeated per attempt), else Spark's own error."""
    messages = AIRMIRROR_ERROR.findall(str(error))
    return ReplicationFailure(messages[-1]) if messages else error


def run_copy_job(spark: SparkSession, flow: FlowConfig, batch_id: int, ranges: list[PlannedRange]) -> list[dict]:
    """Copy every non-empty range of the batch; returns ``{topic, partition, records, bytes}`` per range."""
    tasks = partition_tasks(flow, batch_id, ranges)
    if not tasks:
        return []
    started = time.monotonic()
    try:
        rows = spark.sparkContext.parallelize(tasks, len(tasks)).mapPartitions(copy_tasks).collect()
    except Exception as error:
        raise task_failure(error) from error
    log.info(
        "copy job of batch %s: %d ranges, %d records, %d bytes in %.3f s",
        batch_id,
        len(tasks),
        sum(r["records"] for r in rows),
        sum(r["bytes"] for r in rows),
        time.monotonic() - started,
    )
    return rows
