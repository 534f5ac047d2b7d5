"""What a partition's newest progress adds to what the DB recorded of it, for a stream's recordings and a bounded
batch's commit alike (:func:`airmirror.replication.recording.progress_result`): pure arithmetic over the batch log's
records."""

from __future__ import annotations

import pytest

from airmirror.errors import ReplicationFailure
from airmirror.model import OffsetRun, PlannedRange, RangeResult
from airmirror.replication.recording import nothing_recorded, progress_result, range_result
from airmirror.replication.spark.batch_log import Progress, RunsRecord

BATCH = 7
TOPIC = "orders"


def progress(
    position: int, records: int, size: int, downstream_position: int, chunk: int = 3, epoch: int | None = 4
) -> Progress:
    return Progress(
        batch_id=BATCH,
        chunk=chunk,
        start=0,
        end=position,
        position=position,
        done=False,
        records=records,
        bytes=size,
        downstream_start=100,
        downstream_position=downstream_position,
        first_runs_offset=0,
        leader_epoch=epoch,
    )


def runs(chunk: int, part: int, *runs: OffsetRun) -> RunsRecord:
    return RunsRecord(BATCH, chunk, part, runs)


RECORDED = RangeResult(
    topic=TOPIC,
    partition=0,
    start=0,
    end=10,
    records=10,
    bytes=100,
    downstream_start=100,
    downstream_end=110,
    end_epoch=2,
)
"""The DB recorded ``[0, 10)``: ten records at downstream 100..109."""


def test_the_delta_holds_the_runs_above_the_recorded_end_merged_across_chunks_and_parts():
    records = [  # out of order, as the log's records of several chunks may be taken in
        runs(3, 0, OffsetRun(16, 20, 118), OffsetRun(22, 25, 123)),  # a commit marker at 117
        runs(1, 0, OffsetRun(0, 10, 100)),  # recorded already
        runs(2, 1, OffsetRun(14, 16, 115)),
        runs(2, 0, OffsetRun(10, 14, 111)),
    ]

    got = progress_result(RECORDED, progress(position=26, records=23, size=230, downstream_position=126), records)

    assert got == RangeResult(
        topic=TOPIC,
        partition=0,
        start=10,
        end=26,
        records=13,
        bytes=130,
        runs=(OffsetRun(10, 16, 111), OffsetRun(16, 20, 118), OffsetRun(22, 25, 123)),
        downstream_start=111,
        downstream_end=126,
        end_epoch=4,
    )


def test_runs_that_do_not_continue_each_other_on_both_sides_stay_apart():
    records = [runs(2, 0, OffsetRun(10, 12, 111)), runs(3, 0, OffsetRun(12, 14, 114))]  # a commit marker at 113

    got = progress_result(RECORDED, progress(position=14, records=14, size=140, downstream_position=115), records)

    assert got.runs == (OffsetRun(10, 12, 111), OffsetRun(12, 14, 114))
    assert (got.start, got.end, got.records, got.downstream_start, got.downstream_end) == (10, 14, 4, 111, 115)


@pytest.mark.parametrize("progress_records", [14, 16], ids=["runs beyond the progress", "records without runs"])
def test_runs_that_do_not_account_for_the_progress_records_fail(progress_records: int):
    records = [runs(1, 0, OffsetRun(0, 10, 100)), runs(2, 0, OffsetRun(10, 15, 111))]

    with pytest.raises(
        ReplicationFailure,
        match=rf"runs for 5 of the {progress_records - 10} records batch {BATCH} copied from {TOPIC}-0",
    ):
        progress_result(
            RECORDED, progress(position=15, records=progress_records, size=150, downstream_position=116), records
        )


def test_a_position_only_move_has_no_downstream_end():
    """Compacted offsets or an aborted transaction: the position moves, no record is copied."""
    got = progress_result(
        RECORDED,
        progress(position=18, records=10, size=100, downstream_position=113),
        [runs(1, 0, OffsetRun(0, 10, 100))],
    )

    assert got == RangeResult(
        topic=TOPIC,
        partition=0,
        start=10,
        end=18,
        records=0,
        bytes=0,
        runs=(),
        downstream_start=None,
        downstream_end=None,
        end_epoch=4,
    )


def test_the_first_delta_of_a_range_starts_at_its_start():
    nothing = RangeResult(topic=TOPIC, partition=0, start=40, end=40, records=0, bytes=0)

    got = progress_result(
        nothing,
        progress(position=43, records=3, size=30, downstream_position=3, epoch=None),
        [runs(0, 0, OffsetRun(40, 43, 0))],
    )

    assert got == RangeResult(
        topic=TOPIC,
        partition=0,
        start=40,
        end=43,
        records=3,
        bytes=30,
        runs=(OffsetRun(40, 43, 0),),
        downstream_start=0,
        downstream_end=3,
        end_epoch=None,
    )


def test_a_bounded_range_s_result_is_its_progress_added_to_nothing_recorded():
    """A bounded batch is a stream recorded once: its range's result is the stream's reading from its start."""
    planned = PlannedRange(topic="t", partition=0, start=10, end=30, remote_topic="a.t")
    done = progress(position=30, records=20, size=200, downstream_position=121)  # a commit marker at 110
    records = [runs(2, 0, OffsetRun(20, 30, 111)), runs(1, 0, OffsetRun(10, 20, 100))]
    got = range_result(planned, done, {("t", 0): records})
    assert got == progress_result(nothing_recorded(planned), done, records)
    assert (got.start, got.end, got.records, got.runs) == (10, 30, 20, (OffsetRun(10, 20, 100), OffsetRun(20, 30, 111)))
