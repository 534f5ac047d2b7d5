"""The store as the replication view opens and reads it, on real SQLite files: read-only (no file created, no
migration, every write refused) and bounded (the lag chart downsampled by the database)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.exc import DBAPIError

from airmirror.errors import ReplicationFailure
from airmirror.model import LagSample, PartitionKey
from airmirror.store import MetadataStore
from airmirror.store.metadata_store import SchemaNotCurrentError

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
FLOW = "a->b"


def tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as connection:
        return [name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]


@pytest.fixture
def migrated(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    MetadataStore.open(url).dispose()
    return url


def test_a_read_only_open_of_a_missing_file_creates_nothing(tmp_path: Path):
    missing = tmp_path / "state" / "metadata.db"
    with MetadataStore.open_read_only(f"sqlite:///{missing}") as store, pytest.raises(ReplicationFailure):
        store.check_schema()
    assert not missing.parent.exists()


def test_a_read_only_open_never_migrates(tmp_path: Path):
    empty = tmp_path / "metadata.db"
    sqlite3.connect(empty).close()
    with (
        MetadataStore.open_read_only(f"sqlite:///{empty}") as store,
        pytest.raises(SchemaNotCurrentError, match="no schema yet") as raised,
    ):
        store.check_schema()
    assert raised.value.revision is None
    assert tables(empty) == []


def test_an_older_schema_is_reported_not_upgraded(migrated: str, tmp_path: Path):
    with sqlite3.connect(tmp_path / "metadata.db") as connection:
        connection.execute("UPDATE airmirror_alembic_version SET version_num = '0001'")
    with MetadataStore.open_read_only(migrated) as store, pytest.raises(SchemaNotCurrentError) as raised:
        store.check_schema()
    assert raised.value.revision == "0001"


def test_every_write_through_a_read_only_store_fails(migrated: str):
    sample = LagSample("orders", 0, NOW, 5, None, None)
    with MetadataStore.open_read_only(migrated) as store:
        store.check_schema()
        with pytest.raises((ReplicationFailure, DBAPIError), match="readonly"):
            store.record_lag_samples(FLOW, [sample])
        with pytest.raises((ReplicationFailure, DBAPIError), match="readonly"):
            store.stop_partition(FLOW, PartitionKey("orders", 0), "a test")
        assert store.lag_samples(FLOW) == [] and store.stops(FLOW) == []


def test_the_lag_series_is_downsampled_by_the_database(migrated: str):
    """A sample every 5 s for 6 h on 4 partitions (17,280 instants) comes back as at most 300 points, each its
    bucket's newest instant, largest total lag, oldest record age and largest latency."""
    since, step, partitions = NOW - timedelta(hours=6), timedelta(seconds=5), 4
    instants = [since + step * i for i in range(int(timedelta(hours=6) / step) + 1)]
    samples = [
        LagSample("orders", p, at, lag_records=i % 50 + p, record_age_ms=i, replication_latency_ms=None if i % 2 else i)
        for i, at in enumerate(instants)
        for p in range(partitions)
    ]
    with MetadataStore.open(migrated) as writer:
        writer.record_lag_samples(FLOW, samples)
        writer.record_lag_samples("other->flow", samples[:10])

    with MetadataStore.open_read_only(migrated) as store:
        series = store.lag_series(FLOW, since, NOW, 300)

    assert 290 <= len(series) <= 300
    assert [p.at for p in series] == sorted(p.at for p in series)
    assert series[-1].at == NOW
    width = timedelta(milliseconds=(NOW - since) // timedelta(milliseconds=1) // 300 + 1)
    by_bucket: dict[int, list[int]] = {}
    for i, at in enumerate(instants):
        by_bucket.setdefault(int((at - since) / width), []).append(i)
    expected = [
        (instants[max(idx)], max(i % 50 * partitions + 6 for i in idx), max(idx), max(i for i in idx if i % 2 == 0))
        for _, idx in sorted(by_bucket.items())
    ]
    assert [(p.at, p.lag_records, p.record_age_ms, p.replication_latency_ms) for p in series] == expected


def test_the_newest_sample_of_each_partition(migrated: str):
    with MetadataStore.open(migrated) as writer:
        writer.record_lag_samples(
            FLOW,
            [
                LagSample("orders", 0, NOW - timedelta(hours=7), 99, None, None),
                LagSample("orders", 0, NOW - timedelta(minutes=2), 40, 9_000, 800),
                LagSample("orders", 0, NOW - timedelta(minutes=1), 7, 1_500, 650),
                LagSample("orders", 1, NOW - timedelta(minutes=3), 3, None, 650),
                LagSample("old", 0, NOW - timedelta(hours=7), 1, None, None),
            ],
        )
    with MetadataStore.open_read_only(migrated) as store:
        newest = store.newest_lag_samples(FLOW, since=NOW - timedelta(hours=6))
    assert [(s.topic, s.partition, s.lag_records) for s in newest] == [("orders", 0, 7), ("orders", 1, 3)]
