"""Rule 1 of resuming a batch (replication/resume.py): which unfinished ranges drop out, which end where their
copy got to, and which are finished although the run no longer selects their topic."""

from __future__ import annotations

from airmirror.model import PartitionKey, PlannedRange
from airmirror.replication.resume import Unfinishable, sort_unfinishable

X = PlannedRange(topic="x", partition=0, start=0, end=100, remote_topic="a.x", source_topic_id="idx")
Y = PlannedRange(topic="y", partition=0, start=0, end=100, remote_topic="a.y", source_topic_id="idy")
Y1 = PlannedRange(topic="y", partition=1, start=0, end=100, remote_topic="a.y", source_topic_id="idy")
IDS = {"x": "idx", "y": "idy"}


def test_selected_ranges_of_the_same_incarnations_stay():
    assert sort_unfinishable([X, Y], {Y.key: 40}, {"x", "y"}, {"x", "y"}, IDS) == Unfinishable()


def test_an_unselected_topic_with_committed_chunks_is_finished_its_untouched_partitions_drop():
    verdict = sort_unfinishable([X, Y, Y1], {Y.key: 40}, {"x"}, {"x", "y"}, IDS)
    assert verdict == Unfinishable(dropped={Y1.key})


def test_an_unselected_topic_without_committed_chunks_drops_out():
    assert sort_unfinishable([X, Y], {}, {"x"}, {"x"}, IDS) == Unfinishable(dropped={Y.key})


def test_a_stopped_remote_topic_drops_out_whatever_was_copied():
    assert sort_unfinishable([X, Y], {Y.key: 40}, {"x"}, {"x"}, IDS) == Unfinishable(dropped={Y.key})


def test_a_gone_or_recreated_source_topic_ends_where_its_copy_got_to_or_drops_out():
    for now in (None, "idy2"):
        ids = {**IDS, "y": now}
        assert sort_unfinishable([X, Y, Y1], {Y.key: 40}, {"x", "y"}, {"x", "y"}, ids) == Unfinishable(
            dropped={Y1.key}, ended={Y.key: 40}
        )
        assert sort_unfinishable([X, Y], {Y.key: 40}, {"x"}, {"x", "y"}, ids) == Unfinishable(ended={Y.key: 40})


def test_a_range_planned_without_a_topic_id_drops_out_only_when_its_topic_is_gone():
    unknown = PlannedRange(topic="y", partition=0, start=0, end=100, remote_topic="a.y")
    assert sort_unfinishable([unknown], {}, {"y"}, {"y"}, {"y": "idy"}) == Unfinishable()
    assert sort_unfinishable([unknown], {}, {"y"}, {"y"}, {"y": None}) == Unfinishable(dropped={PartitionKey("y", 0)})
