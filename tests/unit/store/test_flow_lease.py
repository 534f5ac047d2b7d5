"""Flow leases (:mod:`airmirror.store.flow_lease`) on SQLite: one run at a time works on a flow, a lease outlives
its holder by at most its ttl, a holder whose lease was taken over learns it before committing, and a store fenced
by a lost lease writes nothing.
Concurrent contenders, renewal threads and database outages: tests/integration/test_metadata_store.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine

from airmirror.model import NoJobYet, PlannedRange, RunFailure, TaskJobs
from airmirror.store import FlowBusyError, FlowLeaseLostError, MetadataStore, create_store_engine
from airmirror.store.flow_lease import acquire_flow

FLOW = "a->b"
SHORT_TTL_S = 0.05


def planned(partition: int, start: int, end: int) -> PlannedRange:
    return PlannedRange(topic="orders", partition=partition, start=start, end=end, remote_topic="a.orders")


@pytest.fixture
def engine(store_url: str) -> Iterator[Engine]:
    made = create_store_engine(store_url)
    yield made
    made.dispose()


def test_a_lease_is_held_for_the_block_and_released_after(store: MetadataStore) -> None:
    with store.hold_flow(FLOW, "run 1") as lease:
        held = store.flow_lease(FLOW)
        assert held is not None and held.holder == "run 1" and held.expires_at == lease.expires_at

    assert store.flow_lease(FLOW) is None


def test_a_held_flow_is_busy_for_everyone_even_its_own_holder(store: MetadataStore) -> None:
    with store.hold_flow(FLOW, "run 1"):
        held = store.flow_lease(FLOW)
        with (
            pytest.raises(FlowBusyError, match=r"holder run 1.*nothing was changed") as busy,
            store.hold_flow(FLOW, "run 1"),
        ):
            pass
        assert busy.value.current == held
        assert store.flow_lease(FLOW) == held
        with store.hold_flow("a->c", "run 2"):
            pass


def test_an_exception_in_the_block_releases_the_lease(store: MetadataStore) -> None:
    with pytest.raises(RuntimeError), store.hold_flow(FLOW, "run 1"):
        raise RuntimeError("the batch failed")

    assert store.flow_lease(FLOW) is None


def test_an_expired_lease_is_taken_over_and_its_old_holder_learns_it_when_it_checks(engine: Engine) -> None:
    old = acquire_flow(engine, FLOW, "run 1", ttl_seconds=SHORT_TTL_S)
    time.sleep(SHORT_TTL_S * 2)

    new = acquire_flow(engine, FLOW, "run 2", ttl_seconds=60)

    with pytest.raises(FlowLeaseLostError, match="run 1"):
        old.check()
    assert old.release() is False
    new.check()
    assert new.release() is True


def test_an_expired_lease_nobody_took_over_is_still_ours(engine: Engine) -> None:
    lease = acquire_flow(engine, FLOW, "run 1", ttl_seconds=SHORT_TTL_S)
    time.sleep(SHORT_TTL_S * 2)

    lease.check()

    assert lease.lost is None and lease.release() is True


@pytest.mark.parametrize(("flow", "holder", "ttl"), [("", "run", 60.0), (FLOW, "", 60.0), (FLOW, "run", 0.0)])
def test_a_lease_needs_a_flow_a_holder_and_a_positive_ttl(engine: Engine, flow: str, holder: str, ttl: float) -> None:
    with pytest.raises(ValueError):
        acquire_flow(engine, flow, holder, ttl_seconds=ttl)


def test_a_store_fenced_by_a_lost_lease_writes_nothing_yet_reads_and_records_its_failure(
    store: MetadataStore, engine: Engine
) -> None:
    """The fencing rule: every write of a fenced store is guarded in its own transaction by the lease's token, so a
    run that lost its lease (frozen past it, then thawed) changes no row; its reads and its failure record go on."""
    old = acquire_flow(engine, FLOW, "run 1", ttl_seconds=SHORT_TTL_S)
    fenced = store.fenced_by(old)
    batch_id = fenced.begin_batch(FLOW, [planned(0, 0, 10)], {})  # written while held
    time.sleep(SHORT_TTL_S * 2)
    new = acquire_flow(engine, FLOW, "run 2", ttl_seconds=60)

    with pytest.raises(FlowLeaseLostError, match=r"run 1.*lost its lease"):
        fenced.set_copy_tasks(batch_id, 2, 0)
    with pytest.raises(FlowLeaseLostError):
        fenced.check_lease()

    assert isinstance(fenced.lease_lost, FlowLeaseLostError)
    unfinished = fenced.unfinished_batch(FLOW)
    assert unfinished is not None and unfinished.jobs == NoJobYet()  # the guard rolled the write back
    fenced.record_run_failure(FLOW, RunFailure(datetime.now(UTC), "lost its lease"))
    store.fenced_by(new).set_copy_tasks(batch_id, 8, 0)
    assert store.unfinished_batch(FLOW).jobs == TaskJobs(8, 0)  # type: ignore[union-attr]


def test_a_guarded_write_of_a_lease_that_expired_unclaimed_lands_since_it_is_still_ours(
    store: MetadataStore, engine: Engine
) -> None:
    lease = acquire_flow(engine, FLOW, "run 1", ttl_seconds=SHORT_TTL_S)
    time.sleep(SHORT_TTL_S * 2)

    batch_id = store.fenced_by(lease).begin_batch(FLOW, [planned(0, 0, 10)], {})

    assert store.unfinished_batch(FLOW).id == batch_id  # type: ignore[union-attr]
    assert store.flow_lease(FLOW).holder == "run 1"  # type: ignore[union-attr]  # the guard only reads
