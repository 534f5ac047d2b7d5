"""Checkpoints and group offset sync on real clusters: MM2 bytes, monotonicity and rewinds, "not yet", empty,
emptied and added partitions, group filters, active target groups skipped visibly."""

from __future__ import annotations

import json
import logging
import struct
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, ResourceType

from airmirror.mm2.wire_formats import Checkpoint
from airmirror.model import GroupSyncOutcome, PartitionKey
from tests.cli_helpers import airmirror_process
from tests.conftest import write_config
from tests.kafka_helpers import create_topic, produce, read_partition
from tests.mirror_helpers import (
    checkpoint,
    commit_offsets,
    group_consumer,
    group_offsets_on,
    kafka_string,
    opened,
    replicate,
    unique_records,
)

pytestmark = pytest.mark.integration

CHECKPOINTS = "a.checkpoints.internal"


def config_for(tmp_path: Path, clusters, prefix: str, extra: str = "", name: str = "mm2.properties") -> Path:
    return write_config(tmp_path / name, clusters, f"a->b.enabled = true\ntopics = {prefix}.*\n{extra}")


airmirror = airmirror_process


def checkpoints_of(bootstrap: str, group: str) -> list[Checkpoint]:
    """Every checkpoint record of ``group`` in the checkpoints topic, oldest first."""
    records = [Checkpoint.decode(r.key, r.value) for _, r in read_partition(bootstrap, CHECKPOINTS, 0)]
    return [c for c in records if c.group == group]


def test_checkpoint_bytes_equal_hand_built_mm2_vectors(clusters, spark, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic, group = f"{prefix}.orders", f"{prefix}-billing"
    create_topic(a, topic)
    produce(a, topic, 0, unique_records("o", 30))
    commit_offsets(a, group, {(topic, 0): 12}, "meta-1")
    config = config_for(tmp_path, clusters, prefix)
    replicate(config, spark)
    started = datetime.now(UTC)

    assert checkpoint(config).written == 1

    key = kafka_string(group) + kafka_string(f"a.{topic}") + struct.pack(">i", 0)
    value = struct.pack(">hqq", 0, 12, 12) + kafka_string("meta-1")
    written = [(r.key, r.value) for _, r in read_partition(b, CHECKPOINTS, 0) if r.key == key]
    assert written == [(key, value)]
    with opened(config) as (flow, store):
        [stored] = store.checkpoints(flow.name, group)
    assert (stored.remote_topic, stored.upstream_offset, stored.downstream_offset, stored.metadata) == (
        f"a.{topic}",
        12,
        12,
        "meta-1",
    )
    assert started <= stored.emitted_at <= datetime.now(UTC)
    assert checkpoint(config).written == 0, "an unchanged position is not written again"
    admin = AdminClient({"bootstrap.servers": b})
    assert len(admin.list_topics(CHECKPOINTS, timeout=10).topics[CHECKPOINTS].partitions) == 1
    described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, CHECKPOINTS)])
    assert next(iter(described.values())).result()["cleanup.policy"].value == "compact"


def test_monotonic_unless_the_group_rewinds_and_never_past_replicated_data(clusters, spark, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic, group = f"{prefix}.events", f"{prefix}-reader"
    create_topic(a, topic)
    produce(a, topic, 0, unique_records("first", 30))
    config = config_for(tmp_path, clusters, prefix)
    replicate(config, spark)
    for committed in (20, 25, 25, 5):
        commit_offsets(a, group, {(topic, 0): committed})
        checkpoint(config)
    produce(a, topic, 0, unique_records("second", 10))
    commit_offsets(a, group, {(topic, 0): 35})

    report = checkpoint(config)
    assert report.written == 0 and report.groups[0].not_yet == [PartitionKey(topic, 0)]
    inspected = airmirror("translate", str(config), "--flow", "a->b", "--group", group, "--json")
    assert inspected.returncode == 0, inspected.stderr
    [row] = json.loads(inspected.stdout)["partitions"]
    assert (row["committed_offset"], row["target_offset"], row["not_replicated"]) == (35, None, 5)

    replicate(config, spark)
    checkpoint(config)
    # 30 records, the first copy's commit marker at 30, then records 30.. at 31..
    assert [(c.upstream_offset, c.downstream_offset) for c in checkpoints_of(b, group)] == [
        (20, 20),
        (25, 25),
        (5, 5),
        (35, 36),
    ]


def test_empty_emptied_and_added_partitions(clusters, spark, prefix, tmp_path):
    a = clusters["a"].bootstrap
    admin = AdminClient({"bootstrap.servers": a})
    topic, group = f"{prefix}.sparse", f"{prefix}-sparse"
    create_topic(a, topic, 3)
    produce(a, topic, 0, unique_records("p0", 10))
    produce(a, topic, 2, unique_records("p2", 4))
    for future in admin.delete_records([TopicPartition(topic, 2, 4)]).values():
        future.result()
    commit_offsets(a, group, {(topic, 0): 10, (topic, 1): 0, (topic, 2): 4})
    config = config_for(tmp_path, clusters, prefix)
    replicate(config, spark)

    checkpoint(config)
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result()
    produce(a, topic, 3, unique_records("p3", 3))
    commit_offsets(a, group, {(topic, 3): 2})
    later = checkpoint(config)
    assert later.groups[0].not_yet == [PartitionKey(topic, 3)]
    replicate(config, spark)
    checkpoint(config)

    with opened(config) as (flow, store):
        positions = {c.partition: (c.upstream_offset, c.downstream_offset) for c in store.checkpoints(flow.name, group)}
    # p1 is empty, p2 was emptied by retention before anything was copied: both resume at the target's start
    assert positions == {0: (10, 10), 1: (0, 0), 2: (4, 0), 3: (2, 2)}


def test_regex_group_filters_and_airmirror_groups_are_excluded(clusters, spark, prefix, tmp_path):
    a = clusters["a"].bootstrap
    topic = f"{prefix}.shared"
    create_topic(a, topic)
    produce(a, topic, 0, unique_records("s", 5))
    groups = [f"{prefix}-keep-1", f"{prefix}-keep-not-1", f"{prefix}-other", f"{prefix}-zzz"]
    for group in groups:
        commit_offsets(a, group, {(topic, 0): 3})
    filtered = config_for(
        tmp_path, clusters, prefix, f"groups = {prefix}-keep.*, {prefix}-other\ngroups.exclude = {prefix}-keep-not.*"
    )
    replicate(filtered, spark)  # also commits the flow's progress group airmirror-a-b on the source

    assert [g.group for g in checkpoint(filtered).groups] == [f"{prefix}-keep-1", f"{prefix}-other"]
    everything = config_for(tmp_path, clusters, prefix, name="defaults.properties")
    assert [g.group for g in checkpoint(everything).groups] == groups


def test_disabled_checkpoints_do_nothing_and_say_so(clusters, prefix, tmp_path):
    config = config_for(
        tmp_path, clusters, prefix, "emit.checkpoints.enabled = false\nsync.group.offsets.enabled = true"
    )
    result = airmirror("checkpoint", str(config), "--flow", "a->b")
    assert result.returncode == 0, result.stderr
    assert "emit.checkpoints.enabled is false" in result.stdout


def test_active_target_group_is_skipped_visibly_and_sync_only_moves_forward(clusters, spark, prefix, tmp_path, caplog):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic, group = f"{prefix}.jobs", f"{prefix}-workers"
    remote = f"a.{topic}"
    create_topic(a, topic)
    produce(a, topic, 0, unique_records("j", 20))
    commit_offsets(a, group, {(topic, 0): 8})
    config = config_for(tmp_path, clusters, prefix, "sync.group.offsets.enabled = true")
    replicate(config, spark)
    active = group_consumer(b, group)
    active.subscribe([remote])
    while not active.assignment():
        active.poll(0.5)
    try:
        with caplog.at_level(logging.WARNING, logger="airmirror.checkpoints.group_sync"):
            report = checkpoint(config)
        assert report.skipped_groups == [group]
        assert f"skipped for group '{group}'" in caplog.text
        assert group_offsets_on(b, group) == {}
        with opened(config) as (flow, store):
            [sync] = store.group_syncs(flow.name)
        assert (sync.group, sync.outcome, sync.target_state) == (group, GroupSyncOutcome.SKIPPED_ACTIVE, "STABLE")
        shown = f"WARNING group offset sync of '{group}': SKIPPED_ACTIVE"
        for verb in (["status"], ["translate", "--group", group]):
            result = airmirror(verb[0], str(config), "--flow", "a->b", *verb[1:])
            assert result.returncode == 0 and shown in result.stdout, result.stdout + result.stderr
    finally:
        active.close()

    assert checkpoint(config).groups[0].sync.outcome is GroupSyncOutcome.SYNCED
    assert group_offsets_on(b, group) == {(remote, 0): 8}
    commit_offsets(b, group, {(remote, 0): 15})  # the group moved on, on the target
    commit_offsets(a, group, {(topic, 0): 3})  # and rewinds on the source
    report = checkpoint(config)
    assert report.written == 1 and report.groups[0].sync.outcome is GroupSyncOutcome.UP_TO_DATE
    assert group_offsets_on(b, group) == {(remote, 0): 15}
