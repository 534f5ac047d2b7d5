"""Streaming live runs: copy tasks that stay up for the run's window, recorded in the metadata DB as they go.

A live run's batches (``replicate --continuous`` without bounds, ``airmirror.live = true``) are *stream
batches* (:mod:`airmirror.store.streams`).  Rules:

1. A stream batch holds every partition of the run's topics, with an empty range at its cursor (a partition
   with nothing to copy yet is in it: records may arrive), and is stored before anything is copied.
2. Its copy job runs one streaming copy task per Spark slot until ``until`` (rule 14 of
   :mod:`airmirror.replication.spark.task_writer`), started and watched as a bounded batch's is
   (:mod:`airmirror.replication.job_driver`).
3. Each time the driver wakes, it reads the batch log's tail (:class:`StreamTail`, from the log's end before the
   job) and records what the tasks committed since (:meth:`~airmirror.store.streams.StreamStore.record_stream`:
   cursors, offset-sync runs, totals, the schema ids the runs records carry).  The after-commit actions follow
   (offset syncs, runs tombstones, throttled prune).  Those that only report where the copy stands
   (:data:`~airmirror.replication.recording.SAMPLED`: lag samples, source group offsets, heartbeat latency) run
   every :data:`SAMPLE_INTERVAL_S` and at the end, on each moved partition's newest recording.
   The copy never waits for the DB: a failed recording is logged and made at the next wake, from the same tail.
   A failed DB commit may have committed all the same (the connection dropped after the commit was sent), so the
   next recording first reads what the DB holds (:meth:`StreamRecorder.reconcile`).
4. The stream ends at ``until``, or early when ``stop`` is set or ``should_stop()`` is true (the run's topics
   changed), or once a partition's read ended because its source log moved from under it (retention deleted what
   it had yet to read, or an unclean leader election made it diverge; the other partitions stream on until then,
   and the next stream plans it again: from the log start with the deleted offsets as a gap, or from the divergence
   point): its job group is cancelled.  Either way the driver then fences every task id, so no attempt can
   commit after that, and reads the batch log to its end: each partition's newest committed progress is final.
   It records the rest with ``final``, which commits the batch.
5. A stream batch that a dead driver left RUNNING is closed the same way by the next run before it plans
   (:func:`close_stream`), from the batch log's progress and a scan of its runs records.
6. A driver that lost its flow lease cancels its job at once and raises the loss (rule 5 of
   :mod:`~airmirror.replication.job_driver`): the run that took the flow over closed this batch by rule 5.  The
   store is fenced by the lease (:mod:`airmirror.store.flow_lease`), so no recording, closing or end of the stream
   writes the DB, supersedes a job or fences a task after the loss.

So every record the tasks committed in Kafka is recorded in the DB exactly once, whatever stops the stream.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from confluent_kafka import KafkaException
from sqlalchemy.exc import SQLAlchemyError

from airmirror import names
from airmirror.config import FlowConfig
from airmirror.errors import ReplicationFailure
from airmirror.model import NoJobYet, PartitionKey, PlannedRange, RangeResult, StoredJobs
from airmirror.replication.job_driver import WatchedJob, start_copy_job, watch_copy_job
from airmirror.replication.recording import EVERY_RECORDING, SAMPLED, CommittedBatch, after_commit, progress_result
from airmirror.replication.schema_sync import store_new_ids
from airmirror.replication.spark.batch_log import (
    LogReader,
    Progress,
    RunsRecord,
    decode_runs,
    log_watermarks,
    progress_key,
    runs_prefixes,
    runs_source,
    scan_runs,
)
from airmirror.replication.spark.progress import supersede_jobs, take_over
from airmirror.replication.spark.range_reader import OPEN_END
from airmirror.replication.spark.standing import Done, PartCopied, range_standing
from airmirror.store import FlowBusyError, MetadataStore

log = logging.getLogger(__name__)

SAMPLE_INTERVAL_S = 5.0
"""How often a stream samples its partitions' lag, heartbeat latency and positions for the source group (rule
3): each sample reads the clusters, and the lag history keeps one row per partition per sample."""


class StreamTail:
    """The batch log read as the tasks of stream batch ``batch_id`` commit (rule 3): the newest progress and
    the runs records of each of its partitions, from ``from_offset`` on."""

    def __init__(self, flow: FlowConfig, batch_id: int, ranges: Iterable[PlannedRange], from_offset: int) -> None:
        self.batch_id = batch_id
        self.log_topic = names.batch_log_topic(flow.source)
        keys = [r.key for r in ranges]
        self._progress_keys = {progress_key(flow.name, key.topic, key.partition): key for key in keys}
        self._prefixes = {
            prefix: PartitionKey(*source)
            for prefix, source in runs_prefixes(flow.name, batch_id, [(k.topic, k.partition) for k in keys]).items()
        }
        self.latest: dict[PartitionKey, Progress] = {}
        self.runs: dict[PartitionKey, list[RunsRecord]] = {}
        self._flow, self._consumer_config = flow.name, flow.target_client("consumer")
        self._reader = LogReader(self._consumer_config, self.log_topic, from_offset)

    def read(self) -> None:
        """Take in what the log holds now."""
        while (records := self._reader.take(0.0)) is not None:
            for key, value, _ in records:
                self._take(key, value)

    def _take(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            return
        if (partition := self._progress_keys.get(key)) is not None:
            progress = Progress.decode(value)
            if progress is not None and progress.batch_id == self.batch_id:
                self.latest[partition] = progress
        elif (source := runs_source(self._prefixes, key)) is not None:
            self.runs.setdefault(source, []).append(decode_runs(value))

    def ended(self) -> list[PartitionKey]:
        """The partitions whose newest progress says ``done``: in a stream, only those whose source log moved from
        under the read (rule 16 of :mod:`airmirror.replication.spark.task_writer`)."""
        return sorted(key for key, progress in self.latest.items() if progress.done)

    def drain(self) -> None:
        """Read up to the log's high watermark as it is now (call it after fencing the stream's tasks)."""
        _, high = log_watermarks(self._consumer_config, self.log_topic)
        for key, value, _ in self._reader.read_to(high):
            self._take(key, value)

    def deltas(
        self, recorded: Mapping[PartitionKey, RangeResult]
    ) -> tuple[list[RangeResult], dict[PartitionKey, list[RunsRecord]]]:
        """What the partitions copied since ``recorded``, and the runs records that hold it.  Should the tail lack
        some of a partition's runs, they are read again from the log (a scan from the stream's first runs)."""
        deltas, used = [], {}
        for key, progress in self.latest.items():
            if progress.position > recorded[key].end:
                records = [r for r in self.runs.get(key, []) if r.chunk <= progress.chunk]
                try:
                    delta = progress_result(recorded[key], progress, records)
                except ReplicationFailure as error:
                    log.warning("%s; reading its runs again from the batch log", error)
                    records = self._scan(key, progress)
                    delta = progress_result(recorded[key], progress, records)
                deltas.append(delta)
                used[key] = records
        return deltas, used

    def _scan(self, key: PartitionKey, progress: Progress) -> list[RunsRecord]:
        source = (key.topic, key.partition)
        return [
            r
            for r in scan_runs(self._consumer_config, self.log_topic, self._flow, self.batch_id, {source: progress})[
                source
            ]
            if r.chunk <= progress.chunk
        ]

    def forget(self, used: Mapping[PartitionKey, list[RunsRecord]]) -> None:
        """Drop runs records once they are recorded."""
        for key, records in used.items():
            taken = {(r.chunk, r.part) for r in records}
            self.runs[key] = [r for r in self.runs.get(key, []) if (r.chunk, r.part) not in taken]

    def close(self) -> None:
        self._reader.close()


class StreamRecorder:
    """Records a stream batch's deltas in the DB and runs the after-commit actions on them (rule 3)."""

    def __init__(
        self,
        flow: FlowConfig,
        store: MetadataStore,
        batch_id: int,
        ranges: list[PlannedRange],
        on_record: Callable[[list[RangeResult]], None] | None,
    ) -> None:
        self.flow, self.store, self.batch_id, self.on_record = flow, store, batch_id, on_record
        self.planned = {r.key: r for r in ranges}
        self.recorded = store.stream_recorded(batch_id)
        self.unsampled: dict[PartitionKey, RangeResult] = {}
        self.sampled_at = time.monotonic()
        self.uncertain: tuple[list[RangeResult], Mapping[PartitionKey, list[RunsRecord]]] | None = None
        """The deltas and runs of the last recording, while its DB commit failed and may have committed."""

    def record(
        self, deltas: list[RangeResult], runs: Mapping[PartitionKey, list[RunsRecord]], final: bool = False
    ) -> None:
        """Record ``deltas`` (with ``final``, commit the batch); then the after-commit actions, but for the partitions
        stopped meanwhile, which record nothing (:mod:`airmirror.store.streams`).  A failed DB
        commit is raised, and :meth:`reconcile` must run before the next recording; so is a lost lease (the store's
        guard refused the recording: nothing was written)."""
        if deltas or final:
            store_new_ids(self.flow, self.store, runs.values())
            try:
                stopped = self.store.record_stream(self.batch_id, deltas, final=final)
            except FlowBusyError:
                raise
            except ReplicationFailure:
                if deltas:
                    self.uncertain = (deltas, runs)
                raise
            deltas = [d for d in deltas if PartitionKey(d.topic, d.partition) not in stopped]
            runs = {key: records for key, records in runs.items() if key not in stopped}
        self.after_recording(deltas, runs, final)

    def reconcile(self) -> Mapping[PartitionKey, list[RunsRecord]]:
        """After a recording whose DB commit failed: read what the DB recorded; if it holds that recording
        (its transaction committed all the same), finish it as :meth:`record` would have.  Returns the runs
        records the DB now holds, which the tail can forget (none if the recording did not commit).  Raises
        what the DB read raises, and then must run again."""
        if self.uncertain is None:
            return {}
        stored = self.store.stream_recorded(self.batch_id)
        deltas, runs = self.uncertain
        self.uncertain = None
        # A delta is never empty, so one that stands recorded proves the transaction committed (a stopped one never
        # does: it records nothing).
        landed = [d for d in deltas if stored[PartitionKey(d.topic, d.partition)].end == d.end]
        if not landed:
            log.warning("stream batch %s: the failed recording did not commit; recording it again", self.batch_id)
            return {}
        log.warning("stream batch %s: the failed recording committed after all; going on from it", self.batch_id)
        keys = {PartitionKey(d.topic, d.partition) for d in landed}
        runs = {key: records for key, records in runs.items() if key in keys}
        self.after_recording(landed, runs)
        return runs

    def after_recording(
        self, deltas: list[RangeResult], runs: Mapping[PartitionKey, list[RunsRecord]], final: bool = False
    ) -> None:
        """What follows a recording the DB committed: the recorder's view of it, then the after-commit actions."""
        for delta in deltas:
            key = PartitionKey(delta.topic, delta.partition)
            before = self.recorded[key]
            self.recorded[key] = replace(
                before,
                end=delta.end,
                records=before.records + delta.records,
                bytes=before.bytes + delta.bytes,
                schema_passed=before.schema_passed + delta.schema_passed,
                filtered=before.filtered + delta.filtered,
                skipped=before.skipped + delta.skipped,
            )
            self.unsampled[key] = delta
        if deltas:
            planned = [self.planned[PartitionKey(d.topic, d.partition)] for d in deltas]
            committed = CommittedBatch(
                self.batch_id, planned, deltas, {(k.topic, k.partition): v for k, v in runs.items()}
            )
            after_commit(self.flow, self.store, committed, EVERY_RECORDING)
            if self.on_record is not None:
                self.on_record(deltas)
        if self.unsampled and (final or time.monotonic() - self.sampled_at >= SAMPLE_INTERVAL_S):
            self.sample()

    def sample(self) -> None:
        """Run :data:`~airmirror.replication.recording.SAMPLED` on the newest position of every partition
        recorded since the last sample."""
        newest = list(self.unsampled.values())
        after_commit(
            self.flow,
            self.store,
            CommittedBatch(self.batch_id, [self.planned[k] for k in self.unsampled], newest, {}),
            SAMPLED,
        )
        self.unsampled.clear()
        self.sampled_at = time.monotonic()

    def record_tail(self, tail: StreamTail, final: bool = False) -> None:
        """Record what ``tail`` read since the last recording (after :meth:`reconcile`)."""
        tail.forget(self.reconcile())
        deltas, used = tail.deltas(self.recorded)
        self.record(deltas, used, final)
        tail.forget(used)


def run_stream(
    flow: FlowConfig,
    store: MetadataStore,
    batch_id: int,
    ranges: list[PlannedRange],
    spark: Any,
    until: float,
    *,
    stop: threading.Event,
    should_stop: Callable[[], bool] = lambda: False,
    on_record: Callable[[list[RangeResult]], None] | None = None,
) -> None:
    """Rules 2-4 for the stored stream batch ``batch_id`` (``until`` in epoch seconds); ``on_record`` gets the
    deltas of every recording (none are kept: a stream's recordings are unbounded in number).  A failed copy
    job is raised once the stream is closed (the next round streams again)."""
    from airmirror.replication.spark.copy_job import spark_slots

    jobs = StoredJobs(batch_id, NoJobYet())  # a stream batch runs one job, right after it was stored (rule 1)
    started = start_copy_job(flow, store, jobs, ranges, lambda: spark_slots(spark), stream_until=until)
    recorder = StreamRecorder(flow, store, batch_id, ranges, on_record)
    tail = StreamTail(flow, batch_id, ranges, started.tasks[0].log_end)

    def record(job: WatchedJob) -> None:
        if stop.is_set() or should_stop():
            log.info("stream batch %s of %s: stopping early", batch_id, flow.name)
            job.cancel()
        try:
            tail.read()
            recorder.record_tail(tail)
        except FlowBusyError:
            raise  # the lease is lost: another run owns the flow (and fences these tasks)
        except (ReplicationFailure, SQLAlchemyError, KafkaException) as error:
            log.warning("stream batch %s of %s: recording failed, trying again: %s", batch_id, flow.name, error)
            return
        if (ended := tail.ended()) and not job.cancelled:
            log.warning(
                "stream batch %s of %s: the source log of %s moved from under the copy (retention deleted what it had "
                "yet to read, or an unclean leader election made it diverge); ending the stream so that the next one "
                "plans them again from there",
                batch_id,
                flow.name,
                ", ".join(f"{key.topic}-{key.partition}" for key in ended),
            )
            job.cancel()

    try:
        job = watch_copy_job(store, spark, started.tasks, f"airmirror-stream-{batch_id}", record)
        supersede_jobs(flow, [r.key for r in ranges], started.jobs, batch_id, check_lease=store.check_lease)
        tail.drain()
        recorder.record_tail(tail, final=True)
    finally:
        tail.close()
    job.raise_failure(store)


def close_stream(flow: FlowConfig, store: MetadataStore, batch: StoredJobs, ranges: list[PlannedRange]) -> None:
    """Rule 5: commit the stream ``batch`` a dead driver left RUNNING (its ``ranges`` as stored), with what its
    tasks committed in Kafka."""
    batch_id = batch.batch_id
    recorder = StreamRecorder(flow, store, batch_id, ranges, None)
    open_ranges = [replace(r, end=OPEN_END) for r in ranges]
    found = take_over(flow, batch, [r.key for r in ranges], open_ranges, check_lease=store.check_lease)
    moved = {
        key: standing.progress
        for key, p in found.items()
        if isinstance(standing := range_standing(batch_id, p, start=recorder.recorded[key].start), PartCopied | Done)
        and standing.progress.position > recorder.recorded[key].end
    }
    runs = scan_runs(
        flow.target_client("consumer"),
        names.batch_log_topic(flow.source),
        flow.name,
        batch_id,
        {(k.topic, k.partition): p for k, p in moved.items()},
    )
    used = {key: runs[(key.topic, key.partition)] for key in moved}
    deltas = [progress_result(recorder.recorded[key], progress, used[key]) for key, progress in moved.items()]
    log.warning(
        "closing stream batch %s of %s: %d partitions copied records since it was last recorded",
        batch_id,
        flow.name,
        len(deltas),
    )
    recorder.record(deltas, used, final=True)


def stream_ranges(ranges: Iterable[PlannedRange]) -> list[PlannedRange]:
    """A stream batch's ranges as stored: empty, at the planned start (rule 1)."""
    return [replace(r, end=r.start) for r in ranges]


def stream_until(now: float, deadline: float | None, window: float) -> float:
    """When a stream begun ``now`` ends: at the run's ``deadline`` (monotonic), else after ``window`` seconds;
    in epoch seconds (the copy tasks may run on other hosts)."""
    seconds = window if deadline is None else min(window, deadline - now)
    return time.time() + max(0.0, seconds)
