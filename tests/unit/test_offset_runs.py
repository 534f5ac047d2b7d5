"""Offset-sync runs built from delivery reports."""

from __future__ import annotations

import pytest

from airmirror.model import OffsetRun
from airmirror.offset_runs import build_runs


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
