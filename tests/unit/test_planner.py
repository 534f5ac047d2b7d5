"""Planning arithmetic: cursor, log start, last stable offset, until and caps."""

from __future__ import annotations

from airmirror.planner import PartitionOffsets, needs_work, plan_range


def plan(cursor, log_start=0, stable_end=100, until=None, reset="earliest", cap=None):
    return plan_range("t", 0, "a.t", cursor, PartitionOffsets(log_start, stable_end, until), auto_offset_reset=reset, max_records=cap)


def test_new_partition_starts_at_log_start_by_default():
    r = plan(None, log_start=7)
    assert (r.start, r.end, r.gap()) == (7, 100, None)


def test_new_partition_with_latest_starts_at_end_and_still_needs_a_cursor():
    r = plan(None, log_start=7, reset="latest")
    assert (r.start, r.end) == (100, 100)
    assert needs_work(r, None)


def test_stored_cursor_resumes_exactly():
    r = plan(42)
    assert (r.start, r.end) == (42, 100)


def test_cursor_below_log_start_becomes_a_gap():
    r = plan(10, log_start=25)
    assert (r.start, r.end) == (25, 100)
    assert (r.gap().start, r.gap().end) == (10, 25)


def test_until_and_cap_lower_the_bound_but_never_below_start():
    assert plan(10, until=50).end == 50
    assert plan(10, until=5).end == 10
    assert plan(10, cap=20).end == 30
    assert plan(10, until=50, cap=100).end == 50


def test_idle_partition_needs_no_work():
    r = plan(100)
    assert r.size == 0 and not needs_work(r, 100)
