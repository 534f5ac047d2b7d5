"""Continuous replication: bounded batches back to back in one process, on one warm Spark session.

Contract:
1. Every batch is an ordinary batch of :mod:`airmirror.replication.pipeline`: planned up to the last stable
   offset at planning time (or the caller's bounds), stored before anything is copied, copied and committed
   by the same exactly-once protocol.  A run killed at any point leaves at most one unfinished batch, which
   the next run (continuous or not) resumes exactly once.
2. The flow's lease is held from the first batch to the end, so no other run works on the flow meanwhile.  Every
   round works through the store fenced by it (:mod:`airmirror.store.flow_lease`, fencing); the loop stops at the
   first sign of its loss: before each round (what the renewals found), and after a failed round, which is retried
   only once a renewal proved the lease still held (a run that lost the flow sees its jobs fail as superseded).
3. Topic sync (step 1) runs before the first batch and then at most every :data:`TOPIC_SYNC_INTERVAL_S`, and
   again right after a failed round (:meth:`TopicSync.expire`): new topics and partitions join within that time,
   and a remote topic recreated under a stream is stopped by the round after the one it failed.
4. ``start_from`` applies to the first batch only; every later batch starts where the one before ended.
5. A plan with nothing to copy stores no batch and starts no Spark job; the loop waits :data:`IDLE_WAIT_S`
   before planning again.  ``spark_factory`` is called for the first batch that copies records and its
   session serves every later batch, warm.
6. Stopping: once ``duration`` has passed since the start, or once ``stop`` is set (the first SIGTERM or
   SIGINT under :class:`StopOnSignals`), the loop ends after the batch in flight is committed; no batch
   starts after that.  A second signal ends the process at once (exit code ``128 + signal``).
7. Stopped topics or partitions (:mod:`airmirror.replication.incarnations`) fail the run at its end, after
   everything else was copied, as a single run does.
8. A failure of one round (topic sync, plan, copy or record) that the next round may not meet (a broker
   restart, a leader change, a coordinator move, a metadata DB briefly unreachable, a failed copy job) is
   retried with the product's pause (:data:`~airmirror.kafka.retry.RETRY_PAUSE_S`, doubling to
   :data:`RETRY_PAUSE_MAX_S`): the next round resumes the unfinished batch exactly once.  The budget counts
   failures in a row, not the run's age: a round that succeeds, or a stream round that recorded a copy before it
   failed, ends the row, and a failure after it starts a new one.  The run ends only when a row holds at least
   :data:`RETRY_ROUNDS` failures over at least :data:`RETRY_WINDOW_S`, or on a failure no retry cures (bad input,
   a missing ACL, a lost lease).
9. The run shares one admin client per cluster (:func:`~airmirror.kafka.clients.shared_clients`), dropped at
   its end: nothing it builds grows with the rounds it runs.
10. **Streaming.**  A run without bounds (no ``until``, no record cap) copies in *stream batches*
    (:mod:`airmirror.replication.streaming`) rather than in bounded ones: a round stores one stream batch of
    every partition, whose copy tasks stay up until the run's end (at most :data:`STREAM_WINDOW_S`), while the
    driver records what they commit every :data:`~airmirror.replication.job_driver.WAKE_INTERVAL_S`.  Topic sync
    still runs every :data:`TOPIC_SYNC_INTERVAL_S`; when it finds topics or partitions the stream does not
    copy (new ones, more partitions), the stream ends early and the next round streams them all.  A topic
    deleted on the source stops alone: the others stream on.  A stop signal ends the stream early
    too (rules 1 and 6 hold: the stream is committed before the run ends).
11. **A sick partition stays alone.**  A partition without a leader is left out of the round's plan where it
    stands (:mod:`airmirror.replication.plan_inputs`), its copy goes on without it, and it is named in the log;
    a bounded read of one that loses its leader ends where it got to
    (:mod:`airmirror.replication.spark.range_reader`).  Once its leader is back it is planned again, by itself: the
    next round; a stream that left it out ends early for that (at most :data:`TOPIC_SYNC_INTERVAL_S` later).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace
from datetime import timedelta
from types import FrameType, TracebackType
from typing import Any

from confluent_kafka import KafkaException

from airmirror.config import FlowConfig
from airmirror.errors import AccessDenied, InputError, ReplicationFailure
from airmirror.kafka.clients import cluster_metadata, shared_clients, source_admin
from airmirror.kafka.offsets import has_no_leader
from airmirror.kafka.retry import RETRY_PAUSE_S
from airmirror.kafka.topics import TopicMapping
from airmirror.model import PartitionKey, RangeResult
from airmirror.replication.incarnations import TopicsStopped, raise_for_stops
from airmirror.replication.options import BatchOptions
from airmirror.replication.pipeline import (
    BatchSummary,
    PlannedBatch,
    copy_and_record,
    plan_batch,
    start_early,
    sync_flow_topics,
)
from airmirror.replication.streaming import run_stream, stream_until
from airmirror.store import MetadataStore, describe_holder
from airmirror.store.flow_lease import FlowBusyError

log = logging.getLogger(__name__)

TOPIC_SYNC_INTERVAL_S = 10.0
IDLE_WAIT_S = 0.2
STOPPED_BY_DURATION = "duration"
STOPPED_BY_SIGNAL = "signal"
RETRY_WINDOW_S = 300.0
"""How long a row of failed rounds may last before the run ends (rule 8)."""
RETRY_ROUNDS = 5
"""How many failed rounds a row needs before the run ends (rule 8)."""
RETRY_PAUSE_MAX_S = 10.0
STREAM_WINDOW_S = 900.0
"""The longest a stream batch runs before the next round starts another (rule 10)."""
INCURABLE = (InputError, AccessDenied, TopicsStopped, FlowBusyError)
"""Failures no retry cures: bad input, a missing ACL, stopped topics, a flow held (or taken over) by another run."""


@dataclass(frozen=True, kw_only=True)
class ContinuousReport:
    """What a continuous run did: committed batches, records and bytes, and why it ended (the spark-submit
    app prints it as JSON, :mod:`airmirror.replication.spark.entry`)."""

    batches: int
    records: int
    bytes: int
    seconds: float
    stopped_by: str
    idle_rounds: int
    retries: int


@dataclass
class Tally:
    """What a continuous run has done so far (the :class:`ContinuousReport` it ends with)."""

    batches: int = 0
    records: int = 0
    bytes: int = 0
    idle_rounds: int = 0
    retries: int = 0
    recordings: int = 0
    """Stream recordings that stored a copy: a round that added one made progress (rule 8)."""

    def copied(self, summary: BatchSummary) -> None:
        self.records += summary.records
        self.bytes += summary.bytes


class Retries:
    """Rule 8: the pause before the next round after a failed one, and when a row of failed rounds ends the run
    (``clock``: seconds, monotonic)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.row = 0
        """Failed rounds in the current row."""
        self.row_since: float | None = None
        self.pause = RETRY_PAUSE_S

    def succeeded(self) -> None:
        """A round succeeded (or made progress): the row ends."""
        self.row, self.row_since, self.pause = 0, None, RETRY_PAUSE_S

    def failed(self, error: Exception, *, progressed: bool = False) -> float:
        """The pause before the next round; a round that ``progressed`` before it failed starts a new row.  Raises
        ``error`` once the row holds :data:`RETRY_ROUNDS` failures over :data:`RETRY_WINDOW_S`."""
        if progressed:
            self.succeeded()
        now = self.clock()
        self.row += 1
        self.row_since = now if self.row_since is None else self.row_since
        if self.row >= RETRY_ROUNDS and now - self.row_since >= RETRY_WINDOW_S:
            raise error
        pause, self.pause = self.pause, min(self.pause * 2, RETRY_PAUSE_MAX_S)
        log.warning(
            "round failed, retrying in %.1f s (failure %d in a row, for %.0f s; the run ends at %d over %.0f s): %s",
            pause,
            self.row,
            now - self.row_since,
            RETRY_ROUNDS,
            RETRY_WINDOW_S,
            error,
        )
        return pause


class StopOnSignals:
    """While entered, the first SIGTERM or SIGINT sets :attr:`event` (rule 6: finish the batch in flight, then
    stop) and a second one ends the process at once with exit code ``128 + signal``.  Only the main thread can
    install signal handlers; the previous handlers are restored on exit."""

    def __init__(self, signals: Iterable[signal.Signals] = (signal.SIGTERM, signal.SIGINT)) -> None:
        self.event = threading.Event()
        self._signals = tuple(signals)
        self._previous: dict[signal.Signals, Any] = {}

    def __enter__(self) -> StopOnSignals:
        for number in self._signals:
            self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)

    def _handle(self, number: int, frame: FrameType | None) -> None:
        if self.event.is_set():
            os._exit(128 + number)
        log.warning(
            "%s: stopping once the batch in flight is committed (again to stop at once)", signal.Signals(number).name
        )
        self.event.set()


def from_the_cursors(options: BatchOptions) -> BatchOptions:
    """The options of every batch after the first: ``start_from`` moves cursors once, then batches continue
    from where the one before ended."""
    return replace(options, start_from="stored", start_ms=None, reset_cursor=False)


def replicate_continuously(
    flow: FlowConfig,
    store: MetadataStore,
    options: BatchOptions,
    spark_factory: Callable[[], Any],
    *,
    stop: threading.Event,
    duration: timedelta | None = None,
    holder: str | None = None,
    on_batch: Callable[[BatchSummary], None] | None = None,
) -> ContinuousReport:
    """Run batches back to back per the module rules until ``duration`` has passed or ``stop`` is set;
    ``on_batch`` is called with every committed batch that copied records."""
    if options.dry_run:
        raise InputError("a dry run plans one batch: it cannot run continuously")
    started = time.monotonic()
    deadline = None if duration is None else started + duration.total_seconds()
    tally = Tally()
    retries = Retries()
    streaming = options.until_ms is None and options.max_records is None
    with (
        shared_clients(),
        store.hold_flow(flow.name, holder or describe_holder("airmirror replicate --continuous")) as lease,
    ):
        fenced = store.fenced_by(lease)
        start_early(spark_factory)
        topics = TopicSync(flow, fenced, options)
        while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
            if (lost := lease.lost) is not None:
                raise lost
            recordings = tally.recordings
            try:
                mappings = topics.mappings()
                planned = plan_batch(flow, fenced, mappings, options, stream=streaming)
                options = from_the_cursors(options)
                topics.options, topics.waiting = options, list(planned.waiting)
                if planned.batch_id is None:
                    summary = None
                elif planned.stream:
                    summary = stream_round(
                        flow, fenced, planned, spark_factory(), deadline, stop, topics, tally, on_batch
                    )
                else:
                    summary = copy_and_record(flow, fenced, planned, spark_factory)
            except INCURABLE:
                raise
            except (ReplicationFailure, KafkaException) as error:
                lease.raise_if_lost()  # rule 2; a DB that cannot tell leaves the round to be retried
                topics.expire()
                tally.retries += 1
                stop.wait(retries.failed(error, progressed=tally.recordings > recordings))
                continue
            retries.succeeded()
            if summary is None:
                tally.idle_rounds += 1
                stop.wait(IDLE_WAIT_S)
                continue
            tally.batches += 1
            if planned.stream:
                continue
            tally.copied(summary)
            if on_batch is not None and summary.records:
                on_batch(summary)
    report = ContinuousReport(
        batches=tally.batches,
        records=tally.records,
        bytes=tally.bytes,
        seconds=time.monotonic() - started,
        stopped_by=STOPPED_BY_SIGNAL if stop.is_set() else STOPPED_BY_DURATION,
        idle_rounds=tally.idle_rounds,
        retries=tally.retries,
    )
    raise_for_stops(flow, store)
    return report


class TopicSync:
    """Rule 3: step 1 at most every :data:`TOPIC_SYNC_INTERVAL_S`; :meth:`changed` tells a stream whether the
    topics or partitions to copy changed since its round began (rule 10), its partitions that had no leader
    (:attr:`waiting`, rule 11) included."""

    def __init__(self, flow: FlowConfig, store: MetadataStore, options: BatchOptions) -> None:
        self.flow, self.store, self.options = flow, store, options
        self._mappings: list[TopicMapping] = []
        self._synced_at = float("-inf")
        self._streamed: list[TopicMapping] = []
        self.waiting: Collection[PartitionKey] = ()
        """The partitions the round's plan left out for want of a leader (rule 11)."""

    def mappings(self) -> list[TopicMapping]:
        """The mappings to copy, synced again when due; a round's stream copies these."""
        if time.monotonic() - self._synced_at >= TOPIC_SYNC_INTERVAL_S:
            self._mappings = sync_flow_topics(self.flow, self.store, self.options).mappings
            self._synced_at = time.monotonic()
        self._streamed = self._mappings
        return self._mappings

    def expire(self) -> None:
        """A round failed: sync again at the next round, however recently it synced (the failure may come from a
        topic that changed, a remote topic recreated under the stream, say, which the sync then stops)."""
        self._synced_at = float("-inf")

    def changed(self) -> bool:
        """Sync again when due; whether there are topics or partitions to copy that the stream does not copy.
        A topic deleted on the source is no change: its reads just stop getting records (librdkafka reports
        nothing to a consumer whose assigned topic went away), so it stops alone while the others stream on,
        and the stream's last recording ends its range where its copy got to."""
        if time.monotonic() - self._synced_at < TOPIC_SYNC_INTERVAL_S:
            return False
        try:
            self._mappings = sync_flow_topics(self.flow, self.store, self.options).mappings
        except FlowBusyError:
            raise  # the lease is lost: the stream must stop
        except (ReplicationFailure, KafkaException) as error:
            log.warning("topic sync during a stream failed (the stream goes on): %s", error)
            return False
        finally:
            self._synced_at = time.monotonic()
        return not set(self._mappings) <= set(self._streamed) or self.leader_back()

    def leader_back(self) -> bool:
        """Rule 11: whether a partition the stream left out for want of a leader has one again (one metadata
        request); a request that fails says no."""
        if not self.waiting:
            return False
        try:
            topics = cluster_metadata(source_admin(self.flow)).topics
        except ReplicationFailure as error:
            log.warning("could not tell whether partitions without a leader have one again: %s", error)
            return False
        back = [k for k in self.waiting if k.topic in topics and not has_no_leader(topics[k.topic], k.partition)]
        if back:
            log.info("%s: a leader again; the stream ends so that the next one copies it", ", ".join(map(str, back)))
        return bool(back)


def stream_round(
    flow: FlowConfig,
    store: MetadataStore,
    planned: PlannedBatch,
    spark: Any,
    deadline: float | None,
    stop: threading.Event,
    topics: TopicSync,
    tally: Tally,
    on_batch: Callable[[BatchSummary], None] | None,
) -> BatchSummary:
    """Rule 10: one stream batch, until the run's deadline, the stream window, a stop, or a topic change."""
    assert planned.batch_id is not None
    batch_id = planned.batch_id

    def recorded(deltas: list[RangeResult]) -> None:
        summary = BatchSummary(batch_id, deltas)
        tally.recordings += 1
        tally.copied(summary)
        if on_batch is not None and summary.records:
            on_batch(summary)

    until = stream_until(time.monotonic(), deadline, STREAM_WINDOW_S)
    run_stream(
        flow,
        store,
        batch_id,
        planned.ranges,
        spark,
        until,
        stop=stop,
        should_stop=topics.changed,
        on_record=recorded,
    )
    return BatchSummary(batch_id)  # its records were counted recording by recording
