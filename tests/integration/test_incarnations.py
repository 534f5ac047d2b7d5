"""Topics deleted and recreated under a running flow, on real clusters: the source (default reset policy and
``fail``), and the target (stopped, nothing translated through old runs, re-seeded by ``airmirror reset``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from airmirror.checkpoints.translate_view import inspect_group
from airmirror.errors import ReplicationFailure
from airmirror.model import PartitionKey
from airmirror.replication.options import BatchOptions
from airmirror.replication.pipeline import plan_batch, sync_flow_topics
from tests.conftest import write_config
from tests.kafka_helpers import create_topic, delete_topic_and_wait, produce, read_partition, records_of, recreate_topic
from tests.mirror_helpers import commit_offsets, opened, replicate, unique_records

pytestmark = pytest.mark.integration


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "airmirror.cli", *args], capture_output=True, text=True, timeout=600)


def flow_config(clusters, tmp_path: Path, prefix: str, extra: str = "") -> Path:
    return write_config(
        tmp_path / "mm2.properties",
        clusters,
        f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.spark.master = local[1]\n{extra}",
    )


def test_recreated_source_topic_is_copied_from_its_start_and_translated_exactly(clusters, spark, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.orders"
    create_topic(a, topic)
    produce(a, topic, 0, unique_records("old", 5000))
    config = flow_config(clusters, tmp_path, prefix)
    assert replicate(config, spark).summary.records == 5000

    recreate_topic(a, topic)
    first = unique_records("new1", 3000)
    produce(a, topic, 0, first)
    assert replicate(config, spark).summary.records == 3000
    second = unique_records("new2", 3000)
    produce(a, topic, 0, second)
    assert replicate(config, spark).summary.records == 3000

    target = records_of(b, f"a.{topic}", 0)
    assert len(target) == 11_000
    assert target[5000:] == records_of(a, topic, 0) == first + second
    with opened(config) as (flow, store):
        resets = store.source_resets(flow.name)
        assert [(r.topic, r.partition, r.old_cursor, r.new_start) for r in resets] == [(topic, 0, 5000, 0)]
        assert resets[0].old_topic_id != resets[0].new_topic_id
        assert store.offset_runs(flow.name, PartitionKey(topic, 0))[0].upstream_start == 0
        commit_offsets(a, f"{prefix}-group", {(topic, 0): 4500})
        position = inspect_group(flow, store, f"{prefix}-group").partitions[0]
    by_offset = dict(read_partition(b, f"a.{topic}", 0))
    assert by_offset[position.target_offset] == (first + second)[4500]
    assert by_offset[position.target_offset - 1] == (first + second)[4499]
    status = cli("status", str(config), "--flow", "a->b", "--json")
    assert status.returncode == 0, status.stderr
    assert '"source_resets"' in status.stdout and topic in status.stdout


def test_fail_policy_stops_only_the_recreated_partition(clusters, spark, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    recreated, steady = f"{prefix}.recreated", f"{prefix}.steady"
    for topic in (recreated, steady):
        create_topic(a, topic)
        produce(a, topic, 0, unique_records(f"{topic}-1", 100))
    config = flow_config(clusters, tmp_path, prefix, "airmirror.source.reset.policy = fail")
    assert replicate(config, spark).summary.records == 200

    recreate_topic(a, recreated)
    produce(a, recreated, 0, unique_records("again", 50))
    produce(a, steady, 0, unique_records(f"{steady}-2", 70))
    run = cli("replicate", str(config), "--flow", "a->b")
    assert run.returncode == 1
    for expected in (
        f"{recreated}-0",
        "was recreated (topic id",
        "cursor 100",
        f"airmirror reset {config} --flow a->b --topic {recreated}",
    ):
        assert expected in run.stderr
    assert records_of(b, f"a.{steady}", 0) == records_of(a, steady, 0)
    assert len(records_of(b, f"a.{recreated}", 0)) == 100

    reset = cli("reset", str(config), "--flow", "a->b", "--topic", recreated)
    assert reset.returncode == 0, reset.stderr
    again = cli("replicate", str(config), "--flow", "a->b")
    assert again.returncode == 0, again.stderr
    assert records_of(b, f"a.{recreated}", 0)[100:] == records_of(a, recreated, 0)


def test_deleted_target_topic_stops_the_topic_until_reset(clusters, spark, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic, other = f"{prefix}.orders", f"{prefix}.other"
    for name in (topic, other):
        create_topic(a, name)
        produce(a, name, 0, unique_records(f"{name}-1", 200))
    config = flow_config(clusters, tmp_path, prefix)
    assert replicate(config, spark).summary.records == 400

    target_admin = AdminClient({"bootstrap.servers": b})
    target_admin.delete_topics([f"a.{topic}"], operation_timeout=30)[f"a.{topic}"].result()
    delete_topic_and_wait(target_admin, f"a.{topic}")
    produce(a, topic, 0, unique_records(f"{topic}-2", 30))
    produce(a, other, 0, unique_records(f"{other}-2", 30))
    with pytest.raises(ReplicationFailure, match=rf"remote topic a\.{topic} on cluster b was deleted.*airmirror reset"):
        replicate(config, spark)
    assert f"a.{topic}" not in target_admin.list_topics(timeout=10).topics
    assert records_of(b, f"a.{other}", 0) == records_of(a, other, 0)
    with opened(config) as (flow, store):
        assert store.offset_runs(flow.name, PartitionKey(topic, 0)) == []
        assert [stop.topic for stop in store.stops(flow.name)] == [topic]
    status = cli("status", str(config), "--flow", "a->b")
    assert f"remote topic a.{topic} on cluster b was deleted" in status.stdout

    bad = cli("reset", str(config), "--flow", "a->b", "--topic", "nope")
    assert bad.returncode == 2 and "--topic" in bad.stderr and "nope" in bad.stderr
    reset = cli("reset", str(config), "--flow", "a->b", "--topic", topic)
    assert reset.returncode == 0, reset.stderr
    assert replicate(config, spark).summary.records == 230
    assert records_of(b, f"a.{topic}", 0) == records_of(a, topic, 0)
    with opened(config) as (flow, store):
        assert store.stops(flow.name) == []
        assert store.offset_runs(flow.name, PartitionKey(topic, 0))[0].downstream_start == 0


def test_resumed_batch_drops_a_deleted_topic_and_applies_a_new_cap(clusters, spark, prefix, tmp_path):
    """A planned batch that can no longer finish as planned never blocks the flow."""
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    gone, kept = f"{prefix}.gone", f"{prefix}.kept"
    for topic in (gone, kept):
        create_topic(a, topic)
        produce(a, topic, 0, unique_records(topic, 1000))
    config = flow_config(clusters, tmp_path, prefix)
    with opened(config) as (flow, store):
        options = BatchOptions()
        planned = plan_batch(flow, store, sync_flow_topics(flow, store, options).mappings, options)
        assert sorted(r.topic for r in planned.ranges) == [gone, kept]
    admin = AdminClient({"bootstrap.servers": a})
    admin.delete_topics([gone], operation_timeout=30)[gone].result()
    delete_topic_and_wait(admin, gone)

    resumed = replicate(config, spark, max_records=300)
    assert resumed.planned.batch_id == planned.batch_id
    assert [(r.topic, r.start, r.end) for r in resumed.planned.ranges] == [(kept, 0, 300)]
    assert resumed.summary.records == 300
    assert replicate(config, spark).summary.records == 700
    assert records_of(b, f"a.{kept}", 0) == records_of(a, kept, 0)
