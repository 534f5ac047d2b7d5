"""Stream batches as the store records them (:mod:`airmirror.store.streams`), on a real SQLite file: each
recording moves the cursors, runs, gaps and totals in one transaction, a bad delta or a stale cursor writes
nothing, and the final recording commits the batch with its totals."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import pytest

from airmirror.errors import ReplicationFailure
from airmirror.model import (
    BatchRecord,
    BatchState,
    Gap,
    MovesCursor,
    OffsetRun,
    PartitionKey,
    PlannedRange,
    RangeResult,
    ResetsCursor,
)
from airmirror.store import MetadataStore
from airmirror.store.range_commits import StaleCursorError
from airmirror.store.schema import cursors
from airmirror.store.streams import STREAM_PARAM

FLOW = "a->b"
TOPIC = "orders"
REMOTE = "a.orders"
BYTES_PER_RECORD = 10


def key(partition: int) -> PartitionKey:
    return PartitionKey(TOPIC, partition)


def empty(partition: int, start: int, **planned: object) -> PlannedRange:
    """A stream batch's range as it is begun: empty, at ``start``."""
    return PlannedRange(topic=TOPIC, partition=partition, start=start, end=start, remote_topic=REMOTE, **planned)  # type: ignore[arg-type]


def begin_stream(store: MetadataStore, ranges: list[PlannedRange]) -> int:
    return store.begin_batch(FLOW, ranges, {"trigger": "test", STREAM_PARAM: True})


def delta(partition: int, start: int, end: int, *runs: OffsetRun, epoch: int | None = None) -> RangeResult:
    """What a copy committed of ``[start, end)``: the records of ``runs``, ``BYTES_PER_RECORD`` bytes each."""
    records = sum(run.length for run in runs)
    return RangeResult(
        topic=TOPIC,
        partition=partition,
        start=start,
        end=end,
        records=records,
        bytes=records * BYTES_PER_RECORD,
        runs=tuple(runs),
        downstream_start=runs[0].downstream_start if runs else None,
        downstream_end=runs[-1].downstream_stop if runs else None,
        end_epoch=epoch,
    )


def commit_plain(store: MetadataStore, cursors_at: dict[int, int]) -> None:
    """A plain committed batch that leaves partition ``p`` at cursor ``cursors_at[p]`` (every record copied)."""
    batch = store.begin_batch(
        FLOW,
        [
            PlannedRange(topic=TOPIC, partition=p, start=0, end=end, remote_topic=REMOTE)
            for p, end in cursors_at.items()
        ],
        {},
    )
    store.commit_batch(batch, [delta(p, 0, end, OffsetRun(0, end, 1000 * p)) for p, end in cursors_at.items()])


def translate(runs: list[OffsetRun], upstream: int) -> int | None:
    """The downstream offset the stored runs give ``upstream`` (``None``: no run holds it)."""
    run = next((r for r in runs if r.upstream_start <= upstream < r.upstream_end), None)
    return None if run is None else run.downstream_at_most(upstream)


def copied(*deltas: RangeResult) -> dict[int, int]:
    """Every upstream offset the deltas copied, with its downstream offset."""
    return {
        u: run.downstream_start + u - run.upstream_start
        for d in deltas
        for run in d.runs
        for u in range(run.upstream_start, run.upstream_end)
    }


def only_batch(store: MetadataStore) -> BatchRecord:
    (batch,) = store.batches(FLOW)
    return batch


def batch_of(store: MetadataStore, batch_id: int) -> BatchRecord:
    return next(b for b in store.batches(FLOW) if b.id == batch_id)


@pytest.mark.proves("range_commits rule 2", "range_commits rule 3", "streaming rule 3")
def test_recordings_move_the_cursors_and_the_final_one_commits_the_batch_with_its_totals(store: MetadataStore):
    batch_id = begin_stream(store, [empty(0, 0), empty(1, 10)])
    first = [delta(0, 0, 5, OffsetRun(0, 5, 100), epoch=3), delta(1, 10, 13, OffsetRun(10, 13, 200))]
    # p0 continues its run on both sides; p1 continues its run, then skips an offset on both sides.
    second = [
        delta(0, 5, 9, OffsetRun(5, 9, 105), epoch=4),
        delta(1, 13, 20, OffsetRun(13, 15, 203), OffsetRun(16, 20, 206)),
    ]
    # p0 after a commit marker on the target; p1 copied nothing more.
    last = [delta(0, 9, 12, OffsetRun(9, 12, 110), epoch=4)]

    store.record_stream(batch_id, first)
    assert store.cursors(FLOW) == {key(0): 5, key(1): 13}
    running = only_batch(store)
    assert running.id == batch_id and running.state is BatchState.RUNNING
    assert running.records is None and running.bytes is None, "a batch's totals are set once it commits"
    assert [r.end for r in running.ranges] == [5, 13]
    assert {k: r.records for k, r in store.stream_recorded(batch_id).items()} == {key(0): 5, key(1): 3}

    store.record_stream(batch_id, second)
    assert store.cursors(FLOW) == {key(0): 9, key(1): 20}
    running = only_batch(store)
    assert running.state is BatchState.RUNNING and [r.end for r in running.ranges] == [9, 20]
    assert {k: r.records for k, r in store.stream_recorded(batch_id).items()} == {key(0): 9, key(1): 9}

    store.record_stream(batch_id, last, final=True)
    assert store.cursors(FLOW) == {key(0): 12, key(1): 20}
    committed = only_batch(store)
    everything = first + second + last
    assert committed.state is BatchState.COMMITTED and committed.finished_at is not None
    assert (
        (committed.records, committed.bytes)
        == (21, 21 * BYTES_PER_RECORD)
        == (sum(d.records for d in everything), sum(d.bytes for d in everything))
    )
    assert [(r.start, r.end) for r in committed.ranges] == [(0, 12), (10, 20)]

    stats = store.partition_stats(FLOW)
    assert {k: (s.cursor, s.records, s.bytes, s.last_batch_id, s.gap_count) for k, s in stats.items()} == {
        key(0): (12, 12, 12 * BYTES_PER_RECORD, batch_id, 0),
        key(1): (20, 9, 9 * BYTES_PER_RECORD, batch_id, 0),
    }
    assert store.copied_since(FLOW, batch_id).records == 21

    runs = {p: store.offset_runs(FLOW, key(p)) for p in (0, 1)}
    assert runs[0] == [OffsetRun(0, 9, 100), OffsetRun(9, 12, 110)], "the run continued across recordings is one run"
    assert runs[1] == [OffsetRun(10, 15, 200), OffsetRun(16, 20, 206)]
    for partition in (0, 1):
        expected = copied(*(d for d in everything if d.partition == partition))
        assert {u: translate(runs[partition], u) for u in expected} == expected


def test_a_gap_commits_once_at_the_first_recording_and_never_moved_ranges_commit_at_final(store: MetadataStore):
    commit_plain(store, {0: 20, 1: 30, 2: 5})
    batch_id = begin_stream(
        store, [empty(0, 50, gap_start=20), empty(1, 10, begins=MovesCursor(30)), empty(2, 8, gap_start=5)]
    )

    store.record_stream(batch_id, [delta(0, 50, 55, OffsetRun(50, 55, 500))])
    assert store.gaps(FLOW) == [Gap(TOPIC, 0, 20, 50)]
    assert store.cursors(FLOW) == {key(0): 55, key(1): 30, key(2): 5}, "the ranges not recorded yet keep their cursors"

    store.record_stream(batch_id, [delta(0, 55, 60, OffsetRun(55, 60, 505))])
    assert store.gaps(FLOW) == [Gap(TOPIC, 0, 20, 50)]

    store.record_stream(batch_id, [], final=True)
    assert store.cursors(FLOW) == {key(0): 60, key(1): 10, key(2): 8}
    assert store.gaps(FLOW) == [Gap(TOPIC, 0, 20, 50), Gap(TOPIC, 2, 5, 8)]
    stats = store.partition_stats(FLOW)
    assert {k: (s.gap_count, s.gap_offsets, s.records) for k, s in stats.items()} == {
        key(0): (1, 30, 30),
        key(1): (0, 0, 30),
        key(2): (1, 3, 5),
    }
    committed = batch_of(store, batch_id)
    assert committed.state is BatchState.COMMITTED and committed.records == 10


def test_a_reset_cursor_commits_one_source_reset_at_the_first_recording(store: MetadataStore):
    commit_plain(store, {0: 40})
    batch_id = begin_stream(store, [empty(0, 0, begins=ResetsCursor(40), source_topic_id="new-id")])

    store.record_stream(batch_id, [delta(0, 0, 3, OffsetRun(0, 3, 0))])
    store.record_stream(batch_id, [delta(0, 3, 6, OffsetRun(3, 6, 3))], final=True)

    assert [(r.old_cursor, r.new_start, r.new_topic_id, r.batch_id) for r in store.source_resets(FLOW)] == [
        (40, 0, "new-id", batch_id)
    ]
    assert store.offset_runs(FLOW, key(0)) == [OffsetRun(0, 6, 0)], "the old incarnation's runs are retired"
    assert store.cursors(FLOW) == {key(0): 6}


def unplanned() -> list[RangeResult]:
    return [delta(0, 5, 7, OffsetRun(5, 7, 105)), delta(9, 0, 2, OffsetRun(0, 2, 0))]


def twice() -> list[RangeResult]:
    return [delta(0, 5, 7, OffsetRun(5, 7, 105)), delta(0, 5, 8, OffsetRun(5, 8, 105))]


def behind() -> list[RangeResult]:
    return [delta(1, 10, 12, OffsetRun(10, 12, 200)), delta(0, 4, 7, OffsetRun(4, 7, 104))]


def ahead() -> list[RangeResult]:
    return [delta(1, 10, 12, OffsetRun(10, 12, 200)), delta(0, 6, 7, OffsetRun(6, 7, 106))]


def replayed() -> list[RangeResult]:
    return [delta(1, 10, 12, OffsetRun(10, 12, 200)), delta(0, 0, 7, OffsetRun(0, 7, 100))]


@pytest.mark.parametrize("deltas", [unplanned, twice, behind, ahead, replayed])
@pytest.mark.parametrize("final", [False, True])
def test_a_bad_delta_is_refused_and_nothing_is_written(
    store: MetadataStore, deltas: Callable[[], list[RangeResult]], final: bool
):
    batch_id = begin_stream(store, [empty(0, 0), empty(1, 10, gap_start=4)])
    store.record_stream(batch_id, [delta(0, 0, 5, OffsetRun(0, 5, 100))])
    before = (
        store.cursors(FLOW),
        store.stream_recorded(batch_id),
        store.offset_runs(FLOW, key(0)),
        store.gaps(FLOW),
        store.partition_stats(FLOW),
    )

    with pytest.raises(ValueError, match=f"stream batch {batch_id}"):
        store.record_stream(batch_id, deltas(), final=final)

    assert (
        store.cursors(FLOW),
        store.stream_recorded(batch_id),
        store.offset_runs(FLOW, key(0)),
        store.gaps(FLOW),
        store.partition_stats(FLOW),
    ) == before
    assert only_batch(store).state is BatchState.RUNNING


@pytest.mark.proves("range_commits rule 1")
def test_a_cursor_moved_under_the_batch_makes_the_recording_stale(store: MetadataStore, store_url: str):
    batch_id = begin_stream(store, [empty(0, 0), empty(1, 10)])
    store.record_stream(batch_id, [delta(0, 0, 5, OffsetRun(0, 5, 100))])
    with sqlite3.connect(
        store_url.removeprefix("sqlite:///")
    ) as connection:  # another writer, outside the store's contracts
        connection.execute(f"UPDATE {cursors.name} SET next_offset = 7 WHERE topic = ? AND partition = 0", (TOPIC,))
    recorded = store.stream_recorded(batch_id)

    with pytest.raises(StaleCursorError, match=f"{TOPIC}-0 is at 7, planned from 5"):
        store.record_stream(batch_id, [delta(0, 5, 9, OffsetRun(5, 9, 105)), delta(1, 10, 12, OffsetRun(10, 12, 200))])

    assert store.cursors(FLOW) == {key(0): 7}
    assert store.stream_recorded(batch_id) == recorded
    assert store.offset_runs(FLOW, key(0)) == [OffsetRun(0, 5, 100)] and store.offset_runs(FLOW, key(1)) == []
    assert only_batch(store).state is BatchState.RUNNING


def test_a_committed_stream_batch_takes_no_more_recordings(store: MetadataStore):
    batch_id = begin_stream(store, [empty(0, 0)])
    store.record_stream(batch_id, [delta(0, 0, 5, OffsetRun(0, 5, 100))], final=True)

    for final in (False, True):
        with pytest.raises(ReplicationFailure, match=f"batch {batch_id} .* is COMMITTED"):
            store.record_stream(batch_id, [delta(0, 5, 6, OffsetRun(5, 6, 105))], final=final)

    assert store.cursors(FLOW) == {key(0): 5}
    assert only_batch(store).records == 5


def test_stream_recorded_is_the_running_outcome_of_each_range(store: MetadataStore):
    batch_id = begin_stream(store, [empty(0, 0, start_epoch=1), empty(1, 10, start_epoch=2)])
    assert store.stream_recorded(batch_id) == {
        key(0): RangeResult(topic=TOPIC, partition=0, start=0, end=0, records=0, bytes=0, end_epoch=None),
        key(1): RangeResult(topic=TOPIC, partition=1, start=10, end=10, records=0, bytes=0, end_epoch=None),
    }

    store.record_stream(batch_id, [delta(0, 0, 5, OffsetRun(0, 5, 100), epoch=3)])
    # A position-only move (a transaction marker or compacted offsets): no records, the downstream end stays.
    store.record_stream(batch_id, [delta(0, 5, 8, epoch=4), delta(1, 10, 12, OffsetRun(11, 12, 200), epoch=5)])

    assert store.stream_recorded(batch_id) == {
        key(0): RangeResult(
            topic=TOPIC,
            partition=0,
            start=0,
            end=8,
            records=5,
            bytes=5 * BYTES_PER_RECORD,
            downstream_start=100,
            downstream_end=105,
            end_epoch=4,
        ),
        key(1): RangeResult(
            topic=TOPIC,
            partition=1,
            start=10,
            end=12,
            records=1,
            bytes=BYTES_PER_RECORD,
            downstream_start=200,
            downstream_end=201,
            end_epoch=5,
        ),
    }


def test_an_empty_delta_is_refused_and_leaves_the_range_recordable(store: MetadataStore):
    commit_plain(store, {0: 20})
    batch_id = begin_stream(store, [empty(0, 50, gap_start=20)])
    with pytest.raises(ValueError, match="empty"):
        store.record_stream(batch_id, [delta(0, 50, 50)])
    store.record_stream(batch_id, [delta(0, 50, 55, OffsetRun(50, 55, 500))])
    store.record_stream(batch_id, [], final=True)

    assert store.cursors(FLOW) == {key(0): 55}
    assert store.gaps(FLOW) == [Gap(TOPIC, 0, 20, 50)]


def test_a_batch_that_is_not_a_stream_is_refused(store: MetadataStore):
    batch_id = store.begin_batch(
        FLOW, [PlannedRange(topic=TOPIC, partition=0, start=0, end=100, remote_topic=REMOTE)], {}
    )

    with pytest.raises(ValueError, match="not a stream batch"):
        store.record_stream(batch_id, [delta(0, 100, 150)], final=True)
    assert store.cursors(FLOW) == {}


def test_a_topic_stopped_while_it_streams_records_no_cursor_or_run_after_the_stop(store: MetadataStore):
    """Its remote topic was recreated: the stop retired its runs, and the recordings after it leave them retired (no
    translation through the stopped topic) while the other topics record on; the record says which it left out."""
    other = PlannedRange(topic="payments", partition=0, start=0, end=0, remote_topic="a.payments")
    batch_id = begin_stream(store, [empty(0, 0), other])
    store.record_stream(batch_id, [delta(0, 0, 5, OffsetRun(0, 5, 100))])
    store.stop_remote_topic(FLOW, TOPIC, REMOTE, "remote topic a.orders was recreated")
    paid = RangeResult(topic="payments", partition=0, start=0, end=3, records=3, bytes=30, runs=(OffsetRun(0, 3, 0),))

    left_out = store.record_stream(batch_id, [delta(0, 5, 9, OffsetRun(5, 9, 105)), paid], final=True)

    assert left_out == {key(0)}
    assert store.offset_runs(FLOW, key(0)) == [] and store.cursors(FLOW)[key(0)] == 5
    assert store.offset_runs(FLOW, PartitionKey("payments", 0)) == [OffsetRun(0, 3, 0)]
    assert only_batch(store).state is BatchState.COMMITTED
