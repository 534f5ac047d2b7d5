"""The Spark job of one batch: read the planned ranges as a DataFrame, write each range transactionally.

The DataFrame comes from :mod:`~airmirror.replication.kafka_range_source` with one Spark partition per
planned range (ranges with nothing to copy are left out).  ``mapInArrow`` is a narrow transformation, so
Spark partition ``i`` of the writer sees exactly the records of range ``i``, in source order, and copies
them with :func:`~airmirror.replication.partition_writer.copy_partition`.  The job returns per-range
counts only; the authoritative results are committed in Kafka's batch log and collected by the driver.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import SparkSession

from airmirror.config import FlowConfig
from airmirror.model import PlannedRange
from airmirror.replication.batch_log import anchor_group, batch_log_topic
from airmirror.replication.kafka_range_source import SOURCE_NAME
from airmirror.replication.partition_writer import COPY_SUMMARY_DDL, PartitionTask, copy_partition_batches


def transactional_id(flow: FlowConfig, topic: str, partition: int) -> str:
    """Deterministic per flow and source partition, so every attempt fences the previous one."""
    return f"airmirror-{flow.source}-{flow.target}-{topic}-{partition}"


def partition_tasks(flow: FlowConfig, batch_id: int, ranges: list[PlannedRange]) -> list[PartitionTask]:
    """One task per range that has records to copy, in plan order."""
    producer = flow.target_client("producer")
    consumer = flow.target_client("consumer")
    return [
        PartitionTask(
            flow=flow.name,
            batch_id=batch_id,
            topic=r.topic,
            partition=r.partition,
            start=r.start,
            end=r.end,
            remote_topic=r.remote_topic,
            transactional_id=transactional_id(flow, r.topic, r.partition),
            anchor_group=anchor_group(flow.source, flow.target),
            log_topic=batch_log_topic(flow.source),
            producer_config=producer,
            target_consumer_config=consumer,
        )
        for r in ranges
        if r.size > 0
    ]


def run_copy_job(spark: SparkSession, flow: FlowConfig, batch_id: int, ranges: list[PlannedRange]) -> list[dict]:
    """Copy every non-empty range of the batch; returns ``{topic, partition, records, bytes}`` per range."""
    tasks = partition_tasks(flow, batch_id, ranges)
    if not tasks:
        return []
    frame = (
        spark.read.format(SOURCE_NAME)
        .option("consumer", json.dumps(flow.source_client("consumer")))
        .option("ranges", json.dumps([[t.topic, t.partition, t.start, t.end] for t in tasks]))
        .load()
    )

    def copy(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        context = TaskContext.get()
        assert context is not None
        yield from copy_partition_batches(tasks[context.partitionId()], batches)

    rows = frame.mapInArrow(copy, COPY_SUMMARY_DDL).collect()
    return [row.asDict() for row in rows]
