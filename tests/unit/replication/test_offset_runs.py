"""Offset-sync runs built from delivery reports, incrementally, and merged across chunk boundaries."""

from __future__ import annotations

import pytest

from airmirror.model import OffsetRun
from airmirror.replication.offset_runs import RunBuilder, build_runs, merge_runs


def test_contiguous_copy_is_one_run():
    assert build_runs([5, 6, 7], [0, 1, 2]) == [OffsetRun(5, 8, 0)]


def test_upstream_holes_and_downstream_markers_split_runs():
    assert build_runs([0, 1, 4, 5, 9], [10, 11, 12, 13, 15]) == [
        OffsetRun(0, 2, 10),
        OffsetRun(4, 6, 12),
        OffsetRun(9, 10, 15),
    ]


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
    assert len(builder) == 2
    assert builder.take() == [OffsetRun(0, 2, 0), OffsetRun(3, 4, 2)]
    assert len(builder) == 0
    builder.add(4, 3)
    assert builder.take() == [OffsetRun(4, 5, 3)]


def test_builder_keeps_three_integers_per_run_not_per_record():
    builder = RunBuilder()
    for offset in range(1_000_000):
        builder.add(offset, offset + 7)
    assert len(builder) == 1
    assert builder.take() == [OffsetRun(0, 1_000_000, 7)]


def test_merge_joins_runs_split_by_a_chunk_boundary_only():
    runs = [OffsetRun(0, 5, 10), OffsetRun(5, 9, 15), OffsetRun(10, 12, 19), OffsetRun(12, 13, 22)]
    assert merge_runs(runs) == [OffsetRun(0, 9, 10), OffsetRun(10, 12, 19), OffsetRun(12, 13, 22)]
