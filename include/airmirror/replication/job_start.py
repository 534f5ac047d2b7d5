"""Starting a batch's copy job: the one driver step a bounded batch (:func:`~airmirror.replication.pipeline.run_batch`)
and a stream (:func:`~airmirror.replication.streaming.run_stream`) both run before their Spark job.

Rules of :func:`start_copy_job`, in order:

1. **Supersede first**: a new job token is committed and every attempt of the batch's earlier jobs on its ranges is
   fenced (:func:`~airmirror.replication.spark.progress.supersede_jobs`), right after a lease check, so a run that
   lost its lease stops the owner's job never.
2. **Then the tasks**: the ranges with work left get their progress and their copy tasks
   (:func:`~airmirror.replication.spark.copy_job.plan_copy_tasks`), looked up from the batch's scan floor.
3. **Then the count**: the task count is stored only after the fencing, so whatever dies next, the next job fences
   this one's attempts (rule 1 of :mod:`airmirror.replication.spark.task_writer`); the store keeps the batch's log
   floor (:meth:`~airmirror.store.batches.BatchStore.set_copy_tasks`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airmirror.config import FlowConfig
from airmirror.config.transforms import TransformChain
from airmirror.model import BatchJobs, PlannedRange, StoredJobs
from airmirror.replication.schema_sync import record_ids
from airmirror.store import MetadataStore

if TYPE_CHECKING:
    from airmirror.replication.spark.task_writer import CopyTask


@dataclass(frozen=True)
class StartedJob:
    """A copy job ready to run: its ``tasks`` (none when every range is done in Kafka) and the batch's ``jobs`` as
    stored now."""

    tasks: list[CopyTask]
    jobs: BatchJobs


def start_copy_job(
    flow: FlowConfig,
    store: MetadataStore,
    jobs: StoredJobs,
    ranges: list[PlannedRange],
    slots: Callable[[], int],
    *,
    stream_until: float | None = None,
    chain: TransformChain | None = None,
) -> StartedJob:
    """The module's rules for the stored batch whose jobs left ``jobs`` behind, copying ``ranges`` in at most
    ``slots()`` tasks (``stream_until``: a stream's, see :func:`~airmirror.replication.spark.copy_job.plan_copy_tasks`;
    ``chain``: the batch's transform chain, default the flow's)."""
    from airmirror.replication.spark.copy_job import plan_copy_tasks
    from airmirror.replication.spark.progress import supersede_jobs

    working = ranges if stream_until is not None else [r for r in ranges if r.size > 0]  # a stream's are all open
    job = supersede_jobs(flow, [r.key for r in working], jobs.jobs, jobs.batch_id, check_lease=store.check_lease)
    tasks = plan_copy_tasks(
        flow,
        jobs.batch_id,
        ranges,
        slots,
        job=job,
        scan_from=jobs.jobs.scan_from,
        stream_until=stream_until,
        record_ids=record_ids(flow, store, {r.topic: r.remote_topic for r in working}),
        chain=chain,
        recorded_remote_ids=store.remote_topic_ids(flow.name),
    )
    if not tasks:
        return StartedJob([], jobs.jobs)
    return StartedJob(tasks, store.set_copy_tasks(jobs.batch_id, len(tasks), tasks[0].log_end))
