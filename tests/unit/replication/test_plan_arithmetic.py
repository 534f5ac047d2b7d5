"""Planning arithmetic: cursor, log start, last stable offset, until and caps."""

from __future__ import annotations

import pytest

from airmirror.model import MovesCursor, PartitionOffsets, PlannedRange, ResetsCursor
from airmirror.replication.plan_arithmetic import (
    RECREATED,
    TRUNCATED,
    moved_from,
    needs_validation,
    needs_work,
    plan_range,
    requested_start,
    source_reset,
)


def reset_cursor(planned: PlannedRange) -> int | None:
    """The stored cursor a planned range resets, if it resets one."""
    return planned.begins.cursor if isinstance(planned.begins, ResetsCursor) else None


def plan(cursor, log_start=0, stable_end=100, until=None, reset="earliest", cap=None):
    return plan_range(
        "t", 0, "a.t", cursor, PartitionOffsets(log_start, stable_end, until), auto_offset_reset=reset, max_records=cap
    )


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


def incarnation_plan(cursor, stored_id, topic_id, log_start=0, stable_end=100, reset="earliest"):
    offsets = PartitionOffsets(log_start, stable_end, topic_id=topic_id)
    return plan_range("t", 0, "a.t", cursor, offsets, auto_offset_reset=reset, stored_topic_id=stored_id)


def test_same_incarnation_keeps_the_cursor():
    assert source_reset(42, "id1", PartitionOffsets(0, 100, topic_id="id1")) is None
    r = incarnation_plan(42, "id1", "id1")
    assert (r.start, reset_cursor(r), r.source_topic_id) == (42, None, "id1")


def test_recreated_topic_starts_the_new_incarnation_per_auto_offset_reset():
    assert source_reset(5000, "old", PartitionOffsets(0, 3000, topic_id="new")) == RECREATED
    r = incarnation_plan(5000, "old", "new", stable_end=3000)
    assert (r.start, r.end, reset_cursor(r), r.source_topic_id) == (0, 3000, 5000, "new")
    assert needs_work(r, 5000)
    latest = incarnation_plan(5000, "old", "new", stable_end=3000, reset="latest")
    assert (latest.start, reset_cursor(latest)) == (3000, 5000)


def test_recreated_topic_is_detected_even_below_the_old_cursor():
    r = incarnation_plan(10, "old", "new", stable_end=3000)
    assert (r.start, r.end, reset_cursor(r)) == (0, 3000, 10)


def test_cursor_above_the_log_end_without_a_known_id_is_a_new_incarnation():
    assert source_reset(5000, None, PartitionOffsets(0, 3000)) == RECREATED
    r = incarnation_plan(5000, None, None, stable_end=3000)
    assert (r.start, reset_cursor(r)) == (0, 5000)


def test_cursor_above_the_log_end_of_the_same_topic_is_a_truncation_and_starts_again():
    assert source_reset(5000, "id1", PartitionOffsets(0, 4900, topic_id="id1")) == TRUNCATED
    r = incarnation_plan(5000, "id1", "id1", log_start=10, stable_end=4900)
    assert (r.start, r.end, reset_cursor(r)) == (10, 4900, 5000)
    assert needs_work(r, 5000)


def test_legacy_cursor_without_id_adopts_the_topic_id():
    r = incarnation_plan(42, None, "id1")
    assert (r.start, reset_cursor(r), r.source_topic_id) == (42, None, "id1")


def test_cursor_is_validated_only_when_the_leader_epoch_changed_since():
    offsets = PartitionOffsets(0, 500, topic_id="id1", leader_epoch=3)
    assert not needs_validation(400, 3, offsets)
    assert needs_validation(400, 2, offsets)
    assert not needs_validation(400, None, offsets)
    assert not needs_validation(None, 2, offsets)
    assert not needs_validation(400, 2, PartitionOffsets(0, 500, topic_id="id1"))
    assert not needs_validation(400, 2, PartitionOffsets(400, 500, topic_id="id1", leader_epoch=3))


def test_continuing_range_carries_the_cursor_epoch_and_a_moved_start_does_not():
    offsets = PartitionOffsets(100, 500, topic_id="id1", leader_epoch=3)
    assert plan_range("t", 0, "a.t", 400, offsets, stored_topic_id="id1", stored_epoch=2).start_epoch == 2
    assert plan_range("t", 0, "a.t", 50, offsets, stored_topic_id="id1", stored_epoch=2).start_epoch is None
    assert (
        plan_range("t", 0, "a.t", 400, offsets, stored_topic_id="id1", stored_epoch=2, start_at=100).start_epoch is None
    )
    assert plan_range("t", 0, "a.t", 400, offsets, stored_topic_id="old", stored_epoch=2).start_epoch is None


def test_diverged_log_restarts_exactly_at_the_divergence_even_when_it_grew_past_the_cursor():
    offsets = PartitionOffsets(0, 600, topic_id="id1", leader_epoch=4)
    assert source_reset(500, "id1", offsets, diverged_at=420) == TRUNCATED
    planned = plan_range("t", 0, "a.t", 500, offsets, stored_topic_id="id1", stored_epoch=2, diverged_at=420)
    assert (planned.start, planned.end, planned.begins) == (420, 600, ResetsCursor(500, truncated_at=420))
    assert planned.start_epoch is None and needs_work(planned, 500)


def test_diverged_log_ignores_auto_offset_reset_and_respects_the_log_start():
    offsets = PartitionOffsets(450, 480, topic_id="id1", leader_epoch=4)
    latest = plan_range("t", 0, "a.t", 500, offsets, auto_offset_reset="latest", stored_topic_id="id1", diverged_at=420)
    assert (latest.start, latest.end, latest.begins) == (450, 480, ResetsCursor(500, truncated_at=420))


def test_divergence_at_or_above_the_cursor_is_no_reset():
    offsets = PartitionOffsets(0, 600, topic_id="id1", leader_epoch=4)
    assert source_reset(500, "id1", offsets, diverged_at=500) is None
    assert plan_range("t", 0, "a.t", 500, offsets, stored_topic_id="id1", diverged_at=500).start == 500


OFFSETS = PartitionOffsets(log_start=10, stable_end=100, start_offset=40)


@pytest.mark.parametrize(
    ("start_from", "start"), [("stored", None), ("earliest", 10), ("latest", 100), ("timestamp", 40)]
)
def test_requested_start_per_start_from(start_from, start):
    assert requested_start(start_from, OFFSETS) == start


def test_an_unknown_start_from_is_a_programming_error():
    with pytest.raises(ValueError, match="soon"):
        requested_start("soon", OFFSETS)


@pytest.mark.parametrize(
    ("cursor", "start_at", "moved"), [(50, 40, 50), (40, 40, None), (None, 40, None), (50, None, None)]
)
def test_only_a_requested_start_other_than_the_cursor_moves_it(cursor, start_at, moved):
    assert moved_from(cursor, start_at) == moved


def test_a_requested_start_replaces_the_cursor_and_names_the_move():
    r = plan_range("t", 0, "a.t", 70, OFFSETS, start_at=requested_start("timestamp", OFFSETS))
    assert (r.start, r.begins, r.end) == (40, MovesCursor(70), 100)
    assert needs_work(r, 70)
