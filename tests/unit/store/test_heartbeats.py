"""Heartbeat emissions and replication latency in the metadata store (:mod:`airmirror.store.heartbeats`) on
SQLite: the newest value per key is kept."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from airmirror.model import HeartbeatEmission, HeartbeatLatency
from airmirror.store import MetadataStore

FLOW = "a->b"
AT = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def test_the_newest_latency_of_each_heartbeat_route_is_kept(store: MetadataStore) -> None:
    direct = HeartbeatLatency(
        source_alias="a", target_alias="b", heartbeat_at=AT, observed_at=AT + timedelta(seconds=2), latency_ms=2000
    )
    relayed = replace(direct, source_alias="c", latency_ms=5000)
    store.record_heartbeat_latency(FLOW, direct)
    store.record_heartbeat_latency(FLOW, relayed)
    later = replace(direct, heartbeat_at=AT + timedelta(minutes=1), latency_ms=300)

    store.record_heartbeat_latency(FLOW, later)

    assert sorted(store.heartbeat_latencies(FLOW), key=lambda latency: latency.source_alias) == [later, relayed]
    assert store.heartbeat_latencies("a->c") == []


def test_the_newest_heartbeat_a_flow_emitted_is_kept(store: MetadataStore) -> None:
    assert store.heartbeat_emission(FLOW) is None
    first = HeartbeatEmission(topic="heartbeats", heartbeat_at=AT)
    store.record_heartbeat_emitted(FLOW, first)

    store.record_heartbeat_emitted(FLOW, replace(first, heartbeat_at=AT + timedelta(seconds=5)))

    assert store.heartbeat_emission(FLOW) == replace(first, heartbeat_at=AT + timedelta(seconds=5))
