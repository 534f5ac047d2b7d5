"""Per-partition status of a flow: source offsets (live from the broker) joined with the metadata DB.

Lag is ``source end - next offset to copy`` where the source end is the last stable offset and the next offset
is where the planner would start the partition's next range
(:func:`airmirror.replication.plan_inputs.plan_partitions`: the cursor, where a new partition starts per
``auto.offset.reset``, or the new start after a source reset).  Gaps are the source ranges that retention
deleted before they could be copied; ``records_filtered`` counts the records the flow's transforms dropped
(:mod:`airmirror.config.transforms`), ``records_skipped`` those ``errors.tolerance = all`` skipped.
``source_reset`` names a reset the next run will make (the topic was recreated, or its log ends below the cursor);
the flow's past source resets and its stopped topics and partitions (:mod:`airmirror.replication.incarnations`)
are listed with it.

Partitions without a leader (``waiting_for_leader``): the offsets of a partition whose leader is down cannot be
read; it has no row, and is named with since when the flow's plans have left it where it stands
(:mod:`airmirror.store.leader_waits`).

Deleted source topics (:func:`deleted_source_topics`): a topic the flow selects and has copied (it has cursors)
that the source cluster no longer lists is a stop too, one per topic, derived from the listing at every ``status``
rather than stored: its partitions are no longer read (a read it was in ended where it got to, see
:mod:`airmirror.replication.spark.range_reader`), runs go on without it and do not fail for it, and a topic
created again under the name is a new incarnation, copied as ``airmirror.source.reset.policy`` says.  Its
``stopped_at`` is when its cursors last moved, and its reason names every partition's cursor.

Future timestamps: for every partition with records left to copy, the next record (the first committed one
at or after the cursor) is read once; when it is stamped more than :data:`FUTURE_TOLERANCE_MS` after now, the
partition's ``future_timestamp_ms`` / ``future_timestamp_offset`` name it (None otherwise).  Such a record
pins every time bound before its timestamp at its offset: backfill runs and runs with an explicit ``until``
stop there until the wall clock passes it; scheduled and manual runs copy to the last stable offset and are
not held back.

Lag in seconds (:mod:`airmirror.replication.lag`): ``record_age_ms`` is the age of that same next record (the
oldest one not yet copied) and ``replication_latency_ms`` the flow's newest latency observed from heartbeats.

Schema registries (:class:`SchemaFigures`, read from the metadata DB only, so the replication view shows the same):
the flow's ``airmirror.schema.ids`` mode, the subjects its newest schema sync copied, the source ids it has mapped
to target ids, and the records it copied unchanged because their schema id was unknown
(``airmirror.schema.unknown = pass``).  With the mode ``off`` every count is 0 and the DB is not read.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from airmirror.config import FlowConfig
from airmirror.config.schema_registries import SchemaIds
from airmirror.kafka.clients import source_admin
from airmirror.kafka.topics import replicated_topics
from airmirror.model import (
    JsonObject,
    LeaderWait,
    PartitionKey,
    PartitionStats,
    SourceReset,
    Stop,
    json_object,
    to_json,
)
from airmirror.replication.lag import lag_samples, newest_latency_ms, next_records
from airmirror.replication.plan_inputs import plan_partitions
from airmirror.store import MetadataStore

FUTURE_TOLERANCE_MS = 60_000


@dataclass(frozen=True)
class PartitionStatus:
    topic: str
    partition: int
    remote_topic: str
    source_start: int
    source_end: int
    cursor: int | None
    lag: int
    gaps: int
    gap_records: int
    records_copied: int
    bytes_copied: int
    records_filtered: int = 0
    records_skipped: int = 0
    future_timestamp_ms: int | None = None
    future_timestamp_offset: int | None = None
    source_reset: str | None = None
    record_age_ms: int | None = None
    replication_latency_ms: int | None = None

    def as_dict(self) -> JsonObject:
        return json_object(self)


@dataclass(frozen=True)
class SchemaFigures:
    """A flow's schema registry figures (see the module docstring); ``mode`` is ``airmirror.schema.ids``."""

    mode: SchemaIds = SchemaIds.OFF
    subjects: int = 0
    ids_mapped: int = 0
    records_passed: int = 0

    def as_dict(self) -> JsonObject:
        return json_object(self)


def schema_figures(flow: FlowConfig, store: MetadataStore) -> SchemaFigures:
    """The flow's schema figures from the metadata DB (read-only; no registry or cluster is asked)."""
    if flow.schema_ids is SchemaIds.OFF:
        return SchemaFigures()
    return SchemaFigures(
        flow.schema_ids,
        len(store.schema_subjects(flow.name)),
        store.schema_id_count(flow.name),
        store.schema_passed(flow.name),
    )


@dataclass(frozen=True)
class FlowStatus:
    flow: str
    partitions: list[PartitionStatus]
    unfinished_batch: int | None
    checked_at_ms: int = 0
    future_tolerance_ms: int = FUTURE_TOLERANCE_MS
    stops: list[Stop] = field(default_factory=list)
    source_resets: list[SourceReset] = field(default_factory=list)
    schemas: SchemaFigures = field(default_factory=SchemaFigures)
    waiting_for_leader: list[LeaderWait] = field(default_factory=list)

    @property
    def total_lag(self) -> int:
        return sum(p.lag for p in self.partitions)

    @property
    def future_timestamped(self) -> list[PartitionStatus]:
        """Partitions whose next record to copy is stamped in the future (beyond the tolerance)."""
        return [p for p in self.partitions if p.future_timestamp_ms is not None]

    def as_dict(self) -> JsonObject:
        """The status as JSON (``airmirror status --json``), with the total lag."""
        return {
            "flow": self.flow,
            "total_lag": self.total_lag,
            "unfinished_batch": self.unfinished_batch,
            "checked_at_ms": self.checked_at_ms,
            "future_tolerance_ms": self.future_tolerance_ms,
            "partitions": to_json(self.partitions),
            "stops": to_json(self.stops),
            "source_resets": to_json(self.source_resets),
            "schemas": self.schemas.as_dict(),
            "waiting_for_leader": to_json(self.waiting_for_leader),
        }


def deleted_source_topics(
    flow: FlowConfig, stats: Mapping[PartitionKey, PartitionStats], listed: Iterable[str]
) -> list[Stop]:
    """One :class:`Stop` per source topic the flow selects whose partitions have cursors (``stats``) but which is
    not among the ``listed`` topics the source cluster holds now: deleted (see the module docstring)."""
    listed = set(listed)
    gone: dict[str, dict[int, PartitionStats]] = {}
    for key, stat in stats.items():
        if key.topic not in listed and flow.should_replicate(key.topic):
            gone.setdefault(key.topic, {})[key.partition] = stat
    stops = []
    for topic, partitions in sorted(gone.items()):
        cursors = ", ".join(f"{topic}-{p} at {partitions[p].cursor}" for p in sorted(partitions))
        stops.append(
            Stop(
                topic=topic,
                partition=None,
                reason=(
                    f"source topic {topic} is gone from cluster {flow.source}: its partitions are no longer copied "
                    f"({cursors}); {flow.remote_topic(topic)} keeps what was copied"
                ),
                stopped_at=max(stat.last_batch_at for stat in partitions.values()),
            )
        )
    return stops


def flow_status(
    flow: FlowConfig, store: MetadataStore, *, future_tolerance_ms: int = FUTURE_TOLERANCE_MS
) -> FlowStatus:
    """Read-only: queries the source cluster and the metadata DB, changes nothing.  A copied topic the source
    cluster hides (a revoked DESCRIBE ACL) fails it naming the ACL, as a run does: it is not shown as deleted."""
    stats = store.partition_stats(flow.name)
    mappings = replicated_topics(flow, source_admin(flow), copied={key.topic for key in stats})
    remote = {m.source_topic: m.remote_topic for m in mappings}
    leaderless: dict[PartitionKey, str] = {}
    plans = plan_partitions(flow, store, mappings, waiting=leaderless)
    positions = {p.key: p.planned.start for p in plans}
    ends = {p.key: p.offsets.stable_end for p in plans}
    waiting = next_records(flow, positions, ends)
    now_ms = int(time.time() * 1000)
    lag = {s.key: s for s in lag_samples(positions, ends, waiting, newest_latency_ms(store, flow), now_ms)}
    future = {key: record for key, record in waiting.items() if record[1] > now_ms + future_tolerance_ms}
    rows = []
    for plan in plans:
        key, o, s = plan.key, plan.offsets, stats.get(plan.key)
        future_offset, future_ms = future.get(key, (None, None))
        rows.append(
            PartitionStatus(
                topic=key.topic,
                partition=key.partition,
                remote_topic=remote[key.topic],
                source_start=o.log_start,
                source_end=o.stable_end,
                cursor=plan.cursor,
                lag=lag[key].lag_records,
                gaps=s.gap_count if s is not None else 0,
                gap_records=s.gap_offsets if s is not None else 0,
                records_copied=s.records if s is not None else 0,
                bytes_copied=s.bytes if s is not None else 0,
                records_filtered=s.filtered if s is not None else 0,
                records_skipped=s.skipped if s is not None else 0,
                future_timestamp_ms=future_ms,
                future_timestamp_offset=future_offset,
                source_reset=plan.source_reset,
                record_age_ms=lag[key].record_age_ms,
                replication_latency_ms=lag[key].replication_latency_ms,
            )
        )
    unfinished = store.unfinished_batch(flow.name)
    return FlowStatus(
        flow.name,
        rows,
        unfinished.id if unfinished is not None else None,
        now_ms,
        future_tolerance_ms,
        store.stops(flow.name) + deleted_source_topics(flow, stats, remote),
        store.source_resets(flow.name),
        schema_figures(flow, store),
        waiting_for_leader(store, flow, leaderless),
    )


def waiting_for_leader(
    store: MetadataStore, flow: FlowConfig, leaderless: Mapping[PartitionKey, str]
) -> list[LeaderWait]:
    """The partitions without a leader now (``leaderless``, the broker's error each), since when the flow's plans have
    left them where they stand (now, for one no plan met yet)."""
    recorded = {wait.key: wait for wait in store.leader_waits(flow.name)}
    now = datetime.now(UTC)
    return [
        recorded.get(key) or LeaderWait(key.topic, key.partition, now, reason)
        for key, reason in sorted(leaderless.items())
    ]
