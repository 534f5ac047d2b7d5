"""Where a copy attempt starts a range, from the newest committed progress of its partition (task_writer rule 4)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from airmirror.errors import ReplicationFailure
from airmirror.kafka.authorization import AccessScope
from airmirror.replication.spark.batch_log import Progress
from airmirror.replication.spark.task_buffer import TaskBuffer
from airmirror.replication.spark.task_writer import CopyTask, RangeTask, TransactionBounds, resume_from

RANGE = RangeTask(
    topic="orders",
    partition=0,
    start=100,
    end=900,
    remote_topic="a.orders",
    source_topic_id="src1",
    remote_topic_id="dst1",
    resets=False,
    start_epoch=None,
    known=None,
)
TASK = CopyTask(
    flow="a->b",
    batch_id=7,
    transactional_ids=("airmirror-a-b-~copy0", "airmirror-a-b-~copy0~1"),
    anchor_group="airmirror-eos-a-b",
    log_topic="airmirror-batches.a.internal",
    log_end=0,
    scan_from=0,
    job="7-a",
    bounds=TransactionBounds(1000, 1 << 20, 5.0),
    ranges=(RANGE,),
    source_access=AccessScope("a", "User:mirror", ()),
    target_access=AccessScope("b", "User:mirror", ()),
    buffer=TaskBuffer(),
    producer_config={"sasl.password": "hunter2"},
    target_consumer_config={},
    target_admin_config={},
    source_consumer_config={},
)
DONE_BEFORE = Progress(
    batch_id=6,
    chunk=3,
    start=0,
    end=100,
    position=100,
    done=True,
    records=100,
    bytes=10_000,
    downstream_start=0,
    downstream_position=104,
    first_runs_offset=9,
    source_topic_id="src1",
    remote_topic_id="dst1",
)


def test_fresh_range_continues_the_previous_batch_downstream():
    start = resume_from(7, RANGE, DONE_BEFORE)
    assert (start.batch_id, start.chunk, start.position, start.done, start.downstream_position) == (
        7,
        -1,
        100,
        False,
        104,
    )
    assert resume_from(7, RANGE, None).downstream_position == 0


def test_progress_of_the_same_batch_is_resumed_as_it_is():
    partial = replace(DONE_BEFORE, batch_id=7, chunk=1, start=100, end=900, position=400, done=False)
    assert resume_from(7, RANGE, partial) is partial


def test_target_ahead_of_the_db_refuses_to_write():
    ahead = replace(DONE_BEFORE, position=150)
    with pytest.raises(ReplicationFailure, match="beyond the metadata DB cursor 100"):
        resume_from(7, RANGE, ahead)


def test_a_reset_range_or_another_incarnation_starts_afresh():
    ahead = replace(DONE_BEFORE, position=5000)
    assert resume_from(7, replace(RANGE, resets=True), ahead).position == 100
    assert resume_from(7, RANGE, replace(ahead, source_topic_id="src0")).position == 100
    other_target = resume_from(7, RANGE, replace(ahead, remote_topic_id="dst0"))
    assert (other_target.position, other_target.downstream_position) == (100, 0)
    same_batch_old_target = replace(DONE_BEFORE, batch_id=7, position=400, remote_topic_id="dst0")
    assert resume_from(7, RANGE, same_batch_old_target).position == 100


def test_task_repr_holds_no_client_settings():
    assert "hunter2" not in repr(TASK)
