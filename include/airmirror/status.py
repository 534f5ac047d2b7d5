"""Per-partition status of a flow: source offsets (live from the broker) joined with the metadata DB.

Lag is ``source end - cursor`` where the source end is the last stable offset; a partition with no cursor
yet counts from where its first batch would start (``auto.offset.reset``).  Gaps are the source ranges that
retention deleted before they could be copied.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from confluent_kafka.admin import AdminClient

from airmirror.config import FlowConfig
from airmirror.model import PartitionKey
from airmirror.source_offsets import partition_offsets
from airmirror.store import MetadataStore
from airmirror.topic_sync import replicated_topics


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

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class FlowStatus:
    flow: str
    partitions: list[PartitionStatus]
    unfinished_batch: int | None

    @property
    def total_lag(self) -> int:
        return sum(p.lag for p in self.partitions)

    def as_dict(self) -> dict:
        return {
            "flow": self.flow,
            "total_lag": self.total_lag,
            "unfinished_batch": self.unfinished_batch,
            "partitions": [p.as_dict() for p in self.partitions],
        }


def flow_status(flow: FlowConfig, store: MetadataStore) -> FlowStatus:
    """Read-only: queries the source cluster and the metadata DB, changes nothing."""
    mappings = replicated_topics(flow, AdminClient(flow.client_config(flow.source, "admin")))
    keys = [PartitionKey(m.source_topic, p) for m in mappings for p in range(m.partitions)]
    offsets = partition_offsets(AdminClient(flow.client_config(flow.source, "admin")), keys)
    stats = store.partition_stats(flow.name)
    remote = {m.source_topic: m.remote_topic for m in mappings}
    rows = []
    for key in keys:
        o = offsets[key]
        s = stats.get(key)
        cursor = s.cursor if s is not None else None
        start_from = cursor if cursor is not None else (o.log_start if flow.auto_offset_reset == "earliest" else o.stable_end)
        rows.append(
            PartitionStatus(
                topic=key.topic,
                partition=key.partition,
                remote_topic=remote[key.topic],
                source_start=o.log_start,
                source_end=o.stable_end,
                cursor=cursor,
                lag=max(0, o.stable_end - max(start_from, o.log_start)),
                gaps=s.gap_count if s is not None else 0,
                gap_records=s.gap_offsets if s is not None else 0,
                records_copied=s.records if s is not None else 0,
                bytes_copied=s.bytes if s is not None else 0,
            )
        )
    unfinished = store.unfinished_batch(flow.name)
    return FlowStatus(flow.name, rows, unfinished.id if unfinished is not None else None)
