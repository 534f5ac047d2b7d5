"""Lag in records and seconds from what was read: record age, a future-stamped record, nothing waiting."""

from __future__ import annotations

from datetime import UTC, datetime

from airmirror.model import PartitionKey
from airmirror.replication.lag import lag_samples

NOW = 1_800_000_000_000
P0, P1, P2 = PartitionKey("t", 0), PartitionKey("t", 1), PartitionKey("t", 2)


def test_each_partition_gets_its_lag_age_and_the_flow_latency():
    samples = lag_samples(
        positions={P0: 10, P1: 5, P2: 7},
        ends={P0: 15, P1: 5, P2: 9},
        waiting={P0: (10, NOW - 3_000), P2: (8, NOW + 60_000)},
        latency_ms=250,
        now_ms=NOW,
    )
    assert [(s.key, s.lag_records, s.record_age_ms, s.replication_latency_ms) for s in samples] == [
        (P0, 5, 3_000, 250),
        (P1, 0, None, 250),
        (P2, 2, 0, 250),
    ]
    assert {s.sampled_at for s in samples} == {datetime.fromtimestamp(NOW / 1000, UTC)}


def test_without_heartbeats_the_latency_is_unknown():
    [sample] = lag_samples({P0: 3}, {P0: 3}, {}, None, NOW)
    assert (sample.lag_records, sample.record_age_ms, sample.replication_latency_ms) == (0, None, None)
