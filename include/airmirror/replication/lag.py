"""Lag in seconds, per source partition, as MM2 users read it.

- ``lag_records``: the last stable offset minus the next offset to copy.
- ``record_age_ms``: now minus the timestamp of the oldest record not yet copied (the first committed record
  at or after the next offset to copy; MM2's ``record-age-ms`` seen from the source); ``None`` when no
  record is waiting.  A record stamped in the future has age 0.
- ``replication_latency_ms``: the flow's newest replication latency observed from copied heartbeats (MM2's
  ``replication-latency-ms``, :func:`airmirror.heartbeats.heartbeat_emitter.observe_heartbeats`); ``None`` before the
  first.

:func:`sample_lag` reads the source (one ListOffsets round and one read_committed consumer for the partitions
with records waiting) and the store; nothing is written.  ``status`` shows the figures and each batch commit
stores them over time (:data:`airmirror.replication.recording.AFTER_COMMIT`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime

from confluent_kafka.admin import OffsetSpec

from airmirror.config import FlowConfig
from airmirror.kafka.clients import source_admin
from airmirror.kafka.offsets import list_offsets, next_record_timestamps
from airmirror.model import LagSample, PartitionKey
from airmirror.store import MetadataStore


def newest_latency_ms(store: MetadataStore, flow: FlowConfig) -> int | None:
    """The flow's most recently observed heartbeat latency, ``None`` before the first."""
    latencies = store.heartbeat_latencies(flow.name)
    return max(latencies, key=lambda latency: latency.observed_at).latency_ms if latencies else None


def next_records(
    flow: FlowConfig, positions: Mapping[PartitionKey, int], ends: Mapping[PartitionKey, int]
) -> dict[PartitionKey, tuple[int, int]]:
    """``(offset, timestamp ms)`` of the next record to copy of every partition with records waiting."""
    waiting = {key: position for key, position in positions.items() if position < ends[key]}
    return next_record_timestamps(flow.source_client("consumer"), waiting) if waiting else {}


def lag_samples(
    positions: Mapping[PartitionKey, int],
    ends: Mapping[PartitionKey, int],
    waiting: Mapping[PartitionKey, tuple[int, int]],
    latency_ms: int | None,
    now_ms: int,
) -> list[LagSample]:
    """One sample per partition from what was read (see the module docstring for each figure)."""
    sampled_at = datetime.fromtimestamp(now_ms / 1000, UTC)
    return [
        LagSample(
            key.topic,
            key.partition,
            sampled_at,
            max(0, ends[key] - position),
            max(0, now_ms - waiting[key][1]) if key in waiting else None,
            latency_ms,
        )
        for key, position in sorted(positions.items())
    ]


def sample_lag(flow: FlowConfig, store: MetadataStore, positions: Mapping[PartitionKey, int]) -> list[LagSample]:
    """Samples of the partitions in ``positions`` (partition -> next offset to copy), read now; one without a leader
    is not sampled."""
    if not positions:
        return []
    leaderless: dict[PartitionKey, str] = {}
    ends = list_offsets(source_admin(flow), positions, OffsetSpec.latest(), waiting=leaderless)
    positions = {key: position for key, position in positions.items() if key in ends}
    waiting = next_records(flow, positions, ends)
    return lag_samples(positions, ends, waiting, newest_latency_ms(store, flow), int(time.time() * 1000))
