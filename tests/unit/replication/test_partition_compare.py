"""The record-by-record comparison behind ``airmirror verify``: every verdict, compaction, first offsets."""

from __future__ import annotations

from airmirror.model import OffsetRun, Verdict
from airmirror.replication.partition_compare import Record, RunMap, compare_partition


def record(offset: int, key: str | None, value: str | None = "v", headers=(), timestamp: int = 1000) -> Record:
    return Record(offset, None if key is None else key.encode(), None if value is None else value.encode(), tuple(headers), timestamp)


def shifted(records: list[Record], by: int) -> list[Record]:
    return [Record(r.offset + by, r.key, r.value, r.headers, r.timestamp) for r in records]


SOURCE = [record(o, f"k{o}") for o in range(10)]
RUNS = [OffsetRun(0, 10, 100)]


def compare(source, target, runs=RUNS, **kwargs):
    return compare_partition(runs, source, target, source_compacted=kwargs.pop("source_compacted", False), target_compacted=kwargs.pop("target_compacted", False), **kwargs)


def test_an_exact_copy_is_equal_with_equal_digests():
    result = compare(SOURCE, shifted(SOURCE, 100))
    assert (result.verdict, result.first_offset, result.source_records, result.target_records) == (Verdict.EQUAL, None, 10, 10)
    assert result.source_digest == result.target_digest


def test_a_record_written_into_the_target_is_extra_at_its_target_offset():
    result = compare(SOURCE, shifted(SOURCE, 100) + [record(110, "intruder")])
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
    for changed in (record(103, "k3", "other"), record(103, "k3", headers=[("h", b"1")]), record(103, "k3", timestamp=7)):
        target = [changed if r.offset == 103 else r for r in shifted(SOURCE, 100)]
        result = compare(SOURCE, target)
        assert (result.verdict, result.first_offset, result.different) == (Verdict.DIFFERENT, 3, 1)
        assert result.source_digest != result.target_digest


def test_the_first_difference_in_target_order_is_the_verdict_and_all_are_counted():
    target = [record(103, "k3", "other") if r.offset == 103 else r for r in shifted(SOURCE, 100) if r.offset != 107] + [record(110, "x")]
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
