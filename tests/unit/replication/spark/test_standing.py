"""Where a range stands (:mod:`airmirror.replication.spark.standing`): each rule, and the one lookup that finds
the progress it reads (:func:`airmirror.replication.spark.batch_log.look_up_progress`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from airmirror.replication.spark.batch_log import Progress, look_up_progress
from airmirror.replication.spark.standing import (
    Done,
    Incarnations,
    PartCopied,
    TargetAhead,
    Untouched,
    committed_by_batch,
    range_standing,
)

BATCH = 7
OURS = Incarnations("src-1", "remote-1")
FOUND = Progress(
    batch_id=BATCH,
    chunk=2,
    start=100,
    end=200,
    position=150,
    done=False,
    records=50,
    bytes=500,
    downstream_start=10,
    downstream_position=61,
    first_runs_offset=4,
    source_topic_id="src-1",
    remote_topic_id="remote-1",
)


@pytest.mark.proves("standing rule 1")
def test_rule_1_progress_of_another_incarnation_says_nothing_to_a_task_but_the_remote_s_position_carries_over():
    other_source = replace(FOUND, source_topic_id="src-0")
    assert range_standing(BATCH, other_source, start=100, incarnations=OURS) == Untouched(61)
    other_remote = replace(FOUND, remote_topic_id="remote-0")
    assert range_standing(BATCH, other_remote, start=100, incarnations=OURS) == Untouched(0)
    assert range_standing(BATCH, other_source, start=100) == PartCopied(other_source)  # the driver's view


@pytest.mark.proves("standing rule 2")
def test_rule_2_this_batch_s_progress_is_the_range_s():
    assert range_standing(BATCH, FOUND, start=100, incarnations=OURS) == PartCopied(FOUND)
    done = replace(FOUND, done=True, position=200)
    assert range_standing(BATCH, done, start=100, incarnations=OURS) == Done(done)
    assert committed_by_batch(PartCopied(FOUND)) and committed_by_batch(Done(done))


@pytest.mark.proves("standing rule 3")
def test_rule_3_an_earlier_batch_past_the_start_is_the_target_ahead_unless_the_range_starts_afresh():
    earlier = replace(FOUND, batch_id=BATCH - 1)
    assert range_standing(BATCH, earlier, start=100, incarnations=OURS) == TargetAhead(earlier)
    assert range_standing(BATCH, earlier, start=100, resets=True, incarnations=OURS) == Untouched(61)
    assert range_standing(BATCH, earlier, start=150, incarnations=OURS) == Untouched(61)
    assert not committed_by_batch(TargetAhead(earlier))


@pytest.mark.proves("standing rule 4")
def test_rule_4_nothing_found_is_untouched_at_the_remote_partition_s_start():
    assert range_standing(BATCH, None, start=100, incarnations=OURS) == Untouched(0)
    assert not committed_by_batch(Untouched(0))


def test_the_lookup_takes_anchors_then_what_the_driver_knows_else_a_scan_else_nothing():
    anchors = {("a.t", 0): FOUND, ("a.t", 1): None}
    scanned: list[list[tuple[str, int]]] = []

    def scan(missing: list[tuple[str, int]]) -> dict[tuple[str, int], Progress | None]:
        scanned.append(missing)
        return dict.fromkeys(missing, replace(FOUND, position=120))

    known = {("a.t", 0): None, ("a.t", 1): replace(FOUND, position=110)}
    assert look_up_progress(anchors, known=known, scan=scan) == {("a.t", 0): FOUND, ("a.t", 1): known[("a.t", 1)]}
    assert scanned == []
    assert look_up_progress(anchors, scan=scan) == {("a.t", 0): FOUND, ("a.t", 1): replace(FOUND, position=120)}
    assert scanned == [[("a.t", 1)]]
    assert look_up_progress(anchors) == anchors
