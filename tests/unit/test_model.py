"""Model values: what an empty planned range committed."""

from __future__ import annotations

import random
from collections.abc import Iterator
from itertools import pairwise

import pytest

from airmirror.model import OffsetRun, PartitionKey, PlannedRange, RangeResult, packed_holes, unpacked_holes


def test_an_empty_range_copied_nothing_and_keeps_its_start_epoch() -> None:
    planned = PlannedRange(topic="orders", partition=2, start=40, end=40, remote_topic="us.orders", start_epoch=7)
    assert planned.empty_result() == RangeResult(
        topic="orders", partition=2, start=40, end=40, records=0, bytes=0, end_epoch=7
    )


def test_a_range_with_records_has_no_empty_result() -> None:
    planned = PlannedRange(topic="orders", partition=2, start=40, end=41, remote_topic="us.orders")
    with pytest.raises(ValueError, match=str(PartitionKey("orders", 2))):
        planned.empty_result()


def sparse_runs() -> Iterator[tuple[OffsetRun, list[int]]]:
    """Exact runs with holes of every shape (and the source offsets they copied), seeded."""
    randomness = random.Random(41)
    for _ in range(500):
        length = randomness.randint(1, 60)
        start = randomness.randint(0, 1000)
        kept = [
            0,
            *(i for i in range(1, length - 1) if randomness.random() < 0.6),
            *([length - 1] if length > 1 else []),
        ]
        copied = [start + i for i in kept]
        holes = tuple(b for a, c in pairwise(copied) if c > a + 1 for b in (a + 1, c))
        yield OffsetRun(start, start + length, randomness.randint(0, 100), holes=holes), copied


def test_an_exact_run_with_holes_translates_as_a_brute_force_oracle() -> None:
    for run, copied in sparse_runs():
        assert run.copies == len(copied) and run.downstream_stop == run.downstream_start + len(copied)
        for upstream in range(run.upstream_start, run.upstream_end):
            first_at_or_after = next(i for i, offset in enumerate(copied) if offset >= upstream)
            assert run.downstream_at_most(upstream) == run.downstream_start + first_at_or_after
            assert run.copied(upstream) == (upstream in copied)
        for index, upstream in enumerate(copied):
            assert run.upstream_of_copy(index) == upstream
            assert run.upstream_at_most(run.downstream_start + index) == upstream


def test_holes_pack_small_and_unpack_to_themselves() -> None:
    for run, _ in sparse_runs():
        assert unpacked_holes(packed_holes(run.holes)) == run.holes
    every_tenth = tuple(b for i in range(50_000) for b in (10 * i + 9, 10 * i + 10))
    assert len(packed_holes(every_tenth) or b"") < 8 * 1024  # 800 KB of integers
    assert packed_holes(()) is None and unpacked_holes(None) == ()
