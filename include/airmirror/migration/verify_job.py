"""The Spark job of ``airmirror verify``: one Spark task per replicated partition reads its source range and
its remote range and compares them record by record (:mod:`airmirror.migration.partition_compare`).

Both reads are read_committed :class:`~airmirror.replication.spark.range_reader.RangeReader` reads, the copy's
own read path, so records of aborted transactions and transaction markers are never compared.  A task holds
one Arrow batch per side at a time: memory does not grow with the partition.  A task whose topic's schema ids
the copy translated reads its source records through the driver's
:class:`~airmirror.migration.partition_compare.SchemaIdMap`; it calls no schema registry, but to read the schemas of
Avro sides that field transforms edit (and look up, never register, the schemas they derive).  The job changes
nothing on either cluster.  While it runs, the driver reports how many partitions are done every
:data:`PROGRESS_INTERVAL_S` through ``on_progress``.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field

from pyspark.sql import SparkSession

from airmirror.config.schema_registries import RegistryAccess
from airmirror.config.transforms import Step
from airmirror.kafka.authorization import AccessScope
from airmirror.kafka.clients import ClientConfig
from airmirror.migration.compared_record import Record
from airmirror.migration.partition_compare import Lost, SchemaIdMap, compare_partition, verdict_reason
from airmirror.model import OffsetRun, PartitionVerification
from airmirror.replication.spark.copy_job import task_failure
from airmirror.replication.spark.range_reader import RangeReader, headers_of, offset_of
from airmirror.replication.spark.record_transforms import RecordTransforms
from airmirror.schemas.avro_fields import AvroFields
from airmirror.schemas.registry_client import RegistryClient

log = logging.getLogger(__name__)
PROGRESS_INTERVAL_S = 1.0


@dataclass(frozen=True, kw_only=True)
class VerifyTask:
    """What one Spark task compares: source ``[source_start, source_end)`` with remote ``[target_start,
    target_end)`` through ``runs``; keys in source ``[source_end, source_later_end)`` may explain a source
    compaction; ``lost`` is what one side lost that only its ``retention.bytes`` may still explain;
    ``schema_ids`` how the copy translated the topic's schema ids (``None``: it copied them as they are),
    ``transforms`` the flow's transform steps for the topic, ``registries`` the source's and the target's registry when
    they edit fields of Avro sides (:mod:`airmirror.schemas.avro_fields`, read only), ``derives`` whether the copy
    registers derived schemas (ids ``translate``).  Plain data, so it pickles to executors; the client
    configurations and the id map are left out of the repr."""

    topic: str
    partition: int
    remote_topic: str
    runs: list[OffsetRun]
    source_start: int
    source_end: int
    source_later_end: int
    target_start: int
    target_end: int
    source_compacted: bool
    target_compacted: bool
    note: str
    lost: Lost | None
    source_access: AccessScope
    target_access: AccessScope
    source_consumer_config: ClientConfig = field(repr=False)
    target_consumer_config: ClientConfig = field(repr=False)
    schema_ids: SchemaIdMap | None = field(default=None, repr=False)
    transforms: tuple[Step, ...] = ()
    registries: tuple[RegistryAccess, RegistryAccess] | None = field(default=None, repr=False)
    derives: bool = True


def records_of(reader: RangeReader) -> Iterator[Record]:
    """The records ``reader`` reads, as :class:`~airmirror.migration.partition_compare.Record` values (straight
    from the consumed messages: no Arrow conversion and back)."""
    for messages in reader.messages():
        for message in messages:
            yield Record(
                offset_of(message), message.key(), message.value(), headers_of(message), message.timestamp()[1]
            )


def verify_partition(task: VerifyTask) -> PartitionVerification:
    """Compare one partition (see the module docstring)."""
    source_config, target_config = task.source_consumer_config, task.target_consumer_config
    avro = None
    if task.registries is not None:
        readers = (RegistryClient(access) for access in task.registries)
        avro = AvroFields(*readers, register=False, derives=task.derives)
    with (
        RangeReader(
            source_config, task.topic, task.partition, task.source_start, task.source_end, access=task.source_access
        ) as source,
        RangeReader(
            target_config,
            task.remote_topic,
            task.partition,
            task.target_start,
            task.target_end,
            access=task.target_access,
        ) as target,
    ):

        def source_later_keys() -> Iterator[bytes | None]:
            later = RangeReader(
                source_config,
                task.topic,
                task.partition,
                task.source_end,
                task.source_later_end,
                access=task.source_access,
            )
            with later:
                yield from (record.key for record in records_of(later))

        result = compare_partition(
            task.runs,
            records_of(source),
            records_of(target),
            source_compacted=task.source_compacted,
            target_compacted=task.target_compacted,
            source_later_keys=source_later_keys,
            lost=task.lost,
            schema_ids=task.schema_ids,
            transforms=RecordTransforms(task.transforms, task.remote_topic, task.partition, avro)
            if task.transforms
            else None,
        )
    if avro is not None:
        avro.close()
    note = task.note
    if task.lost is not None and task.lost.excused:
        excused = (
            f"{task.lost.records} records deleted from the {task.lost.side} only, below source offset "
            f"{task.lost.end}, explained by its retention.bytes, not compared"
        )
        note = "; ".join(part for part in (note, excused) if part)
    return PartitionVerification(
        **asdict(result),
        topic=task.topic,
        partition=task.partition,
        remote_topic=task.remote_topic,
        source_start=task.source_start,
        source_end=task.source_end,
        target_start=task.target_start,
        target_end=task.target_end,
        note=note,
        reason=verdict_reason(result, task.lost),
    )


def verify_tasks(tasks: list[VerifyTask]) -> Callable[[Iterable[int]], Iterator[PartitionVerification]]:
    """The per-partition function: verify the partitions whose indexes arrive (one per Spark partition)."""

    def verify(indexes: Iterable[int]) -> Iterator[PartitionVerification]:
        for index in indexes:
            yield verify_partition(tasks[index])

    return verify


def run_verify_job(
    spark: SparkSession, tasks: list[VerifyTask], on_progress: Callable[[int, int], None]
) -> list[PartitionVerification]:
    """Verify every task's partition, one Spark task each; ``on_progress(done, total)`` is called whenever the
    number of finished partitions changes, and once at the end."""
    if not tasks:
        return []
    context = spark.sparkContext
    started = time.monotonic()
    group = f"airmirror-verify-{uuid.uuid4().hex}"
    rows: list[PartitionVerification] = []
    failed: list[Exception] = []

    def collect() -> None:
        try:
            context.setJobGroup(group, f"airmirror verify of {len(tasks)} partitions")
            rows.extend(context.parallelize(range(len(tasks)), len(tasks)).mapPartitions(verify_tasks(tasks)).collect())
        except Exception as error:  # handed to the caller below
            failed.append(error)

    worker = threading.Thread(target=collect, name="airmirror-verify-job", daemon=True)
    worker.start()
    reported = -1
    while worker.is_alive():
        worker.join(PROGRESS_INTERVAL_S)
        done = finished_tasks(spark, group)
        if done != reported and worker.is_alive():
            on_progress(done, len(tasks))
            reported = done
    if failed:
        raise task_failure(failed[0]) from failed[0]
    on_progress(len(tasks), len(tasks))
    log.info(
        "verify job: %d partitions, %d source records, %d target records in %.3f s",
        len(rows),
        sum(r.source_records for r in rows),
        sum(r.target_records for r in rows),
        time.monotonic() - started,
    )
    return rows


def finished_tasks(spark: SparkSession, group: str) -> int:
    """How many tasks of the jobs of Spark job group ``group`` have finished."""
    tracker = spark.sparkContext.statusTracker()
    done = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job is not None else ():
            stage = tracker.getStageInfo(stage_id)
            done += stage.numCompletedTasks if stage is not None else 0
    return done
