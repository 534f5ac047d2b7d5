"""A batch's copy job, from start to end: the one driver loop that a bounded batch
(:func:`~airmirror.replication.pipeline.run_batch`) and a stream (:func:`~airmirror.replication.streaming.run_stream`)
both run.

Rules of :func:`start_copy_job`, in order:

1. **Supersede first**: a new job token is committed and every attempt of the batch's earlier jobs on its ranges is
   fenced (:func:`~airmirror.replication.spark.progress.supersede_jobs`), right after a lease check, so a run that
   lost its lease stops the owner's job never.
2. **Then the tasks**: the ranges with work left get their progress and their copy tasks
   (:func:`~airmirror.replication.spark.copy_job.plan_copy_tasks`), looked up from the batch's scan floor.
3. **Then the count**: the task count is stored only after the fencing, so whatever dies next, the next job fences
   this one's attempts (rule 3 of :mod:`airmirror.replication.spark.task_writer`); the store keeps the batch's log
   floor (:meth:`~airmirror.store.batches.BatchStore.set_copy_tasks`).

Rules of :func:`watch_copy_job`:

4. **The job runs in a thread** of the driver, in a Spark job group of its own, and the driver wakes every
   :data:`WAKE_INTERVAL_S` while it runs: a stream records then what its tasks committed (its ``each_interval``);
   a bounded batch records once, at its end.
5. **A lost lease ends the job at once**: the driver cancels the job group and raises the loss.  The run that took
   the flow over fenced these tasks, so none of them goes on copying, idle ones included.
6. **The driver never leaves a job behind**: whatever ends the wait (the job, ``each_interval``'s cancel, an
   error, a signal), the job group is cancelled unless the job ended, and the thread is joined before the driver
   goes on.  A cancelled job is cancelled again at every wake until it ended: Spark cancels a group's active jobs
   only, and the job thread may not have submitted its job yet.  A job that failed, and was not cancelled, raises
   its failure when the caller asks (:meth:`WatchedJob.raise_failure`), or the lease's loss if the run lost it
   meanwhile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airmirror.config import FlowConfig
from airmirror.config.transforms import TransformChain
from airmirror.model import BatchJobs, PlannedRange, RangeCopied, StoredJobs
from airmirror.replication.schema_sync import record_ids
from airmirror.store import MetadataStore

if TYPE_CHECKING:
    from airmirror.replication.spark.task_writer import CopyTask

log = logging.getLogger(__name__)


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


WAKE_INTERVAL_S = 0.5
"""How often the driver wakes while a copy job runs (rule 4)."""


@dataclass
class WatchedJob:
    """A copy job the driver runs in a thread (rule 4): what its tasks returned (``copied``), its failure, and whether
    the driver cancelled it."""

    spark: Any
    group: str
    copied: list[RangeCopied] = field(default_factory=list)
    error: BaseException | None = None
    cancelled: bool = False

    def cancel(self) -> None:
        """Cancel the job's Spark job group: its tasks are interrupted (fence them before reading the batch log).
        Asking again is harmless, and the driver does until the job ended (rule 6)."""
        self.cancelled = True
        self.spark.sparkContext.cancelJobGroup(self.group)

    def raise_failure(self, store: MetadataStore) -> None:
        """Raise the job's failure unless the driver cancelled it; the lease's loss instead once the run lost it
        (another run took the flow over and failed these tasks)."""
        if self.error is not None and not self.cancelled:
            store.raise_if_lease_lost()
            raise self.error


def watch_copy_job(
    store: MetadataStore,
    spark: Any,
    tasks: list[CopyTask],
    group: str,
    each_interval: Callable[[WatchedJob], None] = lambda job: None,
) -> WatchedJob:
    """Rules 4-6 for the copy ``tasks`` of a started job (:func:`start_copy_job`), in Spark job group ``group``:
    returns once the job ended, with what it copied or its failure (``each_interval`` may cancel it)."""
    from airmirror.replication.spark.copy_job import run_copy_job

    job = WatchedJob(spark, group)

    def run() -> None:
        try:
            job.copied = run_copy_job(spark, tasks, group)
        except BaseException as error:
            job.error = error

    thread = threading.Thread(target=run, name=group, daemon=True)
    thread.start()
    try:
        while _runs_on(thread):
            if (lost := store.lease_lost) is not None:
                raise lost  # rule 5
            if job.cancelled:
                job.cancel()  # again: a cancel made before the job was submitted cancelled nothing (rule 6)
            each_interval(job)
    finally:
        while thread.is_alive():
            try:
                job.cancel()
            except Exception as error:  # the driver is going down (a signal, the JVM gone): the job ends with it
                log.warning("copy job %s: cancelling failed: %s", group, error)
            thread.join(WAKE_INTERVAL_S)
    return job


def _runs_on(thread: threading.Thread) -> bool:
    """Whether ``thread`` still runs after waiting up to :data:`WAKE_INTERVAL_S` for it to end."""
    thread.join(WAKE_INTERVAL_S)
    return thread.is_alive()
