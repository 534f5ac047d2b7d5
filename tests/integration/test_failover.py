"""Failover and failback with real consumer groups: after replicate, checkpoint and group offset sync, the same
group on the other cluster reads exactly the records it had not consumed - no duplicate, no gap, checked by
record identity (every record's value is unique)."""

from __future__ import annotations

import pytest

from airmirror.mm2.wire_formats import Checkpoint
from airmirror.model import GroupSyncOutcome
from tests.conftest import write_config
from tests.kafka_helpers import Record, create_topic, produce, read_partition
from tests.mirror_helpers import (
    checkpoint,
    compacted_topic_with_holes,
    consume_and_commit,
    consume_rest,
    produce_transactions,
    replicate,
    unique_records,
)

pytestmark = pytest.mark.integration


def unconsumed(bootstrap: str, topic: str, partition: int, consumed: list[Record]) -> list[bytes | None]:
    """Values of the partition's records after the last consumed one (read now, read_committed)."""
    values = [r.value for _, r in read_partition(bootstrap, topic, partition)]
    if consumed:
        values = values[values.index(consumed[-1].value) + 1 :]
    return values


def test_failover_resumes_exactly_where_the_group_stopped(clusters, spark, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    plain, compacted, transactional = f"{prefix}.plain", f"{prefix}.compacted", f"{prefix}.tx"
    group = f"{prefix}-app"
    create_topic(a, plain, 2)
    create_topic(a, transactional)
    produce(a, plain, 0, unique_records("plain0-a", 40))
    produce(a, plain, 1, unique_records("plain1", 25))
    produce_transactions(
        a, transactional, f"{prefix}-tx", [("tx-a", 10, False), ("tx-aborted-a", 5, True), ("tx-b", 10, False)]
    )
    survivors = compacted_topic_with_holes(a, compacted, unique_records("compacted", 60, duplicate_key_every=4))
    config = write_config(
        tmp_path / "mm2.properties",
        clusters,
        f"a->b.enabled = true\ntopics = {prefix}.*\nsync.group.offsets.enabled = true",
    )
    replicate(config, spark, max_records=7)  # a first partial batch: runs and commit markers split the target
    produce(a, plain, 0, unique_records("plain0-b", 15))
    produce_transactions(a, transactional, f"{prefix}-tx", [("tx-aborted-b", 3, True), ("tx-c", 8, False)])
    offsets = [offset for offset, _ in survivors]
    before_hole = next(i for i in range(len(offsets) - 1) if offsets[i + 1] != offsets[i] + 1)
    consumed = {
        (plain, 0): consume_and_commit(a, group, plain, 0, 23),
        (plain, 1): consume_and_commit(a, group, plain, 1, 25),  # everything: resumes at the end
        (compacted, 0): consume_and_commit(a, group, compacted, 0, before_hole + 1),  # commits a compacted hole
        (transactional, 0): consume_and_commit(a, group, transactional, 0, 10),  # commits a commit marker
    }

    replicate(config, spark)
    report = checkpoint(config)

    [synced] = report.groups
    assert synced.group == group and synced.sync.outcome is GroupSyncOutcome.SYNCED and not synced.not_yet
    read = consume_rest(b, group, [f"a.{plain}", f"a.{compacted}", f"a.{transactional}"])
    for (topic, partition), records in consumed.items():
        got = [r.value for r in read[(f"a.{topic}", partition)]]
        assert got == unconsumed(a, topic, partition, records), f"{topic}-{partition}"
    assert len(read[(f"a.{plain}", 0)]) == 32 and read[(f"a.{plain}", 1)] == []
    assert not any(b"aborted" in (r.value or b"") for r in read[(f"a.{transactional}", 0)])


def test_failback_checkpoints_name_the_original_topic(clusters, spark, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    orders, group = f"{prefix}.orders", f"{prefix}-shipping"
    create_topic(b, orders)
    produce_transactions(b, orders, f"{prefix}-orders", [("o1", 12, False), ("o-aborted", 4, True), ("o2", 9, False)])
    config = write_config(
        tmp_path / "mm2.properties",
        clusters,
        f"a->b.enabled = true\nb->a.enabled = true\ntopics = {prefix}.*, b\\.{prefix}.*\n"
        "sync.group.offsets.enabled = true\n"
        "heartbeats.replication.enabled = false",  # other tests' heartbeats on the shared b stay there
    )
    replicate(config, spark, "b->a", max_records=8)
    replicate(config, spark, "b->a")  # b.orders on a: two copies, so two runs with a commit marker between
    consumed = consume_and_commit(a, group, f"b.{orders}", 0, 15)  # the group failed over to a and works there

    report = checkpoint(config, "a->b")  # fail back: a->b checkpoints use the b->a runs backwards

    [back] = report.groups
    [written] = back.written
    assert (written.topic, written.remote_topic, written.upstream_offset) == (f"b.{orders}", orders, 16)
    decoded = [Checkpoint.decode(r.key, r.value) for _, r in read_partition(b, "a.checkpoints.internal", 0)]
    assert [c.topic for c in decoded if c.group == group] == [orders]
    assert back.sync.outcome is GroupSyncOutcome.SYNCED
    read = consume_rest(b, group, [orders])
    assert [r.value for r in read[(orders, 0)]] == unconsumed(b, orders, 0, consumed)
