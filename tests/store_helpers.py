"""Metadata DB rows written as a run writes them, for tests of what is read back (status, health, the view)."""

from __future__ import annotations

from airmirror.model import OffsetRun, PartitionKey, PlannedRange, RangeResult
from airmirror.store import MetadataStore


def commit_ten(store: MetadataStore, flow: str, topic: str = "orders", partition: int = 0) -> None:
    """A committed batch that copied ten more records of ``topic``-``partition`` (remote topic ``a.{topic}``)."""
    commit_ten_each(store, flow, [PartitionKey(topic, partition)])


def commit_ten_each(store: MetadataStore, flow: str, keys: list[PartitionKey]) -> None:
    """One committed batch that copied ten more records of each of ``keys`` (remote topics ``a.{topic}``)."""
    stats = store.partition_stats(flow)
    plans, results = [], []
    for key in keys:
        first = stats[key].cursor if key in stats else 0
        plans.append(
            PlannedRange(
                topic=key.topic, partition=key.partition, start=first, end=first + 10, remote_topic=f"a.{key.topic}"
            )
        )
        results.append(
            RangeResult(
                topic=key.topic,
                partition=key.partition,
                start=first,
                end=first + 10,
                records=10,
                bytes=100,
                runs=(OffsetRun(first, first + 10, first),),
                downstream_start=first,
                downstream_end=first + 10,
            )
        )
    store.commit_batch(store.begin_batch(flow, plans, {"trigger": "test"}), results)
