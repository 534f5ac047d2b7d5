"""``airmirror.client`` in a fresh venv with confluent-kafka alone (no PySpark, Airflow, SQLAlchemy or pandas),
against a real cluster: it translates the checkpoints there as MM2's own Java client does, finds the heartbeats
topics, the upstream clusters and their hops, and the example of ``docs/failover.md`` runs as it is written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from airmirror.mm2.wire_formats import Checkpoint
from tests.kafka_helpers import create_topic
from tests.mirror_helpers import group_offsets_on
from tests.packaging.venvs import REPO, new_venv, run

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PROBE = Path(__file__).with_name("failover_client_probe.py")
DOCS_EXAMPLE = re.compile(r"```python\n(.*?)```", re.DOTALL)
DEMO_TARGET, DEMO_GROUP = "127.0.0.1:29192", "orders-reader"


def checkpoints_topic_on(bootstrap: str, topic: str) -> None:
    """Create ``topic`` unless an earlier test's flow into the cluster did."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic not in admin.list_topics(timeout=30).topics:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()


def test_the_failover_client_runs_with_confluent_kafka_alone_and_agrees_with_mm2s_java_client(
    clusters, prefix: str, tmp_path: Path, java_translate_offsets
):
    b = clusters["b"].bootstrap
    group, near, far = f"{prefix}-billing", f"{prefix}near", f"{prefix}far"
    orders, heartbeats = f"a.{prefix}.orders", [f"{near}.heartbeats", f"{near}.{far}.heartbeats"]
    checkpoints_topic_on(b, "a.checkpoints.internal")
    create_topic(b, orders, 2)
    for topic in heartbeats:
        create_topic(b, topic)
    producer = Producer({"bootstrap.servers": b})
    for checkpoint in (
        Checkpoint(group, orders, 0, 10, 11, "first"),
        Checkpoint(group, orders, 1, 5, 5, ""),
        Checkpoint(f"{group}-other", orders, 0, 99, 99, "not ours"),
        Checkpoint(group, orders, 0, 20, 22, "newest"),  # the newest of a partition wins
    ):
        producer.produce("a.checkpoints.internal", checkpoint.value(), checkpoint.key(), partition=0)
    assert producer.flush(30) == 0
    venv = new_venv(tmp_path / "venv", "confluent-kafka", cwd=tmp_path)
    alone = {"cwd": tmp_path, "PYTHONPATH": str(REPO / "include")}

    try:
        probe = run(venv, str(venv / "bin" / "python"), str(PROBE), b, "a", group, near, far, **alone)
        assert probe.returncode == 0, probe.stdout + probe.stderr
        seen = json.loads(probe.stdout)
        assert seen["importable"] == [] and seen["loaded"] == []
        assert seen["offsets"] == [[orders, 0, 22, "newest"], [orders, 1, 5, ""]]
        assert {(t, p): (o, m) for t, p, o, m in seen["offsets"]} == java_translate_offsets(b, "a", group)
        assert set(heartbeats) <= set(seen["heartbeat_topics"])
        assert "a.checkpoints.internal" in seen["checkpoint_topics"]
        assert {near, far} <= set(seen["upstream_clusters"]) and seen["hops"] == [1, 2, -1]
        assert probe.stderr == ""

        [example] = DOCS_EXAMPLE.findall((REPO / "docs" / "failover.md").read_text())
        script = example.replace(DEMO_TARGET, b).replace(DEMO_GROUP, group)
        ran = run(venv, str(venv / "bin" / "python"), "-c", script, **alone)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert f"{orders}-0 resumes at 22\n{orders}-1 resumes at 5\ncommitted 2 offsets on b\n" in ran.stdout
        assert group_offsets_on(b, group) == {(orders, 0): 22, (orders, 1): 5}
    finally:
        admin = AdminClient({"bootstrap.servers": b})
        for future in admin.delete_topics([orders, *heartbeats], operation_timeout=30).values():
            future.result()
