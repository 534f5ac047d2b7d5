"""The folding policy of offset-sync runs (pure arithmetic): which runs merge, and that translation through the
folded runs stays at or before the exact position, and exact in the newest runs."""

from __future__ import annotations

import random

import pytest

from airmirror.model import OffsetRun
from airmirror.store.folding import EXACT_RUNS, FOLD_SIZE, FOLDED_RUNS, cut, fold, merged


def batch_runs(count: int, seed: int = 7) -> list[OffsetRun]:
    """``count`` exact runs as batches leave them: holes (dropped records, compaction, aborted records) inside some
    and upstream gaps between some, and one commit marker or more (aborted records) between every two on the
    target."""
    rng = random.Random(seed)
    runs, upstream, downstream = [], 0, 0
    for _ in range(count):
        length = rng.randint(1, 9)
        holes = tuple(
            b for i in range(2, length - 1, 3) if rng.random() < 0.3 for b in (upstream + i, upstream + i + 1)
        )
        run = OffsetRun(upstream, upstream + length, downstream, holes=holes)
        runs.append(run)
        upstream += length + rng.choice((0, 0, 1, 3))
        downstream += run.copies + rng.choice((1, 1, 2, 4))
    return runs


def covering(runs: list[OffsetRun], upstream: int) -> OffsetRun | None:
    return next((r for r in runs if r.upstream_end > upstream), None)


def covering_downstream(runs: list[OffsetRun], downstream: int) -> OffsetRun | None:
    return next((r for r in runs if r.downstream_stop > downstream), None)


def forward(runs: list[OffsetRun], upstream: int) -> int | None:
    run = covering(runs, upstream)
    return None if run is None else run.downstream_at_most(upstream)


def back(runs: list[OffsetRun], downstream: int) -> int | None:
    run = covering_downstream(runs, downstream)
    return None if run is None else run.upstream_at_most(downstream)


def assert_at_or_before(exact: list[OffsetRun], folded: list[OffsetRun]) -> None:
    """Every offset translates (both ways) at or before its exact position, and exactly from the first exact run
    of ``folded`` on."""
    tail = next(r for r in folded if r.exact)
    for u in range(exact[-1].upstream_end):
        want, got = forward(exact, u), forward(folded, u)
        assert got is not None and want is not None and got <= want, u
        assert u < tail.upstream_start or got == want, u
    for d in range(exact[-1].downstream_stop):
        want, got = back(exact, d), back(folded, d)
        assert got is not None and want is not None and got <= want, d
        assert d < tail.downstream_start or got == want, d


def test_the_thresholds_are_sixteen_runs_each() -> None:
    assert (EXACT_RUNS, FOLD_SIZE, FOLDED_RUNS) == (16, 16, 16)


@pytest.mark.parametrize("count", [0, 1, EXACT_RUNS, EXACT_RUNS + FOLD_SIZE])
def test_up_to_exact_runs_plus_a_fold_nothing_changes(count: int) -> None:
    runs = batch_runs(count)
    assert fold(runs) == runs


def test_the_oldest_runs_fold_sixteen_at_a_time_and_the_newest_stay_exact() -> None:
    runs = batch_runs(EXACT_RUNS + 2 * FOLD_SIZE + 5)

    folded = fold(runs)

    assert folded == [merged(runs[:16]), merged(runs[16:32]), *runs[32:]]  # 21 newest stay exact
    assert not folded[0].exact and folded[0].records == sum(r.copies for r in runs[:16])
    assert folded[0].downstream_end == runs[15].downstream_stop and folded[1].upstream_start == runs[16].upstream_start
    assert fold(folded) == folded
    assert_at_or_before(runs, folded)


def test_beyond_sixteen_folded_runs_the_oldest_merge() -> None:
    runs = batch_runs(EXACT_RUNS + 20 * FOLD_SIZE + 3, seed=11)

    folded = fold(runs)

    assert [r.exact for r in folded] == [False] * FOLDED_RUNS + [True] * (EXACT_RUNS + 3)
    assert folded[0] == merged(runs[: 5 * FOLD_SIZE]) and folded[1] == merged(runs[5 * FOLD_SIZE : 6 * FOLD_SIZE])
    assert sum(r.copies for r in folded) == sum(r.copies for r in runs)
    assert fold(folded) == folded
    assert_at_or_before(runs, folded)


def test_folding_batch_after_batch_keeps_the_count_bounded_and_translation_at_or_before() -> None:
    runs = batch_runs(600, seed=3)
    stored: list[OffsetRun] = []
    for run in runs:
        stored = fold([*stored, run])
        assert len(stored) <= FOLDED_RUNS + EXACT_RUNS + FOLD_SIZE
    assert stored[-EXACT_RUNS:] == runs[-EXACT_RUNS:]
    assert_at_or_before(runs, stored)


def test_a_cut_exact_run_ends_at_the_offset() -> None:
    assert cut(OffsetRun(10, 20, 100), 15) == OffsetRun(10, 15, 100)


def test_a_cut_exact_run_keeps_the_holes_below_the_offset() -> None:
    run = OffsetRun(10, 30, 100, holes=(12, 14, 17, 20, 25, 26))
    assert cut(run, 18) == OffsetRun(10, 18, 100, holes=(12, 14, 17, 18))
    assert cut(run, 17) == OffsetRun(10, 17, 100, holes=(12, 14))
    assert cut(run, 13).downstream_stop == 102


def test_a_cut_folded_run_keeps_a_lower_bound_of_its_copies_and_translates_at_or_before() -> None:
    runs = batch_runs(FOLD_SIZE, seed=5)
    whole = merged(runs)
    for offset in range(whole.upstream_start + 1, whole.upstream_end):
        kept = [r if r.upstream_end <= offset else cut(r, offset) for r in runs if r.upstream_start < offset]
        truncated = cut(whole, offset)
        assert (truncated.upstream_end, truncated.downstream_end) == (offset, whole.downstream_end)
        assert 1 <= truncated.copies <= sum(r.length for r in kept), offset
        for u in range(whole.upstream_start, offset):  # past the last kept copy, the next copy lies past them all
            exact = forward(kept, u)
            assert truncated.downstream_at_most(u) <= (kept[-1].downstream_stop if exact is None else exact), (
                offset,
                u,
            )
        for d in range(whole.downstream_start, whole.downstream_end):  # ... and is of a record from ``offset`` on
            exact = back(kept, d)
            assert truncated.upstream_at_most(d) <= (offset if exact is None else exact), (offset, d)
