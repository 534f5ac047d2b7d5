"""What the replication view shows of one flow, assembled from the metadata DB only.

Contract: nothing here talks to Kafka, so the API server needs no cluster credentials and the view answers
with every cluster down.  Every figure is one the tasks recorded:

- per source partition: records and bytes copied and the last batch (committed batches), lag in records and
  record age (the newest lag sample, taken after each commit), gaps (offsets retention deleted before they
  were copied), source resets and stops;
- the flow's heartbeat latency (newest observation per heartbeat route), or why there is none
  (:func:`~airmirror.replication.health.latency_note`);
- per consumer group: the newest checkpoint (partitions, when) and the newest group offset sync outcome;
- recent batches with their throughput;
- the flow's schema figures: ``airmirror.schema.ids`` mode, subjects synced, ids mapped and records passed through
  (:func:`~airmirror.replication.status.schema_figures`, the same figures ``airmirror status`` shows);
- lag and latency over time (:data:`SERIES_WINDOW`), for the chart, downsampled by the database to at most
  :data:`SERIES_POINTS` points (:meth:`~airmirror.store.lag_samples.LagStore.lag_series`).

Every read is bounded: the rows read grow with the partitions and groups of the flow (one each) and with the
subjects of its topics (the id map is counted, not read), never with the sample rate.  The view only reads, so it
works on a store opened read-only.

The view's JSON (``GET /api/flows/{flow}``) is :meth:`FlowView.as_json`: every field of every row, as
:func:`~airmirror.model.to_json` writes it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from airmirror.config import FlowConfig
from airmirror.model import BatchRecord, BatchState, GroupSyncOutcome, JsonObject, LagSample, PartitionKey, json_object
from airmirror.replication.health import gone_topic_reason, latency_note
from airmirror.replication.status import SchemaFigures, schema_figures
from airmirror.store import MetadataStore
from airmirror.store.lag_samples import LagPoint

SERIES_WINDOW = timedelta(hours=6)
SERIES_POINTS = 300
"""The most points the chart shows, whatever the sample rate."""
RECENT_BATCHES = 20


@dataclass(frozen=True, kw_only=True)
class PartitionRow:
    topic: str
    partition: int
    remote_topic: str
    records: int
    bytes: int
    cursor: int | None
    lag_records: int | None
    record_age_ms: int | None
    sampled_at: str | None
    gap_count: int
    gap_offsets: int
    resets: int
    stopped: str | None
    filtered: int = 0
    skipped: int = 0


@dataclass(frozen=True, kw_only=True)
class GroupRow:
    """``skipped_active``: the newest group offset sync skipped the group because it has active members."""

    group: str
    partitions: int
    last_checkpoint_at: str | None
    sync_outcome: str | None
    sync_detail: str | None
    synced_at: str | None
    skipped_active: bool


@dataclass(frozen=True, kw_only=True)
class BatchRow:
    batch_id: int
    state: str
    created_at: str
    seconds: float | None
    records: int | None
    bytes: int | None
    records_per_second: float | None


@dataclass(frozen=True, kw_only=True)
class SeriesPoint:
    at: str
    lag_records: int
    record_age_ms: int | None
    replication_latency_ms: int | None


@dataclass(frozen=True, kw_only=True)
class FlowView:
    """One flow's view; ``clusters`` is ``(source, target)``."""

    flow: str
    dag_id: str
    clusters: tuple[str, str]
    partitions: list[PartitionRow]
    heartbeat_latency_ms: int | None
    heartbeat_latency_at: str | None
    latency_note: str | None
    groups: list[GroupRow]
    batches: list[BatchRow]
    series: list[SeriesPoint]
    schemas: SchemaFigures

    def as_json(self) -> JsonObject:
        return json_object(self)


def flow_view(
    flow: FlowConfig, dag_id: str, store: MetadataStore, now: datetime | None = None, *, reverse_enabled: bool = False
) -> FlowView:
    """Everything the view shows of ``flow`` (see the module contract); ``reverse_enabled`` says whether flow
    ``target->source``, which brings the heartbeats latency is measured from, runs."""
    now = now or datetime.now(UTC)
    since = now - SERIES_WINDOW
    newest_samples = {sample.key: sample for sample in store.newest_lag_samples(flow.name, since)}
    latencies = store.heartbeat_latencies(flow.name)
    latency = max(latencies, key=lambda latency: latency.observed_at) if latencies else None
    return FlowView(
        flow=flow.name,
        dag_id=dag_id,
        clusters=(flow.source, flow.target),
        partitions=_partitions(flow, store, newest_samples),
        heartbeat_latency_ms=None if latency is None else latency.latency_ms,
        heartbeat_latency_at=None if latency is None else _iso(latency.observed_at),
        latency_note=None if latency else latency_note(flow, reverse_enabled, store.heartbeat_emission(flow.name)),
        groups=_groups(flow, store),
        batches=[_batch_row(batch) for batch in store.batches(flow.name, limit=RECENT_BATCHES)],
        series=[_series_point(point) for point in store.lag_series(flow.name, since, now, SERIES_POINTS)],
        schemas=schema_figures(flow, store),
    )


def _partitions(flow: FlowConfig, store: MetadataStore, newest: dict[PartitionKey, LagSample]) -> list[PartitionRow]:
    stats = store.partition_stats(flow.name)
    resets: dict[PartitionKey, int] = defaultdict(int)
    for reset in store.source_resets(flow.name):
        resets[PartitionKey(reset.topic, reset.partition)] += 1
    stops = store.stops(flow.name)
    gone = store.gone_topics(flow.name)
    rows = []
    for key in sorted({*stats, *newest}):
        stat, sample = stats.get(key), newest.get(key)
        stop = next((s.reason for s in stops if s.topic == key.topic and s.partition in (None, key.partition)), None)
        if stop is None and key.topic in gone:
            stop = gone_topic_reason(flow, key.topic, gone[key.topic])
        rows.append(
            PartitionRow(
                topic=key.topic,
                partition=key.partition,
                remote_topic=flow.remote_topic(key.topic),
                records=stat.records if stat else 0,
                bytes=stat.bytes if stat else 0,
                cursor=stat.cursor if stat else None,
                lag_records=sample.lag_records if sample else None,
                record_age_ms=sample.record_age_ms if sample else None,
                sampled_at=_iso(sample.sampled_at) if sample else None,
                gap_count=stat.gap_count if stat else 0,
                gap_offsets=stat.gap_offsets if stat else 0,
                resets=resets[key],
                stopped=stop,
                filtered=stat.filtered if stat else 0,
                skipped=stat.skipped if stat else 0,
            )
        )
    return rows


def _groups(flow: FlowConfig, store: MetadataStore) -> list[GroupRow]:
    checkpoints: dict[str, list[datetime]] = defaultdict(list)
    for checkpoint in store.checkpoints(flow.name):
        checkpoints[checkpoint.group].append(checkpoint.emitted_at)
    syncs = {sync.group: sync for sync in store.group_syncs(flow.name)}
    rows = []
    for group in sorted({*checkpoints, *syncs}):
        sync = syncs.get(group)
        emitted = checkpoints.get(group, [])
        rows.append(
            GroupRow(
                group=group,
                partitions=len(emitted),
                last_checkpoint_at=_iso(max(emitted)) if emitted else None,
                sync_outcome=sync.outcome.value if sync else None,
                sync_detail=sync.detail if sync else None,
                synced_at=_iso(sync.synced_at) if sync else None,
                skipped_active=sync is not None and sync.outcome is GroupSyncOutcome.SKIPPED_ACTIVE,
            )
        )
    return rows


def _batch_row(batch: BatchRecord) -> BatchRow:
    seconds = (batch.finished_at - batch.created_at).total_seconds() if batch.finished_at else None
    rate = (
        batch.records / seconds
        if batch.state == BatchState.COMMITTED and batch.records is not None and seconds
        else None
    )
    return BatchRow(
        batch_id=batch.id,
        state=batch.state.value,
        created_at=_iso(batch.created_at),
        seconds=seconds,
        records=batch.records,
        bytes=batch.bytes,
        records_per_second=rate,
    )


def _series_point(point: LagPoint) -> SeriesPoint:
    return SeriesPoint(
        at=_iso(point.at),
        lag_records=point.lag_records,
        record_age_ms=point.record_age_ms,
        replication_latency_ms=point.replication_latency_ms,
    )


def _iso(moment: datetime) -> str:
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat(timespec="seconds")
