"""The record-by-record comparison behind ``airmirror verify``: every verdict, compaction, first offsets."""

from __future__ import annotations

from airmirror.migration.partition_compare import Lost, Record, RunMap, compare_partition
from airmirror.model import OffsetRun, Verdict


def record(offset: int, key: str | None, value: str | None = "v", headers=(), timestamp: int = 1000) -> Record:
    return Record(
        offset,
        None if key is None else key.encode(),
        None if value is None else value.encode(),
        tuple(headers),
        timestamp,
    )


def shifted(records: list[Record], by: int) -> list[Record]:
    return [Record(r.offset + by, r.key, r.value, r.headers, r.timestamp) for r in records]


SOURCE = [record(o, f"k{o}") for o in range(10)]
RUNS = [OffsetRun(0, 10, 100)]


def compare(source, target, runs=RUNS, **kwargs):
    return compare_partition(
        runs,
        source,
        target,
        source_compacted=kwargs.pop("source_compacted", False),
        target_compacted=kwargs.pop("target_compacted", False),
        **kwargs,
    )


def test_an_exact_copy_is_equal_with_equal_digests():
    result = compare(SOURCE, shifted(SOURCE, 100))
    assert (result.verdict, result.first_offset, result.source_records, result.target_records) == (
        Verdict.EQUAL,
        None,
        10,
        10,
    )
    assert result.source_digest == result.target_digest


def test_a_record_written_into_the_target_is_extra_at_its_target_offset():
    result = compare(SOURCE, [*shifted(SOURCE, 100), record(110, "intruder")])
    assert (result.verdict, result.first_offset, result.extra) == (Verdict.EXTRA, 110, 1)


def test_source_records_no_run_covers_are_missing_from_the_first_one():
    runs = [OffsetRun(0, 4, 100), OffsetRun(7, 10, 104)]
    target = [record(100 + o, f"k{o}") for o in range(4)] + [record(104 + o - 7, f"k{o}") for o in range(7, 10)]
    result = compare(SOURCE, target, runs)
    assert (result.verdict, result.first_offset, result.missing) == (Verdict.MISSING, 4, 3)


def test_a_lost_copy_is_missing_at_its_source_offset():
    target = [r for r in shifted(SOURCE, 100) if r.offset != 105]
    result = compare(SOURCE, target)
    assert (result.verdict, result.first_offset, result.missing) == (Verdict.MISSING, 5, 1)


def test_a_changed_value_header_or_timestamp_is_different_at_the_source_offset():
    for changed in (
        record(103, "k3", "other"),
        record(103, "k3", headers=[("h", b"1")]),
        record(103, "k3", timestamp=7),
    ):
        target = [changed if r.offset == 103 else r for r in shifted(SOURCE, 100)]
        result = compare(SOURCE, target)
        assert (result.verdict, result.first_offset, result.different) == (Verdict.DIFFERENT, 3, 1)
        assert result.source_digest != result.target_digest


def test_the_first_difference_in_target_order_is_the_verdict_and_all_are_counted():
    target = [record(103, "k3", "other") if r.offset == 103 else r for r in shifted(SOURCE, 100) if r.offset != 107] + [
        record(110, "x")
    ]
    result = compare(SOURCE, target)
    assert (result.verdict, result.first_offset) == (Verdict.DIFFERENT, 3)
    assert (result.missing, result.extra, result.different) == (1, 1, 1)


def test_source_compaction_after_the_copy_is_compaction_not_extra():
    source = [record(o, f"k{o % 3}", f"v{o}") for o in range(10)]
    target = shifted(source, 100)
    compacted = [r for r in source if r.offset >= 7]  # the cleaner kept the newest record of each key
    result = compare(compacted, target, source_compacted=True)
    assert (result.verdict, result.compacted_source, result.extra) == (Verdict.EQUAL, 7, 0)


def test_target_compaction_and_dropped_tombstones_are_compaction_not_missing():
    source = [record(o, f"k{o % 3}", f"v{o}") for o in range(9)] + [record(9, "gone", None)]
    compacted = [r for r in shifted(source, 100) if r.offset >= 106 and r.value is not None]
    result = compare(source, compacted, target_compacted=True)
    assert (result.verdict, result.compacted_target, result.missing) == (Verdict.EQUAL, 7, 0)


def test_a_key_written_again_only_beyond_the_compared_range_still_explains_compaction():
    source = [record(o, "k") for o in range(3)]
    runs = [OffsetRun(0, 3, 0)]
    target = [record(2, "k")]
    result = compare(source, target, runs, target_compacted=True, target_later_keys=lambda: iter([b"other", b"k"]))
    assert (result.verdict, result.compacted_target) == (Verdict.EQUAL, 2)


def test_an_absence_no_later_key_explains_is_a_difference_even_on_a_compacted_topic():
    source = [record(o, f"k{o}") for o in range(3)]
    target = [r for r in shifted(source, 100) if r.offset != 101]
    result = compare(source, target, [OffsetRun(0, 3, 100)], target_compacted=True)
    assert (result.verdict, result.first_offset, result.missing) == (Verdict.MISSING, 1, 1)


def test_run_map_translates_both_ways_and_nothing_outside_runs():
    mapping = RunMap([OffsetRun(5, 8, 0), OffsetRun(10, 12, 3)])
    assert [mapping.to_target(o) for o in (4, 5, 7, 8, 10, 11, 12)] == [None, 0, 2, None, 3, 4, None]
    assert [mapping.to_source(o) for o in (0, 2, 3, 4, 5)] == [5, 7, 10, 11, None]


# A folded run: source offsets 0..9 copied, in order, to target offsets 100..111 with commit markers at 103 and 107.
COPY_OFFSETS = [100, 101, 102, 104, 105, 106, 108, 109, 110, 111]
FOLDED = [OffsetRun(0, 10, 100, 112, 10)]


def copied(source: list[Record], offsets=COPY_OFFSETS) -> list[Record]:
    """The copies of ``source`` at target ``offsets`` (in order)."""
    return [Record(o, r.key, r.value, r.headers, r.timestamp) for r, o in zip(source, offsets, strict=True)]


def test_a_folded_run_whose_sides_hold_every_record_is_equal():
    result = compare(SOURCE, copied(SOURCE), FOLDED)

    assert (result.verdict, result.source_records, result.target_records) == (Verdict.EQUAL, 10, 10)
    assert result.source_digest == result.target_digest


def test_a_changed_copy_in_a_folded_run_is_different_at_its_source_offset():
    target = copied([record(5, "k5", "other") if r.offset == 5 else r for r in SOURCE])

    result = compare(SOURCE, target, FOLDED)

    assert (result.verdict, result.first_offset, result.different, result.missing, result.extra) == (
        Verdict.DIFFERENT,
        5,
        1,
        0,
        0,
    )


def test_a_copy_dropped_in_the_middle_of_a_folded_run_is_missing_at_its_source_offset():
    target = [r for r in copied(SOURCE) if r.offset != 105]

    result = compare(SOURCE, target, FOLDED)

    assert (result.verdict, result.first_offset, result.missing, result.different, result.extra) == (
        Verdict.MISSING,
        4,
        1,
        0,
        0,
    )


def test_a_record_written_into_a_folded_run_is_extra_at_its_target_offset():
    target = sorted([*copied(SOURCE), record(107, "intruder")], key=lambda r: r.offset)

    result = compare(SOURCE, target, FOLDED)

    assert (result.verdict, result.first_offset, result.extra, result.missing, result.different) == (
        Verdict.EXTRA,
        107,
        1,
        0,
        0,
    )


def test_both_sides_short_of_the_records_a_folded_run_copied_is_never_equal():
    source = [r for r in SOURCE if r.offset != 4]
    target = copied(source, [o for o in COPY_OFFSETS if o != 105])

    result = compare(source, target, FOLDED)

    assert (result.verdict, result.first_offset) == (Verdict.MISSING, 0)


def test_every_copy_of_a_folded_run_after_a_dropped_one_is_not_paired_with_the_wrong_record():
    target = [r for r in copied(SOURCE) if r.offset not in (101, 109)]

    result = compare(SOURCE, target, FOLDED)

    assert (result.verdict, result.first_offset, result.missing, result.different, result.extra) == (
        Verdict.MISSING,
        1,
        2,
        0,
        0,
    )


def test_folded_and_exact_runs_are_compared_each_in_their_own_way():
    source = [record(o, f"k{o}") for o in range(15)]
    runs = [*FOLDED, OffsetRun(10, 15, 113)]
    target = copied(source[:10]) + [record(113 + o - 10, f"k{o}") for o in range(10, 15)]

    assert compare(source, target, runs).verdict is Verdict.EQUAL
    shifted_exact = copied(source[:10]) + [record(112 + o - 10, f"k{o}") for o in range(10, 15)]
    assert compare(source, shifted_exact, runs).verdict is not Verdict.EQUAL


def test_a_target_log_start_inside_a_folded_run_aligns_by_content_and_the_rest_is_compared():
    target = [r for r in copied(SOURCE) if r.offset >= 104]  # the target's log start fell inside the run
    lost, excused = Lost("target", 0, 10, -1), Lost("target", 0, 10, 0)

    missing = compare(SOURCE, target, FOLDED, lost=lost)
    equal = compare(SOURCE, target, FOLDED, lost=excused)
    changed = compare(
        SOURCE, [record(108, "k6", "other") if r.offset == 108 else r for r in target], FOLDED, lost=excused
    )

    assert (missing.verdict, missing.first_offset, missing.missing, lost.records) == (Verdict.MISSING, 0, 3, 3)
    assert (equal.verdict, equal.missing, excused.records, equal.target_records) == (Verdict.EQUAL, 0, 3, 7)
    assert (changed.verdict, changed.first_offset) == (Verdict.DIFFERENT, 6)


def test_a_source_log_start_inside_a_contiguous_folded_run_is_pinned_by_its_offset():
    lost = Lost("source", 0, 3, -1)

    result = compare(SOURCE[3:], copied(SOURCE), FOLDED, lost=lost)
    shifted_content = compare(
        SOURCE[3:], copied([*SOURCE[1:], record(10, "k10")]), FOLDED, lost=Lost("source", 0, 3, 10**9)
    )

    assert (result.verdict, result.first_offset, lost.records) == (Verdict.MISSING, 0, 3)
    assert shifted_content.verdict is not Verdict.EQUAL


def test_compaction_inside_a_folded_run_on_either_side_is_compaction():
    source = [record(o, f"k{o % 3}", f"v{o}") for o in range(10)]
    target = copied(source)
    source_compacted = [r for r in source if r.offset >= 7]
    target_compacted = [r for r in target if r.offset >= 109]

    by_source = compare(source_compacted, target, FOLDED, source_compacted=True)
    by_target = compare(source, target_compacted, FOLDED, target_compacted=True)
    by_both = compare(
        [r for r in source if r.offset in (1, 7, 8, 9)],
        [r for r in target if r.offset in (105, 109, 110, 111)],
        FOLDED,
        source_compacted=True,
        target_compacted=True,
    )

    assert (by_source.verdict, by_source.compacted_source) == (Verdict.EQUAL, 7)
    assert (by_target.verdict, by_target.compacted_target) == (Verdict.EQUAL, 7)
    assert (by_both.verdict, by_both.compacted_source, by_both.compacted_target) == (Verdict.EQUAL, 1, 1)


def test_an_altered_copy_in_a_compacted_folded_run_is_never_equal():
    source = [record(o, f"k{o % 3}", f"v{o}") for o in range(10)]
    target = [r for r in copied(source) if r.offset >= 108]
    altered = [record(108, "k0", "forged") if r.offset == 108 else r for r in target]
    new_key = [record(108, "k9", "v7") if r.offset == 108 else r for r in target]

    for forged in (altered, new_key):
        for source_compacted in (False, True):
            result = compare(source, forged, FOLDED, source_compacted=source_compacted, target_compacted=True)
            assert result.verdict is not Verdict.EQUAL, (forged, source_compacted)


def test_an_absence_in_a_folded_run_no_compaction_explains_is_a_difference():
    source = [record(o, f"k{o}") for o in range(10)]
    target = [r for r in copied(source) if r.offset != 105]

    result = compare(source, target, FOLDED, target_compacted=True)

    assert (result.verdict, result.first_offset) == (Verdict.MISSING, 4)


def test_run_map_finds_a_folded_run_by_its_downstream_stop_and_maps_only_exact_runs():
    mapping = RunMap([OffsetRun(0, 10, 100, 112, 10), OffsetRun(10, 12, 112)])

    assert [mapping.downstream_run(o) is not None for o in (99, 100, 111, 112, 113, 114)] == [
        False,
        True,
        True,
        True,
        True,
        False,
    ]
    assert (mapping.to_target(5), mapping.to_target(11), mapping.to_source(111), mapping.to_source(113)) == (
        None,
        113,
        None,
        11,
    )
