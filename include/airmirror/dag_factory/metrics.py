"""airmirror's metrics, sent through Airflow's metrics layer (StatsD, Datadog or OpenTelemetry, as the
``[metrics]`` section configures it) by the DAG tasks.

Names follow MM2's, under the ``airmirror.`` prefix (Airflow adds its own ``[metrics] statsd_prefix``):

=================================  =======  ==========================  ==============================================
name                               kind     tags                        value
=================================  =======  ==========================  ==============================================
``airmirror.record-count``         counter  topic, partition            records copied by a committed batch
``airmirror.byte-count``           counter  topic, partition            key and value bytes copied
``airmirror.gap-count``            counter  topic, partition            offsets of a copied range that held no record
                                                                        (transaction markers, compacted or aborted)
``airmirror.lag-records``          gauge    topic, partition            last stable offset minus the next to copy
``airmirror.record-age-ms``        gauge    topic, partition            age of the oldest record not yet copied
``airmirror.replication-latency-ms`` gauge  (flow only)                 newest latency seen from copied heartbeats
``airmirror.batch-duration-ms``    timer    (flow only)                 a batch's planning to its commit
``airmirror.checkpoint-latency-ms`` gauge   group                       a checkpoint write's acknowledgement time
                                                                        minus the checkpoints' timestamp
``airmirror.schema-records-passed`` counter topic, partition            records a committed batch copied unchanged
                                                                        because their schema id was unknown
``airmirror.schema-subjects-synced`` gauge  mode                        subjects the newest schema sync copied
``airmirror.schema-ids-mapped``    gauge    mode                        source schema ids mapped to target ids
``airmirror.flow-state``           gauge    state                       the flow's state by the overview's rules
                                                                        (:mod:`airmirror.replication.health`): 0
                                                                        healthy, 1 lagging, 2 not running, 3 stopped
                                                                        partitions, 4 failing
=================================  =======  ==========================  ==============================================

The schema gauges (:func:`~airmirror.replication.status.schema_figures`, the figures of ``airmirror status``) are
sent after every committed batch of a flow whose ``airmirror.schema.ids`` is not ``off``, tagged with that mode
(``translate`` or ``keep``); like every counter, ``schema-records-passed`` is sent only when it counts something.

Every tag set carries the flow as MM2 tags it, ``source`` and ``target`` (the cluster aliases).  Tags reach
StatsD only with ``[metrics] statsd_influxdb_enabled`` (InfluxDB-style tags), and always reach Datadog and
OpenTelemetry.
Publishing reads only what the task already has and the metadata DB; it never fails a task.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from airflow.sdk.observability import stats

from airmirror.checkpoints.checkpoint_emitter import CheckpointReport
from airmirror.config import FlowConfig
from airmirror.config.schema_registries import SchemaIds
from airmirror.model import LagSample, PartitionKey
from airmirror.replication.health import FlowState, flow_health
from airmirror.replication.pipeline import BatchSummary
from airmirror.replication.status import schema_figures
from airmirror.store import MetadataStore

log = logging.getLogger(__name__)

PREFIX = "airmirror"
SAMPLE_WINDOW = timedelta(minutes=5)


def flow_tags(flow: FlowConfig, **more: str | int) -> dict[str, str]:
    """MM2's tags: ``source`` and ``target`` (the cluster aliases), then ``more``; every value reduced to the
    characters Airflow's metric names allow (``[A-Za-z0-9_.-/]``)."""
    tags = {"source": flow.source, "target": flow.target, **{key: str(value) for key, value in more.items()}}
    return {key: stats.normalize_name_for_stats(value, log_warning=False) for key, value in tags.items()}


def publish_batch(flow: FlowConfig, store: MetadataStore, summary: BatchSummary) -> None:
    """Counters of a committed batch, its duration, and the newest lag figures of the partitions it planned."""
    try:
        tags = flow_tags(flow)
        for result in summary.results:
            partition = flow_tags(flow, topic=result.topic, partition=result.partition)
            for name, count in (
                ("record-count", result.records),
                ("byte-count", result.bytes),
                ("gap-count", result.end - result.start - result.records - result.filtered - result.skipped),
                ("schema-records-passed", result.schema_passed),
                ("record-filtered-count", result.filtered),
                ("record-skipped-count", result.skipped),
            ):
                if count > 0:
                    stats.incr(f"{PREFIX}.{name}", count, tags=partition)
        batch = next((b for b in store.batches(flow.name, limit=5) if b.id == summary.batch_id), None)
        if batch is not None and batch.finished_at is not None:
            stats.timing(f"{PREFIX}.batch-duration-ms", batch.finished_at - batch.created_at, tags=tags)
        publish_lag(flow, newest_samples(store.lag_samples(flow.name, since=datetime.now(UTC) - SAMPLE_WINDOW)))
        publish_schemas(flow, store)
        publish_state(flow, store)
    except Exception as error:
        log.warning("metrics of batch %s of %s not sent: %s", summary.batch_id, flow.name, error)


def publish_state(flow: FlowConfig, store: MetadataStore) -> None:
    """The ``flow-state`` gauge (the worst state's severity, tagged with its name); never fails the task."""
    try:
        health = flow_health(flow, store, datetime.now(UTC), reverse_enabled=False)
        severity = len(FlowState) - 1 - health.state.rank
        stats.gauge(f"{PREFIX}.flow-state", severity, tags=flow_tags(flow, state=health.state.value))
    except Exception as error:
        log.warning("the state metric of %s was not sent: %s", flow.name, error)


def newest_samples(samples: Iterable[LagSample]) -> list[LagSample]:
    """The newest sample of each partition."""
    newest: dict[PartitionKey, LagSample] = {}
    for sample in samples:
        if sample.key not in newest or sample.sampled_at > newest[sample.key].sampled_at:
            newest[sample.key] = sample
    return list(newest.values())


def publish_lag(flow: FlowConfig, samples: Iterable[LagSample]) -> None:
    tags = flow_tags(flow)
    latency: int | None = None
    for sample in samples:
        partition = flow_tags(flow, topic=sample.topic, partition=sample.partition)
        stats.gauge(f"{PREFIX}.lag-records", sample.lag_records, tags=partition)
        if sample.record_age_ms is not None:
            stats.gauge(f"{PREFIX}.record-age-ms", sample.record_age_ms, tags=partition)
        latency = sample.replication_latency_ms if sample.replication_latency_ms is not None else latency
    if latency is not None:
        stats.gauge(f"{PREFIX}.replication-latency-ms", latency, tags=tags)


def publish_schemas(flow: FlowConfig, store: MetadataStore) -> None:
    """The ``schema-subjects-synced`` and ``schema-ids-mapped`` gauges, unless the flow's schema ids are ``off``."""
    if flow.schema_ids is SchemaIds.OFF:
        return
    figures = schema_figures(flow, store)
    tags = flow_tags(flow, mode=figures.mode.value)
    stats.gauge(f"{PREFIX}.schema-subjects-synced", figures.subjects, tags=tags)
    stats.gauge(f"{PREFIX}.schema-ids-mapped", figures.ids_mapped, tags=tags)


def publish_checkpoints(flow: FlowConfig, report: CheckpointReport) -> None:
    """``checkpoint-latency-ms`` of every group that had checkpoints written."""
    if report.latency_ms is None:
        return
    try:
        for group in report.groups:
            if group.written:
                stats.gauge(
                    f"{PREFIX}.checkpoint-latency-ms", report.latency_ms, tags=flow_tags(flow, group=group.group)
                )
    except Exception as error:
        log.warning("checkpoint metrics of %s not sent: %s", flow.name, error)
