"""A flow DAG run (``dag.test()``) between two SASL_SSL clusters configured with MM2's own security keys only:
every task succeeds, the target equals the source record for record, heartbeats and checkpoints are written, the
group's offsets are synced, and no secret reaches an XCom."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from airmirror.devtools.local_kafka import LocalBroker
from airmirror.mm2.wire_formats import Checkpoint, Heartbeat
from tests.airflow.run_helpers import run_flow, task_states
from tests.secured_clusters import (
    PARTITIONS,
    SECRETS,
    commit_offsets,
    group_offsets,
    mm2_file,
    read_partition,
    secured_clusters,
    source_topic,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secured(test_home: Path) -> Iterator[dict[str, LocalBroker]]:
    with secured_clusters(test_home, ("secured-dag-a", "secured-dag-b")) as clusters:
        yield clusters


def test_a_dag_run_between_sasl_ssl_clusters(airflow_db, secured, prefix, tmp_path, dag_bag_for) -> None:
    source, target = secured["a"], secured["b"]
    topic, sent = source_topic(secured, prefix)
    group = f"{prefix}-billing"
    commit_offsets(source, group, {(topic, 0): 42, (topic, 1): 7})
    config = mm2_file(tmp_path, secured, prefix, extra="sync.group.offsets.enabled = true\nairmirror.task.retries = 0")

    run = run_flow(dag_bag_for, config)

    states = task_states(run)
    assert states.pop("verify") == "skipped" and set(states.values()) == {"success"}, states
    for partition, records in sent.items():
        assert read_partition(target, f"a.{topic}", partition) == records
    heartbeats = [Heartbeat.decode(r.key, r.value) for r in read_partition(target, "heartbeats", 0)]
    assert {(h.source_alias, h.target_alias) for h in heartbeats} == {("a", "b")}
    checkpoints = [Checkpoint.decode(r.key, r.value) for r in read_partition(target, "a.checkpoints.internal", 0)]
    synced = group_offsets(target, group, f"a.{topic}", PARTITIONS)
    assert {(c.partition, c.downstream_offset) for c in checkpoints if c.group == group} == set(synced.items())
    assert set(synced) == set(range(PARTITIONS))
    xcoms = json.dumps([ti.xcom_pull(task_ids=ti.task_id) for ti in run.get_task_instances()], default=str)
    assert not any(secret in xcoms for secret in SECRETS)
