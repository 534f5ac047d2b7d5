"""What verify may compare of a partition, and what it must never call equal (pure rules)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airmirror.migration.compared_record import Record
from airmirror.migration.partition_compare import Lost, compare_partition
from airmirror.migration.verify_bounds import (
    Horizons,
    Retention,
    Topics,
    compared_bounds,
    first_copy_at_or_after,
    first_source_copied_at_or_after,
    last_copy_below,
    uncomparable,
    unmapped_below_cursor,
)
from airmirror.model import CursorState, OffsetRun, PartitionOffsets, Stop, Verdict

SAME = Topics(
    source_id="S1",
    source_partitions=2,
    target_id="T1",
    target_partitions=2,
    cursor_source_id="S1",
    recorded_target_id="T1",
)
WEEK = Retention(7 * 86_400_000, -1)
NO_HORIZONS = Horizons(None, None)
STOP = Stop("orders", None, "remote topic a.orders was deleted", datetime(2026, 11, 26, tzinfo=UTC))


@pytest.mark.parametrize(
    ("topics", "stop", "verdict"),
    [
        (SAME, STOP, Verdict.STOPPED),
        (Topics(None, 0, "T1", 2, "S1", "T1"), None, Verdict.SOURCE_DELETED),
        (Topics("S1", 1, "T1", 2, "S1", "T1"), None, Verdict.SOURCE_DELETED),
        (Topics("S2", 2, "T1", 2, "S1", "T1"), None, Verdict.SOURCE_RECREATED),
        (Topics("S1", 2, None, 0, "S1", "T1"), None, Verdict.TARGET_DELETED),
        (Topics("S1", 2, "T1", 1, "S1", "T1"), None, Verdict.TARGET_DELETED),
        (Topics("S1", 2, "T2", 2, "S1", "T1"), None, Verdict.TARGET_RECREATED),
    ],
)
def test_a_partition_whose_topics_changed_gets_its_own_verdict_with_a_reason(topics, stop, verdict):
    found = uncomparable(1, topics, stop, "a.orders")

    assert found is not None and found[0] is verdict and found[1]


def test_a_stop_comes_first_and_unknown_ids_of_old_cursors_are_no_change():
    assert uncomparable(1, Topics(None, 0, None, 0, "S1", "T1"), STOP, "a.orders")[0] is Verdict.STOPPED
    assert uncomparable(1, SAME, None, "a.orders") is None
    assert uncomparable(1, Topics("S1", 2, "T1", 2, None, None), None, "a.orders") is None


def test_records_below_a_cursor_that_no_run_maps_cannot_be_proven():
    reason = unmapped_below_cursor([], CursorState(300, "S1"), PartitionOffsets(0, 400))

    assert reason is not None and "0 to 299" in reason
    assert unmapped_below_cursor([], CursorState(0, "S1"), PartitionOffsets(0, 0)) is None
    assert unmapped_below_cursor([OffsetRun(0, 300, 0)], CursorState(300, "S1"), PartitionOffsets(0, 400)) is None


def test_a_partition_whose_records_the_transforms_may_drop_is_compared_from_its_log_start_without_runs():
    assert unmapped_below_cursor([], CursorState(300, "S1"), PartitionOffsets(0, 400), may_drop=True) is None
    source, target = PartitionOffsets(20, 400), PartitionOffsets(5, 5)
    dropping = compared_bounds([], 300, source, target, (WEEK, WEEK), NO_HORIZONS, may_drop=True)
    assert (dropping.source_start, dropping.target_start) == (20, 5)
    assert compared_bounds([], 300, source, target, (WEEK, WEEK), NO_HORIZONS).source_start == 300


RUNS = [OffsetRun(0, 100, 0)]


def bounds(source: PartitionOffsets, target: PartitionOffsets, horizons=NO_HORIZONS, retention=(WEEK, WEEK)):
    return compared_bounds(RUNS, 100, source, target, retention, horizons)


def test_nothing_deleted_compares_from_the_first_copy():
    found = bounds(PartitionOffsets(0, 100), PartitionOffsets(0, 100))

    assert (found.source_start, found.target_start, found.note, found.lost) == (0, 0, "", None)


def test_records_deleted_on_both_sides_are_left_out_with_a_note():
    found = bounds(PartitionOffsets(30, 100), PartitionOffsets(30, 100))

    assert (found.source_start, found.target_start, found.lost) == (30, 30, None)
    assert "0 to 29 deleted on both sides" in found.note


def test_copies_deleted_from_the_target_only_and_younger_than_its_retention_are_lost():
    found = bounds(PartitionOffsets(0, 100), PartitionOffsets(40, 100), Horizons(source=0, target=None))

    assert (found.source_start, found.target_start) == (0, 40)
    assert found.lost == Lost("target", 0, 40, -1)


def test_copies_deleted_from_the_target_only_and_older_than_its_retention_are_left_out():
    found = bounds(PartitionOffsets(0, 100), PartitionOffsets(40, 100), Horizons(source=50, target=None))

    assert (found.source_start, found.target_start, found.lost) == (40, 40, None)
    assert "copies of source offsets 0 to 39 deleted by the target's retention.ms" in found.note


def test_records_deleted_from_the_source_only_are_lost_unless_their_copies_are_older_than_its_retention():
    young = bounds(PartitionOffsets(25, 100), PartitionOffsets(0, 100), Horizons(source=None, target=10))
    old = bounds(PartitionOffsets(25, 100), PartitionOffsets(0, 100), Horizons(source=None, target=25))

    assert (young.source_start, young.target_start, young.lost) == (25, 0, Lost("source", 0, 25, -1))
    assert (old.source_start, old.target_start, old.lost) == (25, 25, None)
    assert "source offsets 0 to 24 deleted by the source's retention.ms" in old.note


def test_unlimited_retention_explains_nothing():
    found = bounds(
        PartitionOffsets(0, 100),
        PartitionOffsets(40, 100),
        Horizons(None, None),
        (Retention(-1, -1), Retention(-1, -1)),
    )

    assert found.lost == Lost("target", 0, 40, -1)


def test_a_policy_that_does_not_delete_has_no_retention():
    assert Retention.of("compact", "1000", "5000") == Retention(-1, -1)
    assert Retention.of("compact,delete", "1000", "5000") == Retention(1000, 5000)


def records(offsets, size=10):
    return [Record(o, b"k%d" % o, b"v" * size, (), 1_000 + o) for o in offsets]


def test_lost_copies_are_missing_from_their_first_source_offset():
    lost = Lost("target", 0, 40, -1)

    figures = compare_partition(
        RUNS, records(range(100)), records(range(40, 100)), source_compacted=False, target_compacted=False, lost=lost
    )

    assert (figures.verdict, figures.first_offset, figures.missing) == (Verdict.MISSING, 0, 40)
    assert (lost.records, lost.excused) == (40, False)


def test_lost_source_records_are_missing_at_their_source_offset():
    lost = Lost("source", 0, 25, -1)

    figures = compare_partition(
        RUNS, records(range(25, 100)), records(range(100)), source_compacted=False, target_compacted=False, lost=lost
    )

    assert (figures.verdict, figures.first_offset, figures.missing, figures.extra) == (Verdict.MISSING, 0, 25, 0)


def test_a_side_still_holding_its_retention_bytes_excuses_what_it_lost():
    held = 60 * (3 + 10 + 7)  # what the target still holds of its 60 records: key, value and the least record overhead
    excused, short = Lost("target", 0, 40, held), Lost("target", 0, 40, held + 1)

    equal = compare_partition(
        RUNS, records(range(100)), records(range(40, 100)), source_compacted=False, target_compacted=False, lost=excused
    )
    missing = compare_partition(
        RUNS, records(range(100)), records(range(40, 100)), source_compacted=False, target_compacted=False, lost=short
    )

    assert (equal.verdict, equal.missing, excused.records, excused.excused) == (Verdict.EQUAL, 0, 40, True)
    assert (missing.verdict, missing.missing) == (Verdict.MISSING, 40)


# Source offsets 0..99 copied in two folded runs: 0..49 to target 0..59, 50..99 to target 60..119 (commit markers).
FOLDED = [OffsetRun(0, 50, 0, 60, 50), OffsetRun(50, 100, 60, 120, 50)]


def folded_bounds(source: PartitionOffsets, target: PartitionOffsets, horizons=NO_HORIZONS, retention=(WEEK, WEEK)):
    return compared_bounds(FOLDED, 100, source, target, retention, horizons)


def test_offsets_map_through_folded_runs_at_or_before_their_copies_and_by_their_downstream_stop():
    assert first_source_copied_at_or_after(FOLDED, 59) == 49 and first_source_copied_at_or_after(FOLDED, 30) == 20
    assert first_source_copied_at_or_after(FOLDED, 60) == 50 and first_source_copied_at_or_after(FOLDED, 120) is None
    assert first_copy_at_or_after(FOLDED, 49, 999) == 49 and first_copy_at_or_after(FOLDED, 50, 999) == 60
    assert first_copy_at_or_after(FOLDED, 100, 999) == 999
    assert last_copy_below(FOLDED, 50) == 59 and last_copy_below(FOLDED, 10) == 19  # never before the copy
    assert last_copy_below([OffsetRun(0, 50, 0)], 10) == 9 and last_copy_below(FOLDED, 0) is None
    assert unmapped_below_cursor(FOLDED, CursorState(100, "S1"), PartitionOffsets(0, 100)) is None


def test_nothing_deleted_compares_folded_runs_from_the_first_copy():
    found = folded_bounds(PartitionOffsets(0, 100), PartitionOffsets(0, 120))

    assert (found.source_start, found.target_start, found.note, found.lost) == (0, 0, "", None)


def test_a_target_log_start_inside_a_folded_run_makes_the_rest_of_the_run_lost_unless_age_explains_it():
    lost = folded_bounds(PartitionOffsets(0, 100), PartitionOffsets(30, 120), Horizons(source=0, target=None))
    aged = folded_bounds(PartitionOffsets(0, 100), PartitionOffsets(30, 120), Horizons(source=50, target=None))

    assert (lost.source_start, lost.target_start, lost.lost) == (0, 30, Lost("target", 0, 50, -1))
    assert (aged.source_start, aged.target_start, aged.lost) == (50, 60, None)
    assert "source offsets 20 to 49 lie inside a folded offset-sync run" in aged.note


def test_both_sides_deleted_into_a_folded_run_compare_from_its_end_with_a_note():
    found = folded_bounds(PartitionOffsets(20, 100), PartitionOffsets(36, 120), Horizons(source=50, target=None))

    assert (found.source_start, found.target_start, found.lost) == (50, 60, None)
    assert "deleted on both sides" in found.note and "lie inside a folded offset-sync run" in found.note


def test_a_source_log_start_inside_a_folded_run_is_lost_from_the_first_copy_the_target_holds():
    found = folded_bounds(PartitionOffsets(30, 100), PartitionOffsets(0, 120), Horizons(source=None, target=0))

    assert (found.source_start, found.target_start, found.lost) == (30, 0, Lost("source", 0, 30, -1))
