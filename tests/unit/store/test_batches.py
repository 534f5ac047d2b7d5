"""The batch life cycle, cursors, offset-sync runs and gaps of the metadata store (:mod:`airmirror.store.batches`),
contract by contract on SQLite.  tests/integration/test_metadata_store.py checks them on PostgreSQL too."""

from __future__ import annotations

import pytest

from airmirror.errors import ReplicationFailure
from airmirror.model import BatchState, Gap, NoJobYet, OffsetRun, PartitionKey, PlannedRange, RangeResult, TaskJobs
from airmirror.store import MetadataStore, StaleCursorError

FLOW = "a->b"
TOPIC, REMOTE = "orders", "a.orders"
BYTES_PER_RECORD = 10


def planned(partition: int, start: int, end: int, *, gap_start: int | None = None) -> PlannedRange:
    return PlannedRange(
        topic=TOPIC, partition=partition, start=start, end=end, remote_topic=REMOTE, gap_start=gap_start
    )


def copied(plan: PlannedRange, *runs: OffsetRun) -> RangeResult:
    """The result of copying the whole range in ``runs`` (one run from downstream offset ``start`` unless given)."""
    runs = runs or ((OffsetRun(plan.start, plan.end, plan.start),) if plan.size else ())
    records = sum(run.copies for run in runs)
    return RangeResult(
        topic=plan.topic,
        partition=plan.partition,
        start=plan.start,
        end=plan.end,
        records=records,
        bytes=records * BYTES_PER_RECORD,
        runs=runs,
        downstream_start=runs[0].downstream_start if runs else None,
        downstream_end=runs[-1].downstream_stop if runs else None,
    )


def commit(store: MetadataStore, *plans: PlannedRange) -> int:
    batch_id = store.begin_batch(FLOW, plans, {"trigger": "test"})
    store.commit_batch(batch_id, [copied(plan) for plan in plans])
    return batch_id


def key(partition: int) -> PartitionKey:
    return PartitionKey(TOPIC, partition)


@pytest.mark.proves("range_commits rule 2", "range_commits rule 3")
def test_a_batch_moves_no_cursor_until_it_commits_and_then_to_the_end_of_each_range(store: MetadataStore) -> None:
    plans = [planned(0, 0, 10), planned(1, 0, 0)]
    batch_id = store.begin_batch(FLOW, plans, {"trigger": "test"})

    running = store.unfinished_batch(FLOW)
    assert running is not None and (running.id, running.state, running.ranges) == (batch_id, BatchState.RUNNING, plans)
    assert store.cursors(FLOW) == {}

    store.commit_batch(batch_id, [copied(plan) for plan in plans])

    assert store.cursors(FLOW) == {key(0): 10, key(1): 0}
    assert store.unfinished_batch(FLOW) is None
    (done,) = store.batches(FLOW)
    assert (done.state, done.records, done.bytes) == (BatchState.COMMITTED, 10, 10 * BYTES_PER_RECORD)


def test_a_flow_has_at_most_one_running_batch(store: MetadataStore) -> None:
    store.begin_batch(FLOW, [planned(0, 0, 10)], {})

    with pytest.raises(ReplicationFailure, match="already has a RUNNING batch"):
        store.begin_batch(FLOW, [planned(1, 0, 10)], {})
    store.begin_batch("a->c", [planned(0, 0, 10)], {})


@pytest.mark.proves("range_commits rule 1")
def test_a_stale_cursor_fails_the_commit_and_writes_nothing(store: MetadataStore) -> None:
    commit(store, planned(0, 0, 10))
    stale = store.begin_batch(FLOW, [planned(0, 5, 20)], {})

    with pytest.raises(StaleCursorError, match="is at 10, planned from 5"):
        store.commit_batch(stale, [copied(planned(0, 5, 20))])

    assert store.cursors(FLOW) == {key(0): 10}
    assert store.offset_runs(FLOW, key(0)) == [OffsetRun(0, 10, 0)]
    running = store.unfinished_batch(FLOW)
    assert running is not None and running.id == stale


def test_a_failed_batch_keeps_its_reason_and_moves_no_cursor(store: MetadataStore) -> None:
    commit(store, planned(0, 0, 10))
    batch_id = store.begin_batch(FLOW, [planned(0, 10, 20)], {})

    store.fail_batch(batch_id, "the copy job failed")

    newest = store.batches(FLOW)[0]
    assert (newest.id, newest.state, newest.error) == (batch_id, BatchState.FAILED, "the copy job failed")
    assert store.cursors(FLOW) == {key(0): 10}
    with pytest.raises(ReplicationFailure, match="is FAILED: only a RUNNING batch can be committed"):
        store.commit_batch(batch_id, [copied(planned(0, 10, 20))])


@pytest.mark.parametrize(
    "results",
    [
        [],
        [copied(planned(0, 1, 10))],  # not from the planned start
        [copied(planned(0, 0, 11))],  # past the planned end
        [copied(planned(0, 0, 10)), copied(planned(0, 0, 10))],
        [copied(planned(0, 0, 10), OffsetRun(5, 10, 0), OffsetRun(0, 5, 5))],  # runs out of order
        [copied(planned(0, 0, 10)), copied(planned(1, 0, 10))],  # a partition it did not plan
    ],
    ids=["missing", "wrong-start", "past-end", "twice", "runs-out-of-order", "unplanned"],
)
def test_results_that_do_not_match_the_plan_are_refused_and_nothing_is_written(
    store: MetadataStore, results: list[RangeResult]
) -> None:
    batch_id = store.begin_batch(FLOW, [planned(0, 0, 10)], {})

    with pytest.raises(ValueError):
        store.commit_batch(batch_id, results)

    assert store.cursors(FLOW) == {}
    assert store.offset_runs(FLOW, key(0)) == []


@pytest.mark.parametrize(
    ("plans", "params"),
    [
        ([planned(0, 0, 10), planned(0, 10, 20)], {}),
        ([planned(0, 10, 5)], {}),
        ([planned(0, 10, 20, gap_start=15)], {}),
        ([planned(0, 0, 10)], {"at": object()}),
    ],
    ids=["partition-twice", "start-after-end", "gap-after-start", "params-not-json"],
)
def test_an_invalid_plan_is_refused_before_a_batch_begins(
    store: MetadataStore, plans: list[PlannedRange], params: dict[str, object]
) -> None:
    with pytest.raises(ValueError):
        store.begin_batch(FLOW, plans, params)

    assert store.unfinished_batch(FLOW) is None


def test_offset_sync_runs_translate_each_copied_offset_exactly_both_ways(store: MetadataStore) -> None:
    plan = planned(0, 0, 10)
    batch_id = store.begin_batch(FLOW, [plan], {})
    store.commit_batch(batch_id, [copied(plan, OffsetRun(0, 5, 100), OffsetRun(7, 10, 106))])

    assert store.offset_runs(FLOW, key(0)) == [OffsetRun(0, 5, 100), OffsetRun(7, 10, 106)]
    assert store.find_offset_run(FLOW, key(0), 4) == OffsetRun(0, 5, 100)
    assert store.find_offset_run(FLOW, key(0), 5) == OffsetRun(7, 10, 106)  # not copied: the next run
    assert store.find_offset_run(FLOW, key(0), 10) is None
    assert store.find_offset_run_downstream(FLOW, key(0), 104) == OffsetRun(0, 5, 100)
    assert store.find_offset_run_downstream(FLOW, key(0), 105) == OffsetRun(7, 10, 106)  # a marker: the next run
    assert store.last_offset_run(FLOW, key(0)) == OffsetRun(7, 10, 106)


@pytest.mark.proves("range_commits rule 2")
def test_a_run_that_continues_the_stored_one_exactly_extends_it(store: MetadataStore) -> None:
    commit(store, planned(0, 0, 10), planned(1, 0, 10))
    plans = [planned(0, 10, 20), planned(1, 10, 20)]
    batch_id = store.begin_batch(FLOW, plans, {})

    exact, after_a_marker = copied(plans[0]), copied(plans[1], OffsetRun(10, 20, 11))
    store.commit_batch(batch_id, [exact, after_a_marker])

    assert store.offset_runs(FLOW, key(0)) == [OffsetRun(0, 20, 0)]
    assert store.offset_runs(FLOW, key(1)) == [OffsetRun(0, 10, 0), OffsetRun(10, 20, 11)]


def test_a_run_with_holes_is_stored_whole_and_never_extended_in_place(store: MetadataStore) -> None:
    plan = planned(0, 0, 10)
    batch_id = store.begin_batch(FLOW, [plan], {})
    dropping = OffsetRun(0, 10, 100, holes=(2, 4, 7, 8))  # every record but 2, 3 and 7 copied
    store.commit_batch(batch_id, [copied(plan, dropping)])

    assert store.offset_runs(FLOW, key(0)) == [dropping]
    assert store.find_offset_run(FLOW, key(0), 3) == dropping
    assert store.find_offset_run_downstream(FLOW, key(0), 106) == dropping
    assert dropping.downstream_at_most(3) == 102 and dropping.upstream_at_most(106) == 9

    plan = planned(0, 10, 20)
    batch_id = store.begin_batch(FLOW, [plan], {})
    store.commit_batch(batch_id, [copied(plan, OffsetRun(10, 20, 107))])  # continues it exactly on both sides
    assert store.offset_runs(FLOW, key(0)) == [dropping, OffsetRun(10, 20, 107)]


@pytest.mark.proves("range_commits rule 2")
def test_offsets_lost_to_retention_are_recorded_as_a_gap_with_the_batch_planned_past_them(
    store: MetadataStore,
) -> None:
    commit(store, planned(0, 0, 10))

    commit(store, planned(0, 15, 20, gap_start=10))  # the cursor was 10: the plan expects it there

    assert store.gaps(FLOW) == [Gap(TOPIC, 0, 10, 15)]
    assert store.cursors(FLOW) == {key(0): 20}
    stats = store.partition_stats(FLOW)[key(0)]
    assert (stats.cursor, stats.records, stats.gap_count, stats.gap_offsets) == (20, 15, 1, 5)


@pytest.mark.proves("job_driver rule 3")
def test_the_copy_task_count_is_recorded_only_on_a_running_batch(store: MetadataStore) -> None:
    batch_id = store.begin_batch(FLOW, [planned(0, 0, 10)], {})

    store.set_copy_tasks(batch_id, 3, 120)

    running = store.unfinished_batch(FLOW)
    assert running is not None and running.jobs == TaskJobs(3, 120)
    store.commit_batch(batch_id, [copied(planned(0, 0, 10))])
    with pytest.raises(ReplicationFailure, match="only a RUNNING batch can be copied"):
        store.set_copy_tasks(batch_id, 4, 130)
    with pytest.raises(ValueError):
        store.set_copy_tasks(batch_id, 0, 130)


@pytest.mark.proves("job_driver rule 3")
def test_the_log_floor_is_the_batch_logs_end_before_the_first_copy_job(store: MetadataStore) -> None:
    """Every batch-log record of a batch lies above the log's end before its first job; a later job of the same
    batch (a resumed batch) keeps that floor, whatever the log's end is then."""
    batch_id = store.begin_batch(FLOW, [planned(0, 0, 10)], {})
    assert store.unfinished_batch(FLOW).jobs == NoJobYet()  # type: ignore[union-attr]

    store.set_copy_tasks(batch_id, 2, 120)
    store.set_copy_tasks(batch_id, 3, 480)

    running = store.unfinished_batch(FLOW)
    assert running is not None and running.jobs == TaskJobs(3, 120)


def test_the_copied_topics_are_those_with_a_cursor_or_a_range_in_the_unfinished_batch(store: MetadataStore) -> None:
    commit(store, planned(0, 0, 10), planned(1, 0, 10))
    payments = PlannedRange(topic="payments", partition=0, start=0, end=5, remote_topic="a.payments")
    assert store.copied_topics(FLOW) == {TOPIC}

    store.begin_batch(FLOW, [payments], {"trigger": "test"})

    assert store.copied_topics(FLOW) == {TOPIC, "payments"} and store.copied_topics("other->flow") == set()
