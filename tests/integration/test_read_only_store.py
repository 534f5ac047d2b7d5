"""The replication view's store reads on a real PostgreSQL server: a read-only open refuses every write and
migrates nothing, and the lag series is aggregated by PostgreSQL as by SQLite (tests/unit/ui/test_store_reads.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import create_engine, inspect
from sqlalchemy.exc import DBAPIError

from airmirror.devtools.local_postgres import PostgresServer, postgres_server
from airmirror.errors import ReplicationFailure
from airmirror.model import LagSample
from airmirror.store import MetadataStore
from airmirror.store.metadata_store import SchemaNotCurrentError

pytestmark = pytest.mark.integration

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
FLOW = "a->b"


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with postgres_server() as server:
        yield server


def test_a_read_only_open_of_an_empty_database_migrates_nothing(postgres: PostgresServer):
    url = postgres.create_database(f"ro_{uuid.uuid4().hex}")
    with MetadataStore.open_read_only(url) as store, pytest.raises(SchemaNotCurrentError, match="no schema yet"):
        store.check_schema()
    engine = create_engine(url)
    try:
        assert inspect(engine).get_table_names() == []
    finally:
        engine.dispose()


def test_a_read_only_store_reads_the_series_and_refuses_writes(postgres: PostgresServer):
    url = postgres.create_database(f"ro_{uuid.uuid4().hex}")
    samples = [
        LagSample(
            "orders",
            p,
            NOW - timedelta(minutes=m),
            lag_records=10 * m + p,
            record_age_ms=m,
            replication_latency_ms=None,
        )
        for m in range(0, 360, 2)
        for p in range(3)
    ]
    with MetadataStore.open(url) as writer:
        writer.record_lag_samples(FLOW, samples)

    with MetadataStore.open_read_only(url) as store:
        store.check_schema()
        series = store.lag_series(FLOW, NOW - timedelta(hours=6), NOW, 60)
        newest = store.newest_lag_samples(FLOW, NOW - timedelta(hours=1))
        with pytest.raises((ReplicationFailure, DBAPIError), match="read-only transaction"):
            store.record_lag_samples(FLOW, [LagSample("orders", 0, NOW + timedelta(seconds=1), 1, None, None)])

    # 60 buckets of 6 minutes, each holding the samples of 3 instants (minutes ago 354, 356, 358 ... 4, 2, 0)
    assert len(series) == 60
    oldest = (NOW - timedelta(minutes=354), 3 * 3580 + 3, 358)
    assert (series[0].at, series[0].lag_records, series[0].record_age_ms) == oldest
    assert (series[-1].at, series[-1].lag_records, series[-1].record_age_ms) == (NOW, 3 * 40 + 3, 4)
    assert [(s.partition, s.lag_records) for s in newest] == [(0, 0), (1, 1), (2, 2)]
    with MetadataStore.open(url) as writer:
        assert len(writer.lag_samples(FLOW)) == len(samples)
