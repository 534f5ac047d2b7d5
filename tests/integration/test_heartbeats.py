"""Heartbeats on two clusters of their own: every flow out of a cluster copies its ``heartbeats`` topic (MM2's
rule), so these tests keep heartbeats away from the clusters the other tests share.

Checked: MM2 bytes in a compacted one-partition topic on the target, replication as ``{source}.heartbeats``
in both directions, the latency stored in the metadata DB and shown by ``status``, the CLI verb and
``emit.heartbeats.enabled``."""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from airmirror.devtools.local_kafka import LocalBroker, free_port, start_broker, stop_broker
from airmirror.heartbeats.heartbeat_emitter import emit_heartbeat
from tests.cli_helpers import airmirror_process
from tests.conftest import write_config
from tests.kafka_helpers import read_partition
from tests.mirror_helpers import kafka_string, opened, replicate

pytestmark = pytest.mark.integration

BROKERS = {"a": "heartbeats-a", "b": "heartbeats-b"}


@pytest.fixture(scope="module")
def isolated(test_home: Path) -> Iterator[dict[str, LocalBroker]]:
    """Clusters ``a`` and ``b`` used by this module only."""
    try:
        with ThreadPoolExecutor(len(BROKERS)) as pool:
            started = pool.map(lambda name: start_broker(name, free_port(), home=test_home), BROKERS.values())
            yield dict(zip(BROKERS, started, strict=True))
    finally:
        for name in BROKERS.values():
            stop_broker(name, home=test_home)


def config_for(tmp_path: Path, isolated: dict[str, LocalBroker], extra: str = "") -> Path:
    return write_config(tmp_path / "mm2.properties", isolated, f"a->b.enabled = true\nb->a.enabled = true\n{extra}")


def end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "airmirror-test-watermarks"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


airmirror = airmirror_process


def test_heartbeat_is_written_in_mm2_format_to_a_compacted_topic(isolated, tmp_path):
    b = isolated["b"].bootstrap
    with opened(config_for(tmp_path, isolated)) as (flow, store):
        report = emit_heartbeat(flow, store)
        emission = store.heartbeat_emission(flow.name)
    heartbeat = report.heartbeat
    assert heartbeat is not None and (heartbeat.source_alias, heartbeat.target_alias) == ("a", "b")
    _, record = read_partition(b, "heartbeats", 0)[-1]
    assert record.key == kafka_string("a") + kafka_string("b")
    assert record.value == struct.pack(">hq", 0, heartbeat.timestamp)
    assert record.timestamp == heartbeat.timestamp
    assert emission is not None and emission.topic == "heartbeats"
    assert emission.heartbeat_at == datetime.fromtimestamp(heartbeat.timestamp / 1000, UTC)
    admin = AdminClient({"bootstrap.servers": b})
    assert len(admin.list_topics("heartbeats", timeout=10).topics["heartbeats"].partitions) == 1
    described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "heartbeats")])
    assert next(iter(described.values())).result()["cleanup.policy"].value == "compact"


def test_replicated_heartbeats_measure_latency_both_ways(isolated, spark, tmp_path):
    a, b = isolated["a"].bootstrap, isolated["b"].bootstrap
    config = config_for(tmp_path, isolated)
    emitted = {}
    for name in ("a->b", "b->a"):
        with opened(config, name) as (flow, store):
            emitted[name] = emit_heartbeat(flow, store).heartbeat

    for name, copied_from, remote in (("a->b", a, "a.heartbeats"), ("b->a", b, "b.heartbeats")):
        report = replicate(config, spark, name)
        assert [m.remote_topic for m in report.topics.mappings] == [remote]
        target = b if copied_from == a else a
        assert [r for _, r in read_partition(target, remote, 0)] == [
            r for _, r in read_partition(copied_from, "heartbeats", 0)
        ]
        reverse = "b->a" if name == "a->b" else "a->b"
        with opened(config, name) as (flow, store):
            [latency] = store.heartbeat_latencies(flow.name)
        # a->b copies a's heartbeats, written there by the b->a flow, and the other way round
        assert (latency.source_alias, latency.target_alias) == tuple(reverse.split("->"))
        heartbeat_ms = emitted[reverse].timestamp
        assert latency.heartbeat_at == datetime.fromtimestamp(heartbeat_ms / 1000, UTC)
        assert latency.latency_ms == int(latency.observed_at.timestamp() * 1000) - heartbeat_ms
        assert 0 <= latency.latency_ms < 300_000

        with opened(config, name) as (flow, store):
            [sample] = [s for s in store.lag_samples(flow.name) if s.topic == "heartbeats"]
        assert sample.replication_latency_ms == latency.latency_ms and sample.lag_records == 0

    shown = airmirror("status", str(config), "--flow", "a->b")
    assert shown.returncode == 0, shown.stderr
    assert "heartbeat b->a: latency" in shown.stdout and "heartbeat emitted to heartbeats" in shown.stdout
    as_json = airmirror("status", str(config), "--flow", "b->a", "--json")
    [partition] = json.loads(as_json.stdout)["partitions"]
    assert partition["replication_latency_ms"] == latency.latency_ms and partition["record_age_ms"] is None


def test_cli_heartbeat_honours_emit_heartbeats_enabled(isolated, tmp_path):
    b = isolated["b"].bootstrap
    enabled = airmirror("heartbeat", str(config_for(tmp_path, isolated)), "--flow", "a->b")
    assert enabled.returncode == 0, enabled.stderr
    assert "written to heartbeats on b" in enabled.stdout
    written = end_offset(b, "heartbeats")
    disabled = config_for(tmp_path, isolated, "a->b.emit.heartbeats.enabled = false")
    result = airmirror("heartbeat", str(disabled), "--flow", "a->b")
    assert result.returncode == 0, result.stderr
    assert "emit.heartbeats.enabled is false, no heartbeat written" in result.stdout
    assert end_offset(b, "heartbeats") == written


def test_a_negative_interval_turns_emission_off_and_a_live_window_returns_at_once(isolated, tmp_path, capsys):
    """MM2 starts no heartbeat or checkpoint task for a negative ``emit.*.interval.seconds``: the verbs write
    nothing and name the key, and a live run's emission task returns at once instead of spinning."""
    from airmirror.cli import main
    from airmirror.dag_factory.tasks import emit

    b = isolated["b"].bootstrap
    with opened(config_for(tmp_path, isolated), "a->b") as (flow, store):
        emit_heartbeat(flow, store)
    written = end_offset(b, "heartbeats")
    off = "emit.heartbeats.interval.seconds = -1\nemit.checkpoints.interval.seconds = -5"
    config = str(config_for(tmp_path, isolated, off))
    assert main(["heartbeat", config, "--flow", "a->b"]) == 0
    assert (
        "emit.heartbeats.interval.seconds is -1 (negative: off, as in MM2), no heartbeat written"
        in capsys.readouterr().out
    )
    assert main(["checkpoint", config, "--flow", "a->b"]) == 0
    assert (
        "emit.checkpoints.interval.seconds is -5 (negative: off, as in MM2), no checkpoints" in capsys.readouterr().out
    )
    started = time.monotonic()
    assert [emit(config, "a->b", what, 60.0) for what in ("heartbeats", "checkpoints")] == [0, 0]
    assert time.monotonic() - started < 10
    assert end_offset(b, "heartbeats") == written
