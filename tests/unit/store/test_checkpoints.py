"""Checkpoints and group offset syncs in the metadata store (:mod:`airmirror.store.checkpoints`) on SQLite: the
newest value per key is kept, with the time it was emitted or observed."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from airmirror.model import GroupSyncOutcome, GroupSyncRecord, StoredCheckpoint
from airmirror.store import MetadataStore

FLOW = "a->b"
AT = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
CHECKPOINT = StoredCheckpoint(
    group="app",
    topic="orders",
    partition=0,
    remote_topic="a.orders",
    upstream_offset=100,
    downstream_offset=90,
    metadata="",
    emitted_at=AT,
)


def test_the_newest_checkpoint_of_each_group_partition_is_kept(store: MetadataStore) -> None:
    other_partition = replace(CHECKPOINT, partition=1)
    other_group = replace(CHECKPOINT, group="billing", upstream_offset=7, downstream_offset=6)
    store.save_checkpoints(FLOW, [CHECKPOINT, other_partition, other_group])
    newer = replace(CHECKPOINT, upstream_offset=150, downstream_offset=141, emitted_at=AT + timedelta(minutes=1))

    store.save_checkpoints(FLOW, [newer])

    assert store.checkpoints(FLOW) == [newer, other_partition, other_group]
    assert store.checkpoints(FLOW, "billing") == [other_group]
    assert store.checkpoints("a->c") == []


def test_the_newest_group_sync_outcome_of_each_group_is_kept(store: MetadataStore) -> None:
    synced = GroupSyncRecord(
        group="app",
        outcome=GroupSyncOutcome.SYNCED,
        target_state="Empty",
        offsets_committed=3,
        detail="",
        synced_at=AT,
    )
    skipped = replace(synced, outcome=GroupSyncOutcome.SKIPPED_ACTIVE, offsets_committed=0, synced_at=AT + timedelta(1))
    store.record_group_sync(FLOW, synced)
    store.record_group_sync(FLOW, replace(synced, group="billing"))

    store.record_group_sync(FLOW, skipped)

    assert store.group_syncs(FLOW) == [skipped, replace(synced, group="billing")]
    assert store.group_syncs(FLOW, "app") == [skipped]
