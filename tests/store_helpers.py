"""Metadata DB rows written as a run writes them, for tests of what is read back (status, health, the view)."""

from __future__ import annotations

from airmirror.model import OffsetRun, PartitionKey, PlannedRange, RangeResult
from airmirror.store import MetadataStore


def commit_ten(store: MetadataStore, flow: str, topic: str = "orders", partition: int = 0) -> None:
    """A committed batch that copied ten more records of ``topic``-``partition`` (remote topic ``a.{topic}``)."""
    stats = store.partition_stats(flow).get(PartitionKey(topic, partition))
    first = 0 if stats is None else stats.cursor
    plan = PlannedRange(topic=topic, partition=partition, start=first, end=first + 10, remote_topic=f"a.{topic}")
    batch = store.begin_batch(flow, [plan], {"trigger": "test"})
    result = RangeResult(
        topic=topic,
        partition=partition,
        start=first,
        end=first + 10,
        records=10,
        bytes=100,
        runs=(OffsetRun(first, first + 10, first),),
        downstream_start=first,
        downstream_end=first + 10,
    )
    store.commit_batch(batch, [result])
