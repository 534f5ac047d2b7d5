"""Integration tests of the metadata store on a real SQLite file and a real PostgreSQL server."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, insert, inspect, make_url, select, text, update
from sqlalchemy.exc import IntegrityError, OperationalError

from airmirror.checkpoints.translation import failback_position, forward_position
from airmirror.devtools.local_postgres import PostgresServer, postgres_server
from airmirror.errors import ReplicationFailure
from airmirror.mm2.wire_formats import OffsetSync
from airmirror.model import (
    BatchState,
    Gap,
    LagSample,
    NoJobYet,
    OffsetRun,
    PartitionKey,
    PartitionStats,
    PartitionVerification,
    PlannedRange,
    RangeResult,
    ResetsCursor,
    Verdict,
    Verification,
)
from airmirror.store import (
    DEFAULT_LEASE_TTL_SECONDS,
    FlowBusyError,
    FlowLease,
    FlowLeaseLostError,
    MetadataStore,
    StaleCursorError,
    alembic_config,
    create_store_engine,
    describe_holder,
)
from airmirror.store.engine import MIGRATIONS_DIR, PG_IDLE_IN_TRANSACTION_S
from airmirror.store.flow_lease import acquire_flow
from airmirror.store.folding import EXACT_RUNS, FOLD_SIZE, FOLDED_RUNS
from airmirror.store.retention import Pruned
from airmirror.store.rows import utcnow
from airmirror.store.schema import VERSION_TABLE, batches, cursors, flow_leases, metadata, offset_syncs

pytestmark = pytest.mark.integration

FLOW = "primary->backup"
TOPIC = "orders"
HEAD = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    with postgres_server() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database: a SQLite file in a directory that does not exist yet, or a new PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state' / 'airmirror.db'}"
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.create_database(f"store_{uuid.uuid4().hex}")


@pytest.fixture
def store(db_url: str) -> Iterator[MetadataStore]:
    with MetadataStore.open(db_url) as opened:
        yield opened


def planned(partition: int, start: int, end: int, *, gap_start: int | None = None) -> PlannedRange:
    return PlannedRange(
        topic=TOPIC, partition=partition, start=start, end=end, remote_topic=f"primary.{TOPIC}", gap_start=gap_start
    )


def copied(plan: PlannedRange, downstream_start: int = 0) -> RangeResult:
    """The result of copying the whole range as one contiguous run."""
    if plan.size == 0:
        return RangeResult(
            topic=plan.topic, partition=plan.partition, start=plan.start, end=plan.end, records=0, bytes=0
        )
    return RangeResult(
        topic=plan.topic,
        partition=plan.partition,
        start=plan.start,
        end=plan.end,
        records=plan.size,
        bytes=plan.size * 100,
        runs=(OffsetRun(plan.start, plan.end, downstream_start),),
        downstream_start=downstream_start,
        downstream_end=downstream_start + plan.size,
    )


def run_batch(store: MetadataStore, *ranges: PlannedRange) -> int:
    batch_id = store.begin_batch(FLOW, ranges, {"ranges": len(ranges)})
    store.commit_batch(batch_id, [copied(plan) for plan in ranges])
    return batch_id


def snapshot(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every store table, read over a separate connection."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return {
                table.name: [tuple(row) for row in connection.execute(select(table).order_by(*table.primary_key))]
                for table in metadata.sorted_tables
            }
    finally:
        engine.dispose()


def key(partition: int) -> PartitionKey:
    return PartitionKey(TOPIC, partition)


def test_open_migrates_an_empty_database_to_head_idempotently(db_url: str) -> None:
    with MetadataStore.open(db_url) as store:
        assert store.schema_version() == HEAD
        batch_id = store.begin_batch(FLOW, [planned(0, 0, 10)], {})
        store.migrate()
    with MetadataStore.open(db_url) as reopened:
        assert reopened.schema_version() == HEAD
        unfinished = reopened.unfinished_batch(FLOW)
        assert unfinished is not None and unfinished.id == batch_id

    engine = create_engine(db_url)
    try:
        assert set(inspect(engine).get_table_names()) == {*metadata.tables, VERSION_TABLE}
        with engine.connect() as connection:
            assert connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all() == [HEAD]
    finally:
        engine.dispose()
    url = make_url(db_url)
    if url.get_backend_name() == "sqlite":
        assert url.database is not None and Path(url.database).is_file()


def test_migrated_schema_matches_the_table_definitions(store: MetadataStore, db_url: str) -> None:
    engine = create_engine(db_url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
            assert compare_metadata(context, metadata) == []
    finally:
        engine.dispose()


def test_concurrent_opens_of_an_empty_database_all_succeed(db_url: str) -> None:
    def open_and_read_version(_: int) -> str:
        with MetadataStore.open(db_url) as store:
            return store.schema_version()

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert list(pool.map(open_and_read_version, range(4))) == [HEAD] * 4


def test_downgrade_to_base_removes_the_schema_and_upgrade_restores_it(store: MetadataStore, db_url: str) -> None:
    engine = create_store_engine(db_url)
    try:
        with engine.begin() as connection:
            command.downgrade(alembic_config(connection), "base")
        assert set(inspect(engine).get_table_names()) == {VERSION_TABLE}
    finally:
        engine.dispose()
    store.migrate()
    assert store.schema_version() == HEAD
    assert store.cursors(FLOW) == {}


def test_begin_and_commit_move_cursors_and_record_offset_syncs(store: MetadataStore) -> None:
    first = [planned(0, 0, 10), planned(1, 5, 5)]
    batch_id = store.begin_batch(FLOW, first, {"max_records": 10})
    store.commit_batch(
        batch_id,
        [
            RangeResult(
                topic=TOPIC,
                partition=0,
                start=0,
                end=10,
                records=8,
                bytes=800,
                runs=(OffsetRun(0, 4, 100), OffsetRun(6, 10, 104)),
                downstream_start=100,
                downstream_end=108,
            ),
            copied(first[1]),
        ],
    )

    assert store.cursors(FLOW) == {key(0): 10, key(1): 5}
    assert store.offset_runs(FLOW, key(0)) == [OffsetRun(0, 4, 100), OffsetRun(6, 10, 104)]
    assert store.offset_runs(FLOW, key(1)) == []
    assert store.unfinished_batch(FLOW) is None
    [record] = store.batches(FLOW)
    assert (record.id, record.state, record.records, record.bytes, record.error) == (
        batch_id,
        BatchState.COMMITTED,
        8,
        800,
        None,
    )
    assert record.params == {"max_records": 10}
    assert record.finished_at is not None and record.finished_at >= record.created_at
    assert record.created_at.tzinfo is UTC and record.finished_at.tzinfo is UTC

    run_batch(store, planned(0, 10, 15), planned(1, 5, 9))
    assert store.cursors(FLOW) == {key(0): 15, key(1): 9}
    assert store.offset_runs(FLOW, key(0)) == [OffsetRun(0, 4, 100), OffsetRun(6, 10, 104), OffsetRun(10, 15, 0)]
    assert store.cursors("another flow") == {}


def test_find_offset_run_returns_the_run_containing_or_following_an_offset(store: MetadataStore) -> None:
    batch_id = store.begin_batch(FLOW, [planned(0, 0, 20)], {})
    runs = (OffsetRun(0, 4, 100), OffsetRun(6, 10, 104))
    store.commit_batch(
        batch_id,
        [
            RangeResult(
                topic=TOPIC,
                partition=0,
                start=0,
                end=20,
                records=8,
                bytes=800,
                runs=runs,
                downstream_start=100,
                downstream_end=108,
            )
        ],
    )

    assert store.find_offset_run(FLOW, key(0), 0) == runs[0]
    assert store.find_offset_run(FLOW, key(0), 3) == runs[0]
    assert store.find_offset_run(FLOW, key(0), 4) == runs[1]
    assert store.find_offset_run(FLOW, key(0), 9) == runs[1]
    assert store.find_offset_run(FLOW, key(0), 10) is None
    assert store.find_offset_run(FLOW, key(1), 0) is None


def test_offsets_beyond_32_bits_round_trip(store: MetadataStore) -> None:
    start = 2**40
    run_batch(store, planned(0, start, start + 3))
    assert store.cursors(FLOW) == {key(0): start + 3}
    assert store.offset_runs(FLOW, key(0)) == [OffsetRun(start, start + 3, 0)]


def test_a_flow_has_at_most_one_running_batch(store: MetadataStore, db_url: str) -> None:
    running = store.begin_batch(FLOW, [planned(0, 0, 10)], {})
    with pytest.raises(ReplicationFailure, match="already has a RUNNING batch"):
        store.begin_batch(FLOW, [planned(0, 0, 10)], {})
    other = store.begin_batch("other flow", [planned(0, 0, 10)], {})
    assert other != running

    engine = create_engine(db_url)
    try:
        with pytest.raises(IntegrityError), engine.begin() as connection:
            connection.execute(
                insert(batches).values(
                    flow=FLOW, state=BatchState.RUNNING, created_at=store.batches(FLOW)[0].created_at, params={}
                )
            )
    finally:
        engine.dispose()

    store.commit_batch(running, [copied(planned(0, 0, 10))])
    assert store.begin_batch(FLOW, [planned(0, 10, 20)], {}) > running


def test_commit_with_a_stale_cursor_raises_and_writes_nothing(store: MetadataStore, db_url: str) -> None:
    run_batch(store, planned(0, 0, 10), planned(1, 0, 10))
    stale = [planned(0, 10, 20), planned(1, 5, 20), planned(2, 0, 7, gap_start=0)]
    batch_id = store.begin_batch(FLOW, stale, {})
    before = snapshot(db_url)

    with pytest.raises(StaleCursorError, match=r"orders-1 is at 10, planned from 5") as raised:
        store.commit_batch(batch_id, [copied(plan) for plan in stale])

    assert isinstance(raised.value, ReplicationFailure)
    assert snapshot(db_url) == before
    unfinished = store.unfinished_batch(FLOW)
    assert unfinished is not None and unfinished.id == batch_id


def test_a_cursor_moved_by_someone_else_makes_the_plan_stale(store: MetadataStore, db_url: str) -> None:
    run_batch(store, planned(0, 0, 10))
    batch_id = store.begin_batch(FLOW, [planned(0, 10, 20)], {})
    engine = create_engine(db_url)
    try:
        with engine.begin() as connection:
            connection.execute(update(cursors).values(next_offset=12))
    finally:
        engine.dispose()
    before = snapshot(db_url)

    with pytest.raises(StaleCursorError, match="orders-0 is at 12, planned from 10"):
        store.commit_batch(batch_id, [copied(planned(0, 10, 20))])
    assert snapshot(db_url) == before


def test_commit_records_gaps_lost_to_retention(store: MetadataStore) -> None:
    run_batch(store, planned(0, 0, 10))
    after_retention = [planned(0, 25, 35, gap_start=10), planned(1, 7, 9, gap_start=0)]
    run_batch(store, *after_retention)

    assert store.gaps(FLOW) == [Gap(TOPIC, 0, 10, 25), Gap(TOPIC, 1, 0, 7)]
    assert store.cursors(FLOW) == {key(0): 35, key(1): 9}
    assert store.find_offset_run(FLOW, key(0), 10) == OffsetRun(25, 35, 0)
    assert store.gaps("another flow") == []


def test_a_range_planned_from_below_the_log_start_expects_the_old_cursor(store: MetadataStore) -> None:
    run_batch(store, planned(0, 0, 10))
    batch_id = store.begin_batch(FLOW, [planned(0, 30, 40, gap_start=20)], {})
    with pytest.raises(StaleCursorError, match="orders-0 is at 10, planned from 20"):
        store.commit_batch(batch_id, [copied(planned(0, 30, 40, gap_start=20))])
    assert store.gaps(FLOW) == []


def test_unfinished_batch_returns_the_planned_ranges(store: MetadataStore) -> None:
    plan = [
        planned(0, 3, 10),
        planned(1, 40, 45, gap_start=12),
        PlannedRange(topic="payments", partition=0, start=0, end=0, remote_topic="primary.payments"),
    ]
    params = {"max_records": 1000, "topics": ["orders", "payments"], "dry_run": False}
    batch_id = store.begin_batch(FLOW, plan, params)

    unfinished = store.unfinished_batch(FLOW)
    assert unfinished is not None
    assert (unfinished.id, unfinished.flow, unfinished.state) == (batch_id, FLOW, BatchState.RUNNING)
    assert unfinished.ranges == sorted(plan, key=lambda r: r.key)
    assert unfinished.params == params
    assert unfinished.created_at.tzinfo is UTC
    assert (unfinished.finished_at, unfinished.records, unfinished.bytes, unfinished.error) == (None, None, None, None)
    assert store.unfinished_batch("another flow") is None


def test_fail_batch_keeps_the_reason_and_leaves_cursors_alone(store: MetadataStore) -> None:
    run_batch(store, planned(0, 0, 10))
    batch_id = store.begin_batch(FLOW, [planned(0, 10, 20)], {})
    store.fail_batch(batch_id, "Spark job failed: executor lost")

    failed = store.batches(FLOW)[0]
    assert (failed.id, failed.state, failed.error) == (batch_id, BatchState.FAILED, "Spark job failed: executor lost")
    assert failed.finished_at is not None and failed.finished_at.tzinfo is UTC
    assert store.unfinished_batch(FLOW) is None
    assert store.cursors(FLOW) == {key(0): 10}
    with pytest.raises(ReplicationFailure, match="is FAILED: only a RUNNING batch can be committed"):
        store.commit_batch(batch_id, [copied(planned(0, 10, 20))])
    with pytest.raises(ReplicationFailure, match="is FAILED: only a RUNNING batch can be failed"):
        store.fail_batch(batch_id, "again")
    with pytest.raises(ReplicationFailure, match="does not exist"):
        store.fail_batch(batch_id + 1000, "unknown")
    assert store.begin_batch(FLOW, [planned(0, 10, 20)], {}) > batch_id


@pytest.mark.parametrize(
    "results",
    [
        pytest.param([copied(planned(0, 10, 20))], id="missing-result"),
        pytest.param([copied(planned(0, 10, 20)), copied(planned(1, 0, 5)), copied(planned(2, 0, 1))], id="unplanned"),
        pytest.param([copied(planned(0, 10, 20)), copied(planned(1, 0, 5)), copied(planned(1, 0, 5))], id="duplicate"),
        pytest.param([copied(planned(0, 11, 20)), copied(planned(1, 0, 5))], id="wrong-start"),
        pytest.param([copied(planned(0, 10, 21)), copied(planned(1, 0, 5))], id="beyond-plan"),
        pytest.param(
            [
                RangeResult(
                    topic=TOPIC,
                    partition=0,
                    start=10,
                    end=20,
                    records=10,
                    bytes=1000,
                    runs=(OffsetRun(10, 15, 0), OffsetRun(14, 20, 5)),
                    downstream_start=0,
                    downstream_end=11,
                ),
                copied(planned(1, 0, 5)),
            ],
            id="overlapping-runs",
        ),
    ],
)
def test_commit_rejects_results_that_do_not_match_the_plan(
    store: MetadataStore, db_url: str, results: list[RangeResult]
) -> None:
    run_batch(store, planned(0, 0, 10))
    batch_id = store.begin_batch(FLOW, [planned(0, 10, 20), planned(1, 0, 5)], {})
    before = snapshot(db_url)
    with pytest.raises(ValueError):
        store.commit_batch(batch_id, results)
    assert snapshot(db_url) == before


@pytest.mark.parametrize(
    ("ranges", "params"),
    [
        pytest.param([planned(0, 0, 1), planned(0, 1, 2)], {}, id="partition-twice"),
        pytest.param([planned(0, 5, 4)], {}, id="end-before-start"),
        pytest.param([planned(0, 5, 6, gap_start=6)], {}, id="gap-above-start"),
        pytest.param([planned(0, 0, 1)], {"when": object()}, id="params-not-json"),
    ],
)
def test_begin_batch_rejects_invalid_plans(
    store: MetadataStore, ranges: list[PlannedRange], params: dict[str, Any]
) -> None:
    with pytest.raises(ValueError):
        store.begin_batch(FLOW, ranges, params)
    assert store.batches(FLOW) == []


def test_batches_are_listed_newest_first(store: MetadataStore) -> None:
    ids = [run_batch(store, planned(0, offset, offset + 1)) for offset in range(3)]
    assert [record.id for record in store.batches(FLOW)] == ids[::-1]
    assert [record.id for record in store.batches(FLOW, limit=2)] == ids[:0:-1]
    assert store.batches(FLOW, limit=2)[0].ranges == [planned(0, 2, 3)]
    with pytest.raises(ValueError):
        store.batches(FLOW, limit=0)


def test_partition_stats_summarise_committed_batches_and_gaps(store: MetadataStore) -> None:
    run_batch(store, planned(0, 0, 10), planned(1, 0, 4))
    failed = store.begin_batch(FLOW, [planned(0, 10, 50)], {})
    store.fail_batch(failed, "abandoned")
    last = run_batch(store, planned(0, 30, 35, gap_start=10))
    last_at = store.batches(FLOW, limit=1)[0].finished_at
    assert last_at is not None

    stats = store.partition_stats(FLOW)
    assert stats[key(0)] == PartitionStats(
        cursor=35, records=15, bytes=1500, last_batch_id=last, last_batch_at=last_at, gap_count=1, gap_offsets=20
    )
    assert stats[key(1)].cursor == 4
    assert (stats[key(1)].records, stats[key(1)].bytes, stats[key(1)].gap_count, stats[key(1)].gap_offsets) == (
        4,
        400,
        0,
        0,
    )
    assert set(stats) == {key(0), key(1)}
    assert store.partition_stats("another flow") == {}


def test_a_verification_is_stored_whole_and_the_newest_is_read_back(store: MetadataStore) -> None:
    assert store.last_verification("a->b") is None
    extra = PartitionVerification(
        topic="orders",
        partition=1,
        remote_topic="a.orders",
        verdict=Verdict.EXTRA,
        first_offset=2**40,
        source_start=0,
        source_end=10,
        target_start=0,
        target_end=11,
        source_records=10,
        target_records=11,
        extra=1,
        source_digest="ab" * 32,
        target_digest="cd" * 32,
        note="",
        reason="target offset 1099511627776 is no copy",
    )
    stopped = PartitionVerification(
        topic="refunds",
        partition=0,
        remote_topic="a.refunds",
        verdict=Verdict.STOPPED,
        first_offset=None,
        source_start=7,
        source_end=7,
        target_start=0,
        target_end=0,
        source_records=0,
        target_records=0,
        reason="replication stopped: remote topic a.refunds was deleted",
    )
    equal = PartitionVerification(
        topic="orders",
        partition=0,
        remote_topic="a.orders",
        verdict=Verdict.EQUAL,
        first_offset=None,
        source_start=5,
        source_end=10,
        target_start=0,
        target_end=5,
        source_records=5,
        target_records=5,
        compacted_source=2,
        note="source offsets before 5 deleted by retention, not compared",
    )
    store.record_verification(Verification("a->b", utcnow() - timedelta(hours=1), None, [equal]))
    stored = store.record_verification(Verification("a->b", utcnow(), "orders|refunds", [extra, equal, stopped]))

    newest = store.last_verification("a->b")

    assert (newest.id, newest.topics_regex, newest.verified_at) == (stored.id, "orders|refunds", stored.verified_at)
    assert newest.partitions == [equal, extra, stopped]
    assert {k: n for k, n in newest.counts().items() if n} == {
        "equal": 1,
        "extra": 1,
        "stopped": 1,
    } and not newest.equal
    assert set(newest.counts()) == {v.value for v in Verdict}
    assert store.last_verification("b->a") is None


def test_a_takeover_is_one_committed_batch_with_its_runs_and_mm2_syncs(store: MetadataStore) -> None:
    key = PartitionKey("orders", 0)
    plan = PlannedRange(topic="orders", partition=0, start=0, end=120, remote_topic="a.orders")
    result = RangeResult(
        topic="orders",
        partition=0,
        start=0,
        end=120,
        records=20,
        bytes=0,
        runs=(OffsetRun(100, 120, 100),),
        downstream_start=100,
        downstream_end=120,
    )
    syncs = [OffsetSync("orders", 0, 0, 0), OffsetSync("orders", 0, 100, 100)]

    batch_id = store.record_takeover("a->b", [plan], [result], syncs, {"takeover": "mm2"})

    assert store.cursors("a->b") == {key: 120} and store.unfinished_batch("a->b") is None
    assert store.batches("a->b")[0].id == batch_id and store.offset_runs("a->b", key) == [OffsetRun(100, 120, 100)]
    assert store.mm2_sync_before("a->b", key, 57) == (syncs[0], 100)
    assert store.mm2_sync_before("a->b", PartitionKey("orders", 1), 57) == (None, None)
    with pytest.raises(StaleCursorError):
        store.record_takeover("a->b", [plan], [result], syncs, {"takeover": "mm2"})
    assert store.cursors("a->b") == {key: 120}


def test_commit_fails_while_the_database_is_down_and_succeeds_after_restart(postgres: PostgresServer) -> None:
    url = postgres.create_database(f"store_{uuid.uuid4().hex}")
    with MetadataStore.open(url) as store:
        run_batch(store, planned(0, 0, 10))
        plan = [planned(0, 10, 20)]
        batch_id = store.begin_batch(FLOW, plan, {})

        postgres.stop()
        try:
            with pytest.raises(ReplicationFailure, match=f"could not commit batch {batch_id}") as raised:
                store.commit_batch(batch_id, [copied(plan[0])])
        finally:
            postgres.start()

        message = str(raised.value)
        assert postgres.password not in message
        assert f"airmirror:***@127.0.0.1:{postgres.port}" in message
        assert isinstance(raised.value.__cause__, OperationalError)

        store.commit_batch(batch_id, [copied(plan[0])])
        assert store.cursors(FLOW) == {key(0): 20}
        assert store.offset_runs(FLOW, key(0)) == [OffsetRun(0, 10, 0), OffsetRun(10, 20, 0)]


def test_a_restart_between_calls_is_transparent(postgres: PostgresServer) -> None:
    url = postgres.create_database(f"store_{uuid.uuid4().hex}")
    with MetadataStore.open(url) as store:
        batch_id = store.begin_batch(FLOW, [planned(0, 0, 10)], {})
        postgres.stop()
        postgres.start()
        store.commit_batch(batch_id, [copied(planned(0, 0, 10))])
        assert store.cursors(FLOW) == {key(0): 10}


def test_open_of_an_unreachable_database_raises_replication_failure(postgres: PostgresServer) -> None:
    url = make_url(postgres.url).set(port=1).render_as_string(hide_password=False)
    with pytest.raises(ReplicationFailure, match="could not migrate the schema") as raised:
        MetadataStore.open(url)
    assert postgres.password not in str(raised.value)


# Flow leases (airmirror.store.flow_lease): at most one run works on a flow at a time.

LEASE_FLOW = "a->b"


def holder_name(name: str) -> str:
    return describe_holder(f"test {name}")


def test_a_flow_lease_is_held_for_the_block_and_released_after(store: MetadataStore) -> None:
    assert store.flow_lease(LEASE_FLOW) is None
    with store.hold_flow(LEASE_FLOW, holder_name("first")) as lease:
        held = store.flow_lease(LEASE_FLOW)
        assert held is not None and held.holder == holder_name("first") == lease.holder
        assert held.acquired_at.tzinfo is UTC
        assert held.expires_at - held.acquired_at == timedelta(seconds=DEFAULT_LEASE_TTL_SECONDS)
        with store.hold_flow("another->flow", holder_name("other flow")):
            assert store.flow_lease("another->flow") is not None
        lease.check()
    assert store.flow_lease(LEASE_FLOW) is None
    with store.hold_flow(LEASE_FLOW, holder_name("second")):
        assert store.flow_lease(LEASE_FLOW).holder == holder_name("second")
    assert store.flow_lease(LEASE_FLOW) is None


def test_a_held_flow_is_busy_with_a_plain_message_even_for_the_same_holder(store: MetadataStore) -> None:
    holder = describe_holder("Airflow dag airmirror__a__b run scheduled__2026 task replicate try 1")
    with store.hold_flow(LEASE_FLOW, holder) as lease:
        held = store.flow_lease(LEASE_FLOW)
        for contender in (holder_name("cli"), holder):
            with pytest.raises(FlowBusyError) as raised, store.hold_flow(LEASE_FLOW, contender):
                pytest.fail("a held flow was acquired twice")
            error = raised.value
            assert isinstance(error, ReplicationFailure) and error.exit_code == 1
            since = held.acquired_at.isoformat(timespec="seconds").replace("+00:00", "Z")
            expires = held.expires_at.isoformat(timespec="seconds").replace("+00:00", "Z")
            assert str(error) == (
                f"flow 'a->b' is being replicated by another run (holder {holder}, since {since}, "
                f"lease expires {expires}); nothing was changed; run again once it finishes"
            )
            assert error.flow == LEASE_FLOW and error.current == store.flow_lease(LEASE_FLOW)
        lease.check()
    assert store.flow_lease(LEASE_FLOW) is None


def test_an_exception_in_the_block_releases_the_lease(store: MetadataStore) -> None:
    with pytest.raises(RuntimeError, match="copy failed"), store.hold_flow(LEASE_FLOW, holder_name("failing")):
        raise RuntimeError("copy failed")
    assert store.flow_lease(LEASE_FLOW) is None


def contend(db_url: str, contenders: int, ttl_seconds: float) -> tuple[list[FlowLease], list[FlowBusyError]]:
    """``contenders`` threads, each with its own engine (as separate processes would have), acquire the lease
    at the same moment; returns the leases won (not renewed, not released) and the busy errors."""
    engines = [create_store_engine(db_url) for _ in range(contenders)]
    start = threading.Barrier(contenders)

    def attempt(index: int) -> FlowLease | FlowBusyError:
        start.wait()
        try:
            return acquire_flow(engines[index], LEASE_FLOW, holder_name(f"contender {index}"), ttl_seconds=ttl_seconds)
        except FlowBusyError as busy:
            return busy

    try:
        with ThreadPoolExecutor(max_workers=contenders) as pool:
            outcomes = list(pool.map(attempt, range(contenders)))
    finally:
        for engine in engines:
            engine.dispose()
    return [o for o in outcomes if isinstance(o, FlowLease)], [o for o in outcomes if isinstance(o, FlowBusyError)]


def test_exactly_one_of_concurrent_contenders_acquires_a_free_or_expired_lease(
    store: MetadataStore, db_url: str
) -> None:
    """Leases never overlap.  A contender kept waiting for the row lock longer than the TTL (a loaded machine)
    may take over the lease the one before it just won and never renewed: that is a takeover of an expired
    lease, so the check is on overlap, and the TTL is long enough for one winner per round in practice."""
    ttl = 2.0
    for round_ in range(3):
        won, busy = contend(db_url, 6, ttl_seconds=ttl)
        assert won and len(won) + len(busy) == 6, f"round {round_}: {len(won)} won, {len(busy)} busy"
        won.sort(key=lambda lease: lease.acquired_at)
        for earlier, later in pairwise(won):
            assert later.acquired_at >= earlier.expires_at, f"round {round_}: {earlier} and {later} overlap"
        assert store.flow_lease(LEASE_FLOW).holder == won[-1].holder
        assert all(error.current is not None and error.current.holder in {w.holder for w in won} for error in busy)
        time.sleep(ttl + 0.2)  # the winner never renews: the next round takes over its expired lease


def test_a_lease_taken_over_after_waiting_for_a_lock_is_not_born_expired(store: MetadataStore, db_url: str) -> None:
    """A contender whose take-over waits longer than the TTL for another transaction's lock on the lease row
    must stamp its lease from when it got the lock: a third contender right after it finds the flow busy."""
    engines = [create_store_engine(db_url) for _ in range(3)]
    try:
        acquire_flow(engines[0], LEASE_FLOW, holder_name("expired"), ttl_seconds=0.3)
        time.sleep(0.5)
        with ThreadPoolExecutor(max_workers=1) as pool:
            with engines[1].begin() as blocker:
                blocker.execute(select(flow_leases).where(flow_leases.c.flow == LEASE_FLOW).with_for_update())
                waiting = pool.submit(acquire_flow, engines[2], LEASE_FLOW, holder_name("waiting"), ttl_seconds=1.0)
                time.sleep(1.5)
            lease = waiting.result(timeout=30)
        assert store.flow_lease(LEASE_FLOW).holder == lease.holder
        with pytest.raises(FlowBusyError):
            acquire_flow(engines[1], LEASE_FLOW, holder_name("right after"), ttl_seconds=1.0)
        assert lease.release() is True
    finally:
        for engine in engines:
            engine.dispose()


def test_an_expired_lease_is_taken_over_and_its_old_holder_learns_it(store: MetadataStore, db_url: str) -> None:
    engine = create_store_engine(db_url)
    try:
        old = acquire_flow(engine, LEASE_FLOW, holder_name("stalled"), ttl_seconds=0.5)
        with pytest.raises(FlowBusyError):
            acquire_flow(engine, LEASE_FLOW, holder_name("early"), ttl_seconds=5)
        time.sleep(0.7)
        assert old.lost is None  # nobody noticed yet: expiry alone loses nothing
        with store.hold_flow(LEASE_FLOW, holder_name("new")) as new:
            with pytest.raises(FlowLeaseLostError) as raised:
                old.check()
            message = str(raised.value)
            assert message.startswith(
                f"flow 'a->b' is being replicated by another run (holder {holder_name('new')}, since "
            )
            assert f"this run (holder {holder_name('stalled')}) lost its lease" in message
            assert "stopping without committing" in message
            assert old.lost is raised.value
            assert old.release() is False
            assert store.flow_lease(LEASE_FLOW).holder == holder_name("new")
            new.check()
        assert store.flow_lease(LEASE_FLOW) is None
    finally:
        engine.dispose()


def test_an_expired_lease_nobody_took_over_is_still_ours(store: MetadataStore, db_url: str) -> None:
    engine = create_store_engine(db_url)
    try:
        lease = acquire_flow(engine, LEASE_FLOW, holder_name("slow"), ttl_seconds=0.3)
        time.sleep(0.5)
        lease.check()
        assert lease.expires_at > lease.acquired_at + timedelta(seconds=0.3)
        with pytest.raises(FlowBusyError):
            acquire_flow(engine, LEASE_FLOW, holder_name("late"), ttl_seconds=5)
        assert lease.release() is True
    finally:
        engine.dispose()


def test_renewal_keeps_the_lease_past_its_ttl(store: MetadataStore) -> None:
    with store.hold_flow(LEASE_FLOW, holder_name("long run"), ttl_seconds=1.0) as lease:
        time.sleep(2.5)
        with pytest.raises(FlowBusyError), store.hold_flow(LEASE_FLOW, holder_name("contender")):
            pass
        held = store.flow_lease(LEASE_FLOW)
        assert held.holder == holder_name("long run")
        assert held.renewed_at - held.acquired_at >= timedelta(seconds=1.5)
        assert lease.lost is None
        lease.check()
    assert store.flow_lease(LEASE_FLOW) is None


def test_the_renewal_thread_notices_a_lost_lease(store: MetadataStore, db_url: str) -> None:
    engine = create_store_engine(db_url)
    try:
        with store.hold_flow(LEASE_FLOW, holder_name("paused"), ttl_seconds=0.6) as lease:
            # What another run does once this one's lease expired: overwrite the row with its own lease.
            with engine.begin() as connection:
                connection.execute(
                    update(flow_leases).where(flow_leases.c.flow == LEASE_FLOW).values(holder="thief", token="0" * 32)
                )
            deadline = time.monotonic() + 5
            while lease.lost is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert lease.lost is not None, "the renewal thread did not notice the lost lease"
            with pytest.raises(FlowLeaseLostError, match=r"\(holder thief, since .*lost its lease"):
                lease.check()
        assert store.flow_lease(LEASE_FLOW).holder == "thief"  # leaving the block left the new lease alone
    finally:
        engine.dispose()


def test_a_store_fenced_by_a_lease_taken_over_writes_no_row(store: MetadataStore, db_url: str) -> None:
    """The fencing rule on both databases: the guard and the write commit together or not at all."""
    engine = create_store_engine(db_url)
    try:
        old = acquire_flow(engine, LEASE_FLOW, holder_name("frozen"), ttl_seconds=0.3)
        fenced = store.fenced_by(old)
        batch_id = fenced.begin_batch(LEASE_FLOW, [planned(0, 0, 10)], {})
        time.sleep(0.5)
        with store.hold_flow(LEASE_FLOW, holder_name("owner")):
            with pytest.raises(FlowLeaseLostError, match=r"holder test owner.*lost its lease"):
                fenced.set_copy_tasks(batch_id, 2, 0)
            with pytest.raises(FlowLeaseLostError):
                fenced.commit_batch(batch_id, [copied(planned(0, 0, 10))])
            unfinished = store.unfinished_batch(LEASE_FLOW)
            assert unfinished is not None and unfinished.jobs == NoJobYet()
            assert store.cursors(LEASE_FLOW) == {}
    finally:
        engine.dispose()


def test_a_takeover_waits_for_a_guarded_write_which_lands_before_it(store: MetadataStore, db_url: str) -> None:
    """A guarded write holds the lease row (PostgreSQL) or the database (SQLite) until it commits: a run taking the
    expired lease over waits for it, so the old holder's write lands before the takeover, and its next one fails."""
    engines = [create_store_engine(db_url) for _ in range(2)]
    try:
        old = acquire_flow(engines[0], LEASE_FLOW, holder_name("slow"), ttl_seconds=0.5)
        fenced = store.fenced_by(old)
        time.sleep(0.7)  # expired, nobody took it over yet
        with ThreadPoolExecutor(max_workers=1) as pool:
            with engines[0].begin() as connection:
                old.guard(connection)
                connection.execute(
                    update(flow_leases).where(flow_leases.c.token == "none").values(holder="x")
                )  # a write
                waiting = pool.submit(acquire_flow, engines[1], LEASE_FLOW, holder_name("next"), ttl_seconds=60)
                time.sleep(0.5)
                assert not waiting.done(), "the takeover did not wait for the guarded transaction"
            new = waiting.result(timeout=60)
        with pytest.raises(FlowLeaseLostError, match=r"holder test next.*lost its lease"):
            fenced.begin_batch(LEASE_FLOW, [planned(0, 0, 10)], {})
        assert store.unfinished_batch(LEASE_FLOW) is None
        assert new.release() is True
    finally:
        for engine in engines:
            engine.dispose()


def test_postgresql_sessions_end_a_transaction_left_idle(postgres: PostgresServer) -> None:
    """A frozen holder in the middle of a transaction must not hold the lease row for ever
    (:data:`~airmirror.store.engine.PG_IDLE_IN_TRANSACTION_S`)."""
    engine = create_store_engine(postgres.create_database(f"store_{uuid.uuid4().hex}"))
    try:
        with engine.connect() as connection:
            shown = connection.exec_driver_sql("SHOW idle_in_transaction_session_timeout").scalar_one()
        assert shown == f"{PG_IDLE_IN_TRANSACTION_S}s"
    finally:
        engine.dispose()


FREEZE_IN_A_TRANSACTION = """
import os, signal, sys
from sqlalchemy import select
from airmirror.store.engine import create_store_engine, transaction
from airmirror.store.schema import flow_leases
engine = create_store_engine(sys.argv[1])
with transaction(engine, "freeze", reads_only=sys.argv[2] == "read") as connection:
    connection.execute(select(flow_leases)).all()
    print("in the transaction", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
"""


@pytest.mark.parametrize("frozen_in", ["read", "write"])
def test_a_process_frozen_in_a_transaction_holds_up_no_open_and_no_read(
    store: MetadataStore, db_url: str, frozen_in: str
) -> None:
    """A driver frozen (SIGSTOP) inside a transaction: the next run still opens the store at head and reads it; and
    after a frozen read it also takes the flow's lease and writes (SQLite reads take no lock, in WAL mode)."""
    frozen = subprocess.Popen(
        [sys.executable, "-c", FREEZE_IN_A_TRANSACTION, db_url, frozen_in], stdout=subprocess.PIPE, text=True
    )
    try:
        assert frozen.stdout is not None and frozen.stdout.readline() == "in the transaction\n"
        with MetadataStore.open(db_url) as next_run:
            assert next_run.flow_lease(LEASE_FLOW) is None and next_run.unfinished_batch(FLOW) is None
            if frozen_in == "read":
                with next_run.hold_flow(LEASE_FLOW, holder_name("next run")):
                    run_batch(next_run, planned(0, 0, 10))
    finally:
        frozen.kill()
        frozen.wait()


HOLD_AND_SLEEP = """
import sys, time
from airmirror.store import MetadataStore
with MetadataStore.open(sys.argv[1]) as store, store.hold_flow("a->b", "holder that dies", ttl_seconds=60):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_dead_holder_on_this_machine_is_taken_over_at_once(store: MetadataStore, db_url: str) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD_AND_SLEEP, db_url], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with (
            pytest.raises(FlowBusyError, match=r"\(holder holder that dies, since "),
            store.hold_flow(LEASE_FLOW, holder_name("while alive")),
        ):
            pass
    finally:
        holder.kill()
        holder.wait()
    expires_at = store.flow_lease(LEASE_FLOW).expires_at
    with store.hold_flow(LEASE_FLOW, holder_name("after the crash")):
        taken = store.flow_lease(LEASE_FLOW)
        assert taken.holder == holder_name("after the crash") and taken.acquired_at < expires_at


def test_a_holder_on_another_machine_is_waited_for_until_its_lease_expires(store: MetadataStore, db_url: str) -> None:
    engine = create_store_engine(db_url)
    try:
        acquire_flow(engine, LEASE_FLOW, "holder elsewhere", ttl_seconds=1.0)
        with engine.begin() as connection:  # a pid that is gone, but on another boot: cannot be checked from here
            connection.execute(update(flow_leases).values(process=f"{uuid.uuid4()}/pid:[1]/999999/1"))
        with pytest.raises(FlowBusyError, match="holder holder elsewhere"):
            acquire_flow(engine, LEASE_FLOW, holder_name("too early"))
        time.sleep(1.2)
        with store.hold_flow(LEASE_FLOW, holder_name("after expiry")):
            assert store.flow_lease(LEASE_FLOW).holder == holder_name("after expiry")
    finally:
        engine.dispose()


def test_a_lease_survives_the_database_being_down_for_a_while(postgres: PostgresServer) -> None:
    url = postgres.create_database(f"store_{uuid.uuid4().hex}")
    with MetadataStore.open(url) as store:
        with store.hold_flow(LEASE_FLOW, holder_name("patient"), ttl_seconds=1.5) as lease:
            postgres.stop()
            try:
                time.sleep(2.0)  # renewals fail meanwhile, and the lease expires
            finally:
                postgres.start()
            lease.check()  # nobody took it over: still ours
            assert lease.lost is None
            with pytest.raises(FlowBusyError), store.hold_flow(LEASE_FLOW, holder_name("contender")):
                pass
        assert store.flow_lease(LEASE_FLOW) is None


def copied_runs(partition: int, start: int, end: int, downstream_start: int) -> RangeResult:
    """The result of copying ``[start, end)`` of ``partition`` as one run from ``downstream_start``."""
    size = end - start
    return RangeResult(
        topic=TOPIC,
        partition=partition,
        start=start,
        end=end,
        records=size,
        bytes=size * 100,
        runs=(OffsetRun(start, end, downstream_start),),
        downstream_start=downstream_start,
        downstream_end=downstream_start + size,
    )


def commit(store: MetadataStore, *results: RangeResult) -> int:
    batch_id = store.begin_batch(FLOW, [planned(r.partition, r.start, r.end) for r in results], {})
    store.commit_batch(batch_id, list(results))
    return batch_id


def translations(
    store: MetadataStore, partition: int, upto: int, target_start: int, source_start: int, step: int = 1
) -> tuple[list[int | None], list[int | None]]:
    """Forward translation of every ``step``-th upstream offset below ``upto`` and failback of every ``step``-th
    downstream offset below it, as the store's runs give them (with these log starts)."""
    k = key(partition)
    cursor = store.cursors(FLOW)[k]
    offsets = range(0, upto, step)
    forward = [
        forward_position(u, cursor, store.find_offset_run(FLOW, k, u), store.last_offset_run(FLOW, k), target_start)
        for u in offsets
    ]
    back = [
        failback_position(d, cursor, store.find_offset_run_downstream(FLOW, k, d), False, source_start) for d in offsets
    ]
    return forward, back


def listed_translations(runs: list[OffsetRun], cursor: int, upto: int) -> tuple[list[int | None], list[int | None]]:
    """The same translations computed from a plain list of runs (the runs each batch wrote, unmerged)."""
    forward = [
        forward_position(u, cursor, next((r for r in runs if r.upstream_end > u), None), runs[-1], 0)
        for u in range(upto)
    ]
    back = []
    for d in range(upto):
        containing = [r for r in runs if r.downstream_start <= d < r.downstream_start + r.length]
        covering = containing[0] if containing else next((r for r in runs if r.downstream_start > d), None)
        back.append(failback_position(d, cursor, covering, False, 0))
    return forward, back


def batch_ids_of_runs(db_url: str, partition: int) -> list[int | None]:
    engine = create_engine(db_url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                select(offset_syncs.c.batch_id)
                .where(offset_syncs.c.partition == partition)
                .order_by(offset_syncs.c.upstream_start)
            )
            return [row.batch_id for row in rows]
    finally:
        engine.dispose()


def test_runs_that_later_batches_continue_exactly_are_extended_and_translate_as_before(
    store: MetadataStore, db_url: str
) -> None:
    exact = [
        OffsetRun(10 * i, 10 * i + 10, 100 + 10 * i) for i in range(5)
    ]  # each batch continues the last on both sides
    marked = [OffsetRun(10 * i, 10 * i + 10, 11 * i) for i in range(5)]  # a commit marker after each batch's copies
    ids = [
        commit(
            store,
            copied_runs(0, r.upstream_start, r.upstream_end, r.downstream_start),
            copied_runs(1, m.upstream_start, m.upstream_end, m.downstream_start),
        )
        for r, m in zip(exact, marked, strict=True)
    ]

    assert store.offset_runs(FLOW, key(0)) == [OffsetRun(0, 50, 100)]
    assert batch_ids_of_runs(db_url, 0) == [ids[0]]  # the batch that copied the run's first record
    assert store.offset_runs(FLOW, key(1)) == marked
    assert translations(store, 0, 170, 0, 0) == listed_translations(exact, 50, 170)
    assert translations(store, 1, 170, 0, 0) == listed_translations(marked, 50, 170)


def test_retention_prunes_old_history_and_keeps_what_is_still_needed(store: MetadataStore, db_url: str) -> None:
    first = run_batch(store, planned(0, 0, 10), planned(1, 0, 4))
    failed = store.begin_batch(FLOW, [planned(0, 10, 50)], {})
    store.fail_batch(failed, "abandoned")
    middle = [run_batch(store, planned(0, 10, 20)), run_batch(store, planned(0, 30, 40, gap_start=20))]
    last = run_batch(store, planned(0, 40, 45))
    running = store.begin_batch(FLOW, [planned(0, 45, 50)], {})
    cutoff = utcnow()
    store.record_lag_samples(
        FLOW,
        [
            LagSample(TOPIC, 0, cutoff - timedelta(hours=1), 9, None, None),
            LagSample(TOPIC, 0, cutoff + timedelta(hours=1), 5, None, None),
        ],
    )
    checks = [
        store.record_verification(Verification(flow, cutoff - timedelta(hours=h), None, []))
        for flow, h in ((FLOW, 3), (FLOW, 2), (FLOW, 1), ("a->b", 3))
    ]
    stats, runs = store.partition_stats(FLOW), store.offset_runs(FLOW, key(0))

    assert store.prune_history(FLOW, cutoff - timedelta(hours=4)) == Pruned()
    assert store.prune_history(FLOW, cutoff) == Pruned(batches=3, gaps=1, lag_samples=1, verifications=2)

    assert {b.id for b in store.batches(FLOW)} == {
        first,
        last,
        running,
    }  # the first, those cursors name, the running one
    assert store.unfinished_batch(FLOW).ranges == [planned(0, 45, 50)]
    assert store.partition_stats(FLOW) == stats
    assert store.offset_runs(FLOW, key(0)) == runs and batch_ids_of_runs(db_url, 0) == [first, None, None, last]
    assert store.gaps(FLOW) == [] and [s.lag_records for s in store.lag_samples(FLOW)] == [5]
    assert store.last_verification(FLOW).id == checks[2].id and store.last_verification("a->b").id == checks[3].id
    assert middle[0] not in {b.id for b in store.batches(FLOW)}

    store.commit_batch(running, [copied(planned(0, 45, 50))])
    stats = store.partition_stats(FLOW)
    assert store.prune_history(FLOW, utcnow()) == Pruned(batches=1)  # ``last``: no cursor names it any more
    assert store.partition_stats(FLOW) == stats and stats[key(0)].records == 10 + 10 + 10 + 5 + 5
    assert {b.id for b in store.batches(FLOW)} == {first, running}


def test_each_partition_is_due_for_pruning_once_per_interval_whichever_process_asks(
    store: MetadataStore, db_url: str
) -> None:
    interval = timedelta(minutes=5)
    many = [key(p) for p in range(450)]  # claimed in statements of 200
    assert store.claim_prunes(FLOW, [key(0), key(1)], interval) == [key(0), key(1)]  # never pruned
    with MetadataStore.open(db_url) as other:  # another run's process, the same database
        assert other.claim_prunes(FLOW, [key(1), key(2)], interval) == [key(2)]
        assert other.claim_prunes("a->b", [key(1)], interval) == [key(1)]  # each flow has its own
    assert store.claim_prunes(FLOW, many, interval) == many[3:]
    assert store.claim_prunes(FLOW, many, interval) == []
    assert store.claim_prunes(FLOW, [key(0)], timedelta(0)) == [
        key(0)
    ]  # a retention shorter than the interval shortens it


def test_runs_below_both_log_starts_are_pruned_and_every_offset_translates_as_before(
    store: MetadataStore, db_url: str
) -> None:
    for i in range(8):
        commit(store, copied_runs(0, 10 * i, 10 * i + 10, 11 * i), copied_runs(1, 10 * i, 10 * i + 10, 11 * i))
    store.prune_history(FLOW, utcnow())  # the runs of batches 2 to 7 let go of their batches
    log_starts = [(45, 60), (50, 70), (79, 88)]
    before = {starts: translations(store, 0, 95, *reversed(starts)) for starts in log_starts}

    assert store.prune_runs(FLOW, {key(0): (45, 60)}) == 3  # below the run from 40, which holds the source's log start

    assert [r.upstream_start for r in store.offset_runs(FLOW, key(0))] == [
        0,
        40,
        50,
        60,
        70,
    ]  # the first batch's run stays
    assert {starts: translations(store, 0, 95, *reversed(starts)) for starts in log_starts} == before
    assert len(store.offset_runs(FLOW, key(1))) == 8
    assert store.prune_runs(FLOW, {key(0): (5, 80)}) == 0  # nothing lies below the source's log start
    many = {
        key(1): (45, 60),
        key(0): (79, 88),
        **{key(p): (10, 10) for p in range(2, 450)},
    }  # partitions without runs too
    assert store.prune_runs(FLOW, many) == 3 + 3  # each partition by its own log starts, in statements of 200
    assert [r.upstream_start for r in store.offset_runs(FLOW, key(1))] == [0, 40, 50, 60, 70]
    assert [r.upstream_start for r in store.offset_runs(FLOW, key(0))] == [0, 70]
    assert {starts: translations(store, 0, 95, *reversed(starts)) for starts in log_starts[2:]} == {
        log_starts[2]: before[log_starts[2]]
    }


def test_migration_0010_adds_up_the_totals_of_the_batches_and_gaps_so_far(store: MetadataStore, db_url: str) -> None:
    run_batch(store, planned(0, 0, 10), planned(1, 0, 4))
    run_batch(store, planned(0, 30, 35, gap_start=10))
    stats = store.partition_stats(FLOW)
    engine = create_store_engine(db_url)
    try:
        with engine.begin() as connection:
            command.downgrade(alembic_config(connection), "0009")
    finally:
        engine.dispose()

    store.migrate()

    assert store.partition_stats(FLOW) == stats and (stats[key(0)].records, stats[key(0)].gap_offsets) == (15, 20)


def test_what_a_run_copied_is_summed_per_topic_from_its_first_batch(store: MetadataStore) -> None:
    assert store.newest_batch_id(FLOW) == 0
    earlier = run_batch(store, planned(0, 0, 4))
    first = run_batch(store, planned(0, 4, 10), planned(1, 0, 3))
    last = run_batch(store, planned(1, 3, 5))
    store.begin_batch(FLOW, [planned(0, 10, 12)], {})  # running: not copied yet

    since = store.copied_since(FLOW, first)

    assert (since.last_batch_id, since.records) == (last, 6 + 3 + 2)
    assert [(t.topic, t.records, t.bytes) for t in since.topics] == [(TOPIC, 11, 1100)]
    assert store.copied_since(FLOW, store.newest_batch_id(FLOW) + 1).topics == [] and earlier < first


def three_chunk_batch(partition: int, upstream: int, downstream: int) -> RangeResult:
    """A batch of three chunk transactions copying ``[upstream, upstream + 10)`` but two offsets that hold no record
    (source transaction markers) to ``downstream`` on: three runs, a commit marker after each on the target."""
    runs = (
        OffsetRun(upstream, upstream + 3, downstream),
        OffsetRun(upstream + 4, upstream + 7, downstream + 4),
        OffsetRun(upstream + 8, upstream + 10, downstream + 8),
    )
    return RangeResult(
        topic=TOPIC,
        partition=partition,
        start=upstream,
        end=upstream + 10,
        records=8,
        bytes=800,
        runs=runs,
        downstream_start=downstream,
        downstream_end=downstream + 10,
    )


FOLD_STEP = 3
"""Folded translations are probed at every third offset (both ways): runs of 10 offsets see every residue."""


def assert_at_or_before(
    store: MetadataStore, exact_runs: list[OffsetRun], cursor: int, upto: int, tail: OffsetRun
) -> None:
    """Every :data:`FOLD_STEP`-th offset below ``upto`` translates through the store's (folded) runs at or before its
    exact position through ``exact_runs`` (not yet when it is not yet), both ways, and exactly from ``tail`` on."""
    folded = translations(store, 0, upto, 0, 0, FOLD_STEP)
    exact = [positions[::FOLD_STEP] for positions in listed_translations(exact_runs, cursor, upto)]
    for pairs, exact_from in zip(
        zip(folded, exact, strict=True), (tail.upstream_start, tail.downstream_start), strict=True
    ):
        for offset, got, want in zip(range(0, upto, FOLD_STEP), *pairs, strict=True):
            assert got == want if want is None or offset >= exact_from else got is not None and got <= want, offset


def test_old_runs_fold_to_a_bounded_count_and_translate_at_or_before_the_exact_position(
    store: MetadataStore, db_url: str
) -> None:
    walked = (OffsetRun(10, 15, 10), OffsetRun(15, 20, 16))  # the takeover's walk of MM2's tail
    syncs = [OffsetSync(TOPIC, 0, 0, 0), OffsetSync(TOPIC, 0, 10, 10)]
    results = [
        RangeResult(
            topic=TOPIC,
            partition=0,
            start=0,
            end=20,
            records=10,
            bytes=0,
            runs=walked,
            downstream_start=10,
            downstream_end=21,
        ),
        RangeResult(topic=TOPIC, partition=1, start=0, end=20, records=0, bytes=0),
    ]
    store.record_takeover(FLOW, [planned(0, 0, 20), planned(1, 0, 20)], results, syncs, {"takeover": "mm2"})
    for i in range(100):
        commit(store, three_chunk_batch(0, 20 + 10 * i, 22 + 11 * i), three_chunk_batch(1, 20 + 10 * i, 11 * i))
    upto = 22 + 11 * 100 + 3
    exact_runs, mm2_answer = store.offset_runs(FLOW, key(0)), store.mm2_sync_before(FLOW, key(0), 5)

    removed = store.fold_runs(FLOW, [key(0)])

    runs = store.offset_runs(FLOW, key(0))
    assert removed == len(exact_runs) - len(runs) and len(runs) <= len(walked) + FOLDED_RUNS + EXACT_RUNS + FOLD_SIZE
    assert runs[:2] == list(walked) and runs[-EXACT_RUNS:] == exact_runs[-EXACT_RUNS:]
    assert [r.exact for r in runs[2:]].count(False) == FOLDED_RUNS  # 300 runs: 17 folds of 16, the oldest two merged
    assert batch_ids_of_runs(db_url, 0)[2 : 2 + FOLDED_RUNS] == [None] * FOLDED_RUNS
    assert_at_or_before(store, exact_runs, 1020, upto, next(r for r in runs[2:] if r.exact))
    assert store.mm2_sync_before(FLOW, key(0), 5) == mm2_answer == (syncs[0], 10)
    assert store.fold_runs(FLOW, [key(0)]) == 0 and len(store.offset_runs(FLOW, key(1))) == 300  # not asked: left alone

    folded = runs[2 + 3]  # a truncation of the source log inside a folded run cuts it, keeping it at or before
    truncated_at = folded.upstream_start + 40
    plan = PlannedRange(
        topic=TOPIC,
        partition=0,
        start=truncated_at,
        end=truncated_at + 10,
        remote_topic=f"primary.{TOPIC}",
        begins=ResetsCursor(1020, truncated_at=truncated_at),
    )
    store.commit_batch(store.begin_batch(FLOW, [plan], {}), [three_chunk_batch(0, truncated_at, upto)])
    cut_runs = store.offset_runs(FLOW, key(0))
    kept = 40 - (folded.length - folded.copies)  # the copies it must hold below the truncation
    assert kept > 1 and cut_runs[5] == OffsetRun(
        folded.upstream_start, truncated_at, folded.downstream_start, folded.downstream_end, kept
    )
    below = [
        r if r.upstream_end <= truncated_at else OffsetRun(r.upstream_start, truncated_at, r.downstream_start)
        for r in exact_runs
        if r.upstream_start < truncated_at
    ]
    exact_cut = below + list(three_chunk_batch(0, truncated_at, upto).runs)
    assert_at_or_before(store, exact_cut, truncated_at + 10, upto + 11, cut_runs[-3])
