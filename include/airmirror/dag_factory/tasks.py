"""What each task of a flow DAG does.  Every function loads the flow from the config file at run time and
calls the same library steps as ``airmirror replicate``; the DAG only orders them.  Every function registers
the flow's secrets with Airflow's secrets masker first (:mod:`airmirror.dag_factory.masking`).

Exactly-once across Airflow retries: ``plan_batch`` stores the batch before anything is copied and
resumes an unfinished one, ``replicate`` copies the flow's unfinished batch (a retry fences and resumes
it, see :mod:`airmirror.replication.spark.task_writer`), and ``record_batch`` commits only what Kafka
committed.

What a task returns is the typed value its XCom carries (:mod:`airmirror.dag_factory.xcoms`); the DAG's
task functions turn it into JSON and read it back.

Bad input fails at once: every task function here fails its task without retries on a config, param or
connection error (:mod:`airmirror.dag_factory.failures`); other errors are retried.

One run at a time: every task that changes the flow's state holds the flow's lease while it works
(:mod:`airmirror.store.flow_lease`), so a CLI run or another DAG run (a backfill beside a scheduled run)
fails plainly instead of interleaving; a batch left between two tasks is resumed or recorded by whichever
run holds the lease next.  Each such task writes the metadata DB only while it holds the lease (its store is
fenced by it: :mod:`airmirror.store.flow_lease`, fencing).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from typing import Any

from airmirror.checkpoints.checkpoint_emitter import emit_checkpoints
from airmirror.config import FlowConfig
from airmirror.dag_factory.assets import copied_by_uri
from airmirror.dag_factory.connection_lookup import resolve_connections_through_airflow
from airmirror.dag_factory.failures import no_retry_on_bad_input
from airmirror.dag_factory.live import emit_repeatedly
from airmirror.dag_factory.masking import mask_flow_secrets
from airmirror.dag_factory.metrics import publish_batch, publish_checkpoints, publish_state
from airmirror.dag_factory.xcoms import BatchCopied, LiveCopied, PlannedRun, RunRecorded
from airmirror.heartbeats.heartbeat_emitter import emit_heartbeat
from airmirror.kafka.clients import shared_clients
from airmirror.kafka.topics import TopicMapping
from airmirror.migration.verification import verify_flow
from airmirror.model import Verification
from airmirror.replication.continuous import from_the_cursors, replicate_continuously
from airmirror.replication.incarnations import raise_for_stops
from airmirror.replication.options import BatchOptions
from airmirror.replication.pipeline import plan_batch, record_batch, run_batch, sync_flow_topics, unfinished_batch
from airmirror.replication.run_failures import failures_recorded
from airmirror.store import MetadataStore, describe_holder
from airmirror.store.opening import open_flow

log = logging.getLogger(__name__)


RANGES_LOGGED = 20
"""A plan of at most this many partitions logs each range at INFO; a larger one logs them at DEBUG."""


def task_holder() -> str:
    """Who holds the flow's lease: the running task instance, on this host and pid."""
    from airflow.sdk import get_current_context

    ti = get_current_context()["ti"]
    return describe_holder(f"Airflow dag {ti.dag_id} run {ti.run_id} task {ti.task_id} try {ti.try_number}")


@contextmanager
def held_flow(config_path: str, flow_name: str, *, hold: bool = True) -> Iterator[tuple[FlowConfig, MetadataStore]]:
    """:func:`masked_open_flow`, holding the flow's lease while the block runs (unless ``hold`` is false) and
    giving it the store fenced by the lease (:mod:`airmirror.store.flow_lease`, fencing); a failure of the block is
    recorded as the flow's newest failed run (:mod:`airmirror.replication.run_failures`) and the flow's state
    metric sent (:func:`~airmirror.dag_factory.metrics.publish_state`)."""
    with masked_open_flow(config_path, flow_name) as (flow, store):
        try:
            with (
                failures_recorded(flow, store),
                store.hold_flow(flow.name, task_holder()) if hold else nullcontext() as lease,
            ):
                yield flow, store if lease is None else store.fenced_by(lease)
        except Exception:
            publish_state(flow, store)
            raise


@contextmanager
def masked_open_flow(config_path: str, flow_name: str) -> Iterator[tuple[FlowConfig, MetadataStore]]:
    """:func:`~airmirror.store.opening.open_flow`, with the flow's secrets registered with Airflow's secrets
    masker before the task uses them, its clusters' Airflow connections resolved by Airflow, and one admin client
    per cluster for the task (:func:`~airmirror.kafka.clients.shared_clients`)."""
    resolve_connections_through_airflow()
    with shared_clients(), open_flow(config_path, flow_name) as (flow, store):
        mask_flow_secrets(flow)
        yield flow, store


@no_retry_on_bad_input
def sync_topics(config_path: str, flow_name: str, options: BatchOptions) -> list[TopicMapping]:
    """Validate the run against the store, then create/grow/reconfigure remote topics."""
    with held_flow(config_path, flow_name, hold=not options.dry_run) as (flow, store):
        report = sync_flow_topics(flow, store, options)
    for name in report.created:
        log.info("created remote topic %s", name)
    for name, (old, new) in report.grown.items():
        log.info("grew remote topic %s from %d to %d partitions", name, old, new)
    log.info("%d topics replicated by %s", len(report.mappings), flow_name)
    return report.mappings


@no_retry_on_bad_input
def plan(config_path: str, flow_name: str, mappings: list[TopicMapping], options: BatchOptions) -> PlannedRun:
    """Store the run's batch (or resume the unfinished one); a dry run only logs the plan."""
    log.info("%s", describe_bound(options))
    with held_flow(config_path, flow_name, hold=not options.dry_run) as (flow, store):
        planned = plan_batch(flow, store, mappings, options)
        first_batch = planned.batch_id if planned.batch_id is not None else store.newest_batch_id(flow.name) + 1
    each = log.info if len(planned.ranges) <= RANGES_LOGGED else log.debug  # a whole cluster: the summary only
    for r in planned.ranges:
        each("plan %s-%d -> %s: [%d, %d) %d offsets", r.topic, r.partition, r.remote_topic, r.start, r.end, r.size)
    records = planned.offsets
    label = "dry run, nothing stored" if options.dry_run else f"batch {planned.batch_id}"
    log.info(
        "%s: %d partitions, up to %d records%s",
        label,
        len(planned.ranges),
        records,
        " (resumed)" if planned.resumed else "",
    )
    return PlannedRun(
        batch_id=planned.batch_id,
        partitions=len(planned.ranges),
        offsets=records,
        resumed=planned.resumed,
        first_batch=first_batch,
    )


def describe_bound(options: BatchOptions) -> str:
    """How this run bounds its batch, for the task log."""
    if options.until_ms is None:
        return "bound: the last stable offset (no time bound)"
    until = datetime.fromtimestamp(options.until_ms / 1000, UTC).isoformat(timespec="milliseconds")
    return f"bound: the first record stamped at or after {until} (time bound)"


@no_retry_on_bad_input
def planned_records(config_path: str, flow_name: str) -> int | None:
    """How many offsets the flow's unfinished batch plans to copy; ``None`` without an unfinished batch.
    Read-only: the ``replicate`` task asks before it starts Spark."""
    with masked_open_flow(config_path, flow_name) as (flow, store):
        batch = unfinished_batch(flow, store)
    return None if batch is None else batch.offsets


@no_retry_on_bad_input
def replicate(config_path: str, flow_name: str, spark: Any) -> BatchCopied:
    """Copy the flow's unfinished batch with Spark; nothing to do when there is none."""
    with held_flow(config_path, flow_name) as (flow, store):
        batch = unfinished_batch(flow, store)
        if batch is None:
            log.info("no unfinished batch: nothing to copy")
            return BatchCopied(batch_id=None, records=0)
        rows = run_batch(flow, store, batch, lambda: spark)
    records = sum(row.records for row in rows)
    log.info("batch %s copied %d records (%.1f MB)", batch.batch_id, records, sum(r.bytes for r in rows) / 1e6)
    return BatchCopied(batch_id=batch.batch_id, records=records)


@no_retry_on_bad_input
def replicate_live(config_path: str, flow_name: str, spark: Any, options: BatchOptions, seconds: float) -> LiveCopied:
    """A live run's ``replicate`` (:mod:`airmirror.dag_factory.live`): the planned batch first, then batches back
    to back on ``spark`` for ``seconds``; each is committed before the next is planned, and the last one is
    committed before the task ends."""
    with masked_open_flow(config_path, flow_name) as (flow, store):
        report = replicate_continuously(
            flow,
            store,
            from_the_cursors(options),
            lambda: spark,
            stop=threading.Event(),
            duration=timedelta(seconds=seconds),
            holder=task_holder(),
            on_batch=lambda summary: publish_batch(flow, store, summary),
        )
    log.info(
        "live for %.0f s: %d batches committed, %d records (%.1f MB)",
        report.seconds,
        report.batches,
        report.records,
        report.bytes / 1e6,
    )
    return LiveCopied(batches=report.batches, records=report.records, bytes=report.bytes)


def log_lag(flow: FlowConfig, store: MetadataStore) -> None:
    """The flow's lag after the commit, from the lag samples the commit stored."""
    samples = store.newest_lag_samples(flow.name, datetime.now(UTC) - timedelta(minutes=5))
    ages = [s.record_age_ms for s in samples if s.record_age_ms is not None]
    oldest = f"{max(ages) / 1000:.1f} s" if ages else "none waiting"
    log.info(
        "lag after the commit: %d records over %d partitions, oldest record %s",
        sum(s.lag_records for s in samples),
        len(samples),
        oldest,
    )


@no_retry_on_bad_input
def record(config_path: str, flow_name: str, first_batch: int) -> RunRecorded:
    """Commit the unfinished batch's Kafka-committed results to the metadata DB; then report what the run copied:
    every batch committed from ``first_batch`` (the run's first, from ``plan``) on, summed per topic by the DB,
    so a live run's batches count whether it copied in this worker or through spark-submit.  Then fail
    (:class:`~airmirror.replication.incarnations.TopicsStopped`) if any topic or partition of the flow is stopped."""
    with held_flow(config_path, flow_name) as (flow, store):
        batch = unfinished_batch(flow, store)
        if batch is None:
            log.info("no unfinished batch: nothing to record")
        else:
            summary = record_batch(flow, store, batch)
            log.info("batch %d committed: %d records, %.1f MB", summary.batch_id, summary.records, summary.bytes / 1e6)
            publish_batch(flow, store, summary)
            log_lag(flow, store)
        copied = store.copied_since(flow.name, first_batch)
        result = RunRecorded(
            batch_id=copied.last_batch_id,
            records=copied.records,
            bytes=copied.bytes,
            copied=copied_by_uri(flow, copied.topics),
        )
        raise_for_stops(flow, store)
    return result


@no_retry_on_bad_input
def emit(config_path: str, flow_name: str, what: str, window_seconds: float | None) -> int:
    """Emit the flow's ``what`` (``heartbeats``: one heartbeat to the target in MM2's format; ``checkpoints``:
    checkpoints for its source groups, and group offset sync when enabled, with their metrics): once, or, with
    ``window_seconds`` (a live run), every ``emit.{what}.interval.seconds`` for that long on one opened flow
    (:func:`airmirror.dag_factory.live.emit_repeatedly`).  Returns how many emissions succeeded: 0 at once when
    the flow turns them off (``emit.{what}.enabled = false`` or a negative interval, as in MM2)."""
    with masked_open_flow(config_path, flow_name) as (flow, store):
        settings = flow.heartbeats if what == "heartbeats" else flow.checkpoints
        if settings.off_by is not None:
            log.info("%s for %s: no %s emitted", settings.off_by, flow.name, what)
            return 0

        def emit_once() -> None:
            if what == "heartbeats":
                emit_heartbeat(flow, store)
            else:
                publish_checkpoints(flow, emit_checkpoints(flow, store))

        if window_seconds is None:
            emit_once()
            return 1
        return emit_repeatedly(emit_once, settings.interval_seconds, window_seconds)


@no_retry_on_bad_input
def verify(config_path: str, flow_name: str, spark: Any, topics_regex: str | None) -> Verification:
    """``airmirror verify`` of the flow on ``spark`` (it holds the flow's lease itself); returns the stored
    verification."""
    with masked_open_flow(config_path, flow_name) as (flow, store):
        verification = verify_flow(
            flow,
            store,
            lambda: spark,
            topics_regex,
            lambda done, total: log.info("verify: %d of %d partitions compared", done, total),
            task_holder(),
        )
    for partition in verification.partitions:
        log.info("%s: %s %s", partition.key, partition.verdict.value, partition.first_offset or "")
    return verification
