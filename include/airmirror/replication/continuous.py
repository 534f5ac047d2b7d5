"""Continuous replication: bounded batches back to back in one process, on one warm Spark session.

Contract:
1. Every batch is an ordinary batch of :mod:`airmirror.replication.pipeline`: planned up to the last stable
   offset at planning time (or the caller's bounds), stored before anything is copied, copied and committed
   by the same exactly-once protocol.  A run killed at any point leaves at most one unfinished batch, which
   the next run (continuous or not) resumes exactly once.
2. The flow's lease is held from the first batch to the end, so no other run works on the flow meanwhile.
3. Topic sync (step 1) runs before the first batch and then at most every :data:`TOPIC_SYNC_INTERVAL_S`:
   new topics and partitions join within that time.
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
   :data:`RETRY_PAUSE_MAX_S`): the next round resumes the unfinished batch exactly once.  The run ends only when
   rounds keep failing for :data:`RETRY_WINDOW_S`, or on a failure no retry cures (bad input, a missing ACL, a
   lost lease).
9. The run shares one admin client per cluster (:func:`~airmirror.kafka.clients.shared_admins`), dropped at
   its end: nothing it builds grows with the rounds it runs.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import timedelta
from types import FrameType, TracebackType
from typing import Any

from confluent_kafka import KafkaException

from airmirror.config import FlowConfig
from airmirror.errors import AccessDenied, InputError, ReplicationFailure
from airmirror.kafka.clients import shared_admins
from airmirror.kafka.retry import RETRY_PAUSE_S
from airmirror.kafka.topics import TopicMapping
from airmirror.replication.incarnations import TopicsStopped, raise_for_stops
from airmirror.replication.options import BatchOptions
from airmirror.replication.pipeline import BatchSummary, copy_and_record, plan_batch, sync_flow_topics
from airmirror.store import MetadataStore, describe_holder
from airmirror.store.flow_lease import FlowBusyError

log = logging.getLogger(__name__)

TOPIC_SYNC_INTERVAL_S = 10.0
IDLE_WAIT_S = 0.2
STOPPED_BY_DURATION = "duration"
STOPPED_BY_SIGNAL = "signal"
RETRY_WINDOW_S = 300.0
"""How long rounds may keep failing before the run ends (rule 8)."""
RETRY_PAUSE_MAX_S = 10.0
INCURABLE = (InputError, AccessDenied, TopicsStopped, FlowBusyError)
"""Failures no retry cures: bad input, a missing ACL, stopped topics, a flow held (or taken over) by another run."""


@dataclass
class ContinuousReport:
    """What a continuous run did: committed batches, records and bytes, and why it ended."""

    batches: int = 0
    records: int = 0
    bytes: int = 0
    seconds: float = 0.0
    stopped_by: str = ""
    idle_rounds: int = 0
    retries: int = 0


class Retries:
    """Rule 8: the pause before the next round after a failed one, and when failing rounds end the run."""

    def __init__(self) -> None:
        self.failing_since: float | None = None
        self.pause = RETRY_PAUSE_S

    def succeeded(self) -> None:
        self.failing_since, self.pause = None, RETRY_PAUSE_S

    def failed(self, error: Exception) -> float:
        """The pause before the next round; raises ``error`` once rounds have failed for :data:`RETRY_WINDOW_S`."""
        now = time.monotonic()
        self.failing_since = now if self.failing_since is None else self.failing_since
        if now - self.failing_since >= RETRY_WINDOW_S:
            raise error
        pause, self.pause = self.pause, min(self.pause * 2, RETRY_PAUSE_MAX_S)
        log.warning("round failed, retrying in %.1f s (failing for %.0f s of at most %.0f s): %s", pause, now - self.failing_since, RETRY_WINDOW_S, error)
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
        log.warning("%s: stopping once the batch in flight is committed (again to stop at once)", signal.Signals(number).name)
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
    report = ContinuousReport()
    retries = Retries()
    with shared_admins(), store.hold_flow(flow.name, holder or describe_holder("airmirror replicate --continuous")) as lease:
        mappings: list[TopicMapping] = []
        synced_at = float("-inf")
        while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
            try:
                if time.monotonic() - synced_at >= TOPIC_SYNC_INTERVAL_S:
                    mappings = sync_flow_topics(flow, store, options).mappings
                    synced_at = time.monotonic()
                planned = plan_batch(flow, store, mappings, options)
                options = from_the_cursors(options)
                summary = None if planned.batch_id is None else copy_and_record(flow, store, planned, spark_factory, lease)
            except INCURABLE:
                raise
            except (ReplicationFailure, KafkaException) as error:
                report.retries += 1
                stop.wait(retries.failed(error))
                continue
            retries.succeeded()
            if summary is None:
                report.idle_rounds += 1
                stop.wait(IDLE_WAIT_S)
                continue
            report.batches += 1
            report.records += summary.records
            report.bytes += summary.bytes
            if on_batch is not None and summary.records:
                on_batch(summary)
    report.stopped_by = STOPPED_BY_SIGNAL if stop.is_set() else STOPPED_BY_DURATION
    report.seconds = time.monotonic() - started
    raise_for_stops(flow, store)
    return report
