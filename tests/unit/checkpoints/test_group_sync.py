"""The pure rule of group offset sync: a group's offsets only move forward on the target.  Syncing real groups:
tests/integration/test_checkpoints.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from airmirror.checkpoints.group_sync import forward_offsets
from airmirror.model import PartitionKey, StoredCheckpoint

WRITTEN = StoredCheckpoint(
    group="app",
    topic="orders",
    partition=0,
    remote_topic="a.orders",
    upstream_offset=100,
    downstream_offset=90,
    metadata="",
    emitted_at=datetime(2026, 11, 23, tzinfo=UTC),
)


def test_group_offsets_only_move_forward_on_the_target() -> None:
    behind = replace(WRITTEN, partition=0, downstream_offset=90)
    level = replace(WRITTEN, partition=1, downstream_offset=90)
    ahead = replace(WRITTEN, partition=2, downstream_offset=90)
    unseen = replace(WRITTEN, partition=3, downstream_offset=90)
    target = {PartitionKey("a.orders", 0): 80, PartitionKey("a.orders", 1): 90, PartitionKey("a.orders", 2): 95}
    assert forward_offsets([behind, level, ahead, unseen], target) == [behind, unseen]


def test_target_offsets_are_looked_up_by_the_remote_topic() -> None:
    assert forward_offsets([WRITTEN], {PartitionKey("orders", 0): 95}) == [WRITTEN]
