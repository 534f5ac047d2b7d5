"""The health rules (:mod:`airmirror.replication.health`) and failure recording
(:mod:`airmirror.replication.run_failures`) on a real SQLite metadata DB."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from airmirror.config import FlowConfig, load_config
from airmirror.errors import ReplicationFailure
from airmirror.model import (
    HeartbeatEmission,
    HeartbeatLatency,
    LagSample,
    OffsetRun,
    PartitionKey,
    PlannedRange,
    RangeResult,
)
from airmirror.replication.health import FlowState, flow_health, worst_first
from airmirror.replication.run_failures import failures_recorded
from airmirror.store import FlowBusyError, MetadataStore
from tests.store_helpers import commit_ten

NOW = datetime.now(UTC)


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[tuple[FlowConfig, MetadataStore]]:
    config = tmp_path / "mm2.properties"
    config.write_text("clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n")
    store = MetadataStore.open(f"sqlite:///{tmp_path / 'metadata.db'}")
    yield load_config(config, env={}).flow("a->b"), store
    store.dispose()


def commit(store: MetadataStore, flow: FlowConfig, partition: int = 0) -> None:
    commit_ten(store, flow.name, partition=partition)


def health(flow: FlowConfig, store: MetadataStore, now: datetime = NOW, reverse: bool = False):
    return flow_health(flow, store, now, reverse_enabled=reverse)


def test_a_flow_that_copied_recently_and_keeps_up_is_healthy(opened):
    flow, store = opened
    commit(store, flow)
    store.record_lag_samples(flow.name, [LagSample("orders", 0, NOW, 3, 2_000, None)])

    shown = health(flow, store)

    assert (shown.state, shown.states) == (FlowState.HEALTHY, [FlowState.HEALTHY])
    assert (shown.lag_records, shown.oldest_record_age_ms, shown.partitions) == (3, 2_000, 1)
    assert shown.last_success_at is not None and shown.as_json()["state"] == "healthy"


def test_the_records_the_transforms_filtered_and_skipped_are_summed_over_the_partitions(opened):
    flow, store = opened
    for partition, (filtered, skipped) in enumerate(((3, 1), (4, 0))):
        plan = PlannedRange(topic="orders", partition=partition, start=0, end=10, remote_topic="a.orders")
        runs = (OffsetRun(0, 10 - filtered - skipped, 0),)
        copied = RangeResult(
            topic="orders", partition=partition, start=0, end=10, records=10 - filtered - skipped, bytes=60, runs=runs
        )
        result = RangeResult(**{**copied.__dict__, "filtered": filtered, "skipped": skipped})
        store.commit_batch(store.begin_batch(flow.name, [plan], {"trigger": "test"}), [result])

    shown = health(flow, store)

    assert (shown.records_filtered, shown.records_skipped) == (7, 1)
    assert (shown.as_json()["records_filtered"], shown.as_json()["records_skipped"]) == (7, 1)


def test_a_lagging_flow_with_a_stopped_partition_shows_the_stop_first_and_both_states(opened):
    flow, store = opened
    commit(store, flow, 0)
    commit(store, flow, 1)
    store.record_lag_samples(flow.name, [LagSample("orders", 0, NOW, 9_000, 600_000, None)])
    store.stop_partition(flow.name, PartitionKey("orders", 1), "source partition 1 was deleted")

    shown = health(flow, store)

    assert shown.states == [FlowState.STOPPED, FlowState.LAGGING] and shown.state is FlowState.STOPPED
    assert (shown.stopped_partitions, shown.lag_records) == (1, 9_000)


def test_a_flow_whose_newest_run_failed_after_its_last_commit_is_failing_until_a_run_commits(opened):
    flow, store = opened
    commit(store, flow)
    with pytest.raises(ReplicationFailure), failures_recorded(flow, store):
        raise ReplicationFailure("cannot reach cluster 'b' (y:1): Connection refused")

    failing = health(flow, store)
    assert failing.state is FlowState.FAILING
    assert failing.last_failure is not None and "Connection refused" in failing.last_failure.error

    commit(store, flow)
    assert health(flow, store).state is FlowState.HEALTHY


def test_a_busy_flow_is_no_failure_and_a_run_that_raised_is_re_raised_as_it_was(opened):
    flow, store = opened
    with pytest.raises(FlowBusyError), failures_recorded(flow, store):
        raise FlowBusyError(flow.name, None)
    assert store.run_failure(flow.name) is None
    with pytest.raises(KeyError), failures_recorded(flow, store):
        raise KeyError("x")
    failure = store.run_failure(flow.name)
    assert failure is not None and failure.error == "KeyError: 'x'"


def test_a_flow_that_never_copied_or_not_for_an_hour_is_not_running(opened):
    flow, store = opened
    assert health(flow, store).state is FlowState.NOT_RUNNING
    commit(store, flow)
    assert health(flow, store).state is FlowState.HEALTHY
    assert health(flow, store, now=NOW + timedelta(hours=2)).state is FlowState.NOT_RUNNING


def test_latency_is_explained_where_it_cannot_be_measured(opened):
    flow, store = opened
    commit(store, flow)
    assert "flow b->a, which is not enabled" in (health(flow, store).latency_note or "")
    store.record_heartbeat_emitted(flow.name, HeartbeatEmission("heartbeats", NOW))
    note = health(flow, store, reverse=True).latency_note or ""
    assert "no heartbeat has travelled a->b yet" in note and "heartbeats on cluster b" in note

    store.record_heartbeat_latency(flow.name, HeartbeatLatency("b", "a", NOW, NOW, 420))
    measured = health(flow, store, reverse=True)
    assert (measured.replication_latency_ms, measured.latency_note) == (420, None)


def test_worst_first_orders_by_state_then_by_the_oldest_record(opened):
    flow, store = opened
    commit(store, flow)
    healthy = health(flow, store)
    older = healthy.__class__(**{**healthy.__dict__, "flow": "c->d", "oldest_record_age_ms": 9_000})
    failing = healthy.__class__(**{**healthy.__dict__, "flow": "z->y", "state": FlowState.FAILING})

    assert [h.flow for h in worst_first([healthy, older, failing])] == ["z->y", "c->d", "a->b"]


def test_a_partition_without_a_leader_is_named_with_since_when_until_a_plan_finds_its_leader(opened):
    """Health rule 3 over the leader waits a plan records: a row per partition that still waits keeps its since,
    one that answers again goes, and nothing is written while nothing changed."""
    flow, store = opened
    commit(store, flow, 0)
    commit(store, flow, 1)
    keys = [PartitionKey("orders", 0), PartitionKey("orders", 1)]
    store.record_leader_waits(flow.name, keys, {keys[1]: "Broker: Leader not available"})
    (first,) = store.leader_waits(flow.name)

    store.record_leader_waits(flow.name, keys, {keys[1]: "Broker: Leader not available"})
    waiting = health(flow, store)

    assert store.leader_waits(flow.name) == [first] and first.key == keys[1]
    assert waiting.states == [FlowState.WAITING] and waiting.leader_waits == [first]
    assert waiting.as_json()["leader_waits"][0]["reason"] == "Broker: Leader not available"
    store.record_leader_waits(flow.name, keys, {})
    assert store.leader_waits(flow.name) == [] and health(flow, store).state is FlowState.HEALTHY


def test_a_copied_source_topic_that_is_gone_stops_its_partitions_until_it_is_back(opened):
    """Health rule 2 over the gone topics step 1 records: a deleted source topic counts its copied partitions as
    stopped (once each, beside a stop of one of them), keeps its since while still gone, and stops nothing once a
    run finds it again; a topic no run looked for keeps its row."""
    flow, store = opened
    for partition in (0, 1):
        commit(store, flow, partition)
    store.stop_partition(flow.name, PartitionKey("orders", 1), "source partition 1 was truncated")
    store.record_gone_topics(flow.name, ["orders", "payments"], ["orders", "payments"])
    since = store.gone_topics(flow.name)

    store.record_gone_topics(flow.name, ["orders"], ["orders"])
    gone = health(flow, store)

    assert set(since) == {"orders", "payments"} and store.gone_topics(flow.name) == since
    assert gone.states == [FlowState.STOPPED] and gone.stopped_partitions == 3
    assert gone.as_json()["gone_topics"]["orders"] == since["orders"].isoformat()
    store.record_gone_topics(flow.name, ["orders"], [])
    assert store.gone_topics(flow.name) == {"payments": since["payments"]}
    assert health(flow, store).stopped_partitions == 2
