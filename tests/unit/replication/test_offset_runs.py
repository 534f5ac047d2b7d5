"""Offset-sync runs built from delivery reports, incrementally, and merged across chunk boundaries."""

from __future__ import annotations

import pytest

from airmirror.model import OffsetRun
from airmirror.replication.offset_runs import RunBuilder, build_runs, merge_runs, split_run


def test_contiguous_copy_is_one_run():
    assert build_runs([5, 6, 7], [0, 1, 2]) == [OffsetRun(5, 8, 0)]


def test_upstream_skips_are_holes_and_downstream_markers_split_runs():
    assert build_runs([0, 1, 4, 5, 9], [10, 11, 12, 13, 15]) == [
        OffsetRun(0, 6, 10, holes=(2, 4)),
        OffsetRun(9, 10, 15),
    ]


def test_a_chunk_that_drops_every_tenth_record_is_one_run_with_a_hole_per_drop():
    kept = [offset for offset in range(100_000) if offset % 10 != 9]
    (run,) = build_runs(kept, range(500, 500 + len(kept)))
    assert (run.upstream_start, run.upstream_end, run.copies, len(run.holes)) == (0, 99_999, 90_000, 2 * 9_999)
    assert all(run.downstream_at_most(u) == 500 + kept.index(u) for u in kept[:200] + kept[-200:])
    assert run.downstream_at_most(19) == 500 + 18  # a dropped record translates to the next kept one


def test_empty_copy_has_no_runs():
    assert build_runs([], []) == []


def test_rejects_unpaired_or_unordered_offsets():
    with pytest.raises(ValueError):
        build_runs([1, 2], [1])
    with pytest.raises(ValueError):
        build_runs([2, 1], [0, 1])
    with pytest.raises(ValueError):
        build_runs([1, 2, 3], [5, 6, 6])


def test_builder_counts_runs_and_starts_afresh_after_take():
    builder = RunBuilder()
    for up, down in [(0, 0), (1, 1), (3, 2)]:
        builder.add(up, down)
    builder.add(5, 4)
    assert len(builder) == 2
    assert builder.take() == [OffsetRun(0, 4, 0, holes=(2, 3)), OffsetRun(5, 6, 4)]
    assert len(builder) == 0
    builder.add(4, 3)
    assert builder.take() == [OffsetRun(4, 5, 3)]


def test_builder_keeps_integers_per_run_and_hole_not_per_record():
    builder = RunBuilder()
    for offset in range(1_000_000):
        builder.add(offset, offset + 7)
    assert len(builder) == 1
    assert builder.take() == [OffsetRun(0, 1_000_000, 7)]


def test_merge_joins_runs_that_continue_each_other_on_the_target_only():
    runs = [OffsetRun(0, 5, 10), OffsetRun(5, 9, 15, holes=(6, 7)), OffsetRun(10, 12, 18), OffsetRun(12, 13, 22)]
    assert merge_runs(runs) == [OffsetRun(0, 12, 10, holes=(6, 7, 9, 10)), OffsetRun(12, 13, 22)]


def test_a_run_split_at_a_hole_maps_as_the_whole_and_merges_back():
    whole = OffsetRun(100, 120, 7, holes=(101, 103, 105, 106, 110, 115))
    head, rest = split_run(whole, 2)
    assert head == OffsetRun(100, 110, 7, holes=(101, 103, 105, 106))
    assert rest == OffsetRun(115, 120, 14)
    assert merge_runs([head, rest]) == [whole]
    assert split_run(whole, 3) == (whole, None)
    assert split_run(whole, 0) == (OffsetRun(100, 101, 7), OffsetRun(103, 120, 8, holes=(105, 106, 110, 115)))
