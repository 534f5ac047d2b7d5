"""Retention of the metadata store's history (:mod:`airmirror.store.retention`) on SQLite: a batch is deleted only
when nothing needs it (every table that names a batch is one retention knows), its runs outlive it, and each
partition is claimed for pruning once per interval.  Runs pruned below the log starts and folded runs:
tests/integration/test_metadata_store.py."""

from __future__ import annotations

from datetime import timedelta

from airmirror.model import BatchState, OffsetRun, PartitionKey, PlannedRange, RangeResult
from airmirror.store import MetadataStore
from airmirror.store.retention import KEEPERS, Pruned
from airmirror.store.rows import utcnow
from airmirror.store.schema import batch_ranges, batches, metadata, offset_syncs

FLOW = "a->b"
TOPIC = "orders"
HOUR = timedelta(hours=1)


def key(partition: int) -> PartitionKey:
    return PartitionKey(TOPIC, partition)


def commit(store: MetadataStore, start: int, end: int) -> int:
    """Commit a batch copying ``[start, end)`` of partition 0, one record a downstream offset further each batch
    (a commit marker between them)."""
    plan = PlannedRange(topic=TOPIC, partition=0, start=start, end=end, remote_topic=f"a.{TOPIC}")
    batch_id = store.begin_batch(FLOW, [plan], {})
    run = OffsetRun(start, end, start + batch_id)
    result = RangeResult(
        topic=TOPIC, partition=0, start=start, end=end, records=end - start, bytes=end - start, runs=(run,)
    )
    store.commit_batch(batch_id, [result])
    return batch_id


def test_every_reference_to_a_batch_keeps_it_or_is_let_go_by_retention() -> None:
    referencing = {
        fk.parent.table.name
        for table in metadata.tables.values()
        for fk in table.foreign_keys
        if fk.column.table is batches
    }
    let_go = {batch_ranges.name, offset_syncs.name}  # deleted with the batch / batch_id set to NULL
    assert referencing == {table.name for table in KEEPERS} | let_go
    assert offset_syncs.c.batch_id.nullable


def test_pruning_deletes_only_finished_batches_nothing_needs_and_keeps_their_runs(store: MetadataStore) -> None:
    first, middle, last = commit(store, 0, 10), commit(store, 10, 20), commit(store, 20, 30)
    running = store.begin_batch(FLOW, [], {})
    runs = store.offset_runs(FLOW, key(0))
    stats = store.partition_stats(FLOW)

    pruned = store.prune_history(FLOW, utcnow() + HOUR)

    assert pruned == Pruned(batches=1)  # the first committed batch and the cursor's are still needed
    assert [b.id for b in store.batches(FLOW)] == [running, last, first]
    assert store.batches(FLOW)[0].state is BatchState.RUNNING
    assert middle not in [b.id for b in store.batches(FLOW)]
    assert store.offset_runs(FLOW, key(0)) == runs
    assert store.partition_stats(FLOW) == stats


def test_nothing_newer_than_the_retention_moment_is_pruned(store: MetadataStore) -> None:
    for start in (0, 10, 20):
        commit(store, start, start + 10)

    assert store.prune_history(FLOW, utcnow() - HOUR) == Pruned()
    assert len(store.batches(FLOW)) == 3


def test_each_partition_is_claimed_for_pruning_once_per_interval(store: MetadataStore) -> None:
    assert store.claim_prunes(FLOW, [key(1), key(0), key(1)], HOUR) == [key(0), key(1)]

    assert store.claim_prunes(FLOW, [key(0), key(1)], HOUR) == []
    assert store.claim_prunes(FLOW, [key(1), key(2)], HOUR) == [key(2)]
    assert store.claim_prunes("a->c", [key(0)], HOUR) == [key(0)]
    assert store.claim_prunes(FLOW, [key(0)], timedelta(0)) == [key(0)]
