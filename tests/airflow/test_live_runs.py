"""Live flow DAG runs (``airmirror.live = true``) with ``dag.test()`` against real local Kafka and real Spark.

A live run's ``replicate`` copies batches back to back for the length of its data interval (the schedule,
here 10 s), while ``emit_heartbeats`` and ``emit_checkpoints`` emit at their own intervals for as long.
``dag.test()`` runs the tasks one after another in this process, so each task's window is checked against
its own start and end; a deployment's executor runs them side by side.
"""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path

import pytest

from airmirror.cli import main
from airmirror.mm2.wire_formats import Checkpoint
from tests.conftest import write_config
from tests.kafka_helpers import SteadyProducer, create_topic, produce, read_partition, records_of, sample_records
from tests.mirror_helpers import commit_offsets, group_offsets_on

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 2
WINDOW_S = 10


def live_config(path: Path, clusters, prefix: str, extra: str = "") -> Path:
    return write_config(
        path,
        clusters,
        "\n".join(
            [
                "a->b.enabled = true",
                f"topics = {prefix}.*",
                "airmirror.live = true",
                f"airmirror.schedule = {WINDOW_S}s",
                "airmirror.task.retries = 0",
                "emit.heartbeats.interval.seconds = 1",
                "emit.checkpoints.interval.seconds = 2",
                "sync.group.offsets.enabled = true",
                extra,
            ]
        ),
    )


def live_run(dag_bag_for, config: Path):
    bag = dag_bag_for(config)
    assert bag.import_errors == {}
    return bag.dags["airmirror__a__b"].test()


def task_instances(run) -> dict:
    return {ti.task_id: ti for ti in run.get_task_instances()}


class AdvancingGroup(threading.Thread):
    """A consumer group that commits one offset further on every partition each second (up to 20, offsets the
    test copied before the live run), so each checkpoint emission has something new to write."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.halt = threading.Event()

    def run(self) -> None:
        offset = 1
        while not self.halt.wait(0 if offset == 1 else 1.0) and offset <= 20:
            commit_offsets(self.bootstrap, self.group, {(self.topic, p): offset for p in range(PARTITIONS)})
            offset += 1

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=60)


def stamped_within(bootstrap: str, topic: str, start: datetime, end: datetime) -> list[int]:
    """Timestamps (ms) of the records of ``topic`` partition 0 written between ``start`` and ``end``."""
    low, high = start.timestamp() * 1000, end.timestamp() * 1000
    return [record.timestamp for _, record in read_partition(bootstrap, topic, 0) if low <= record.timestamp <= high]


def test_a_live_run_copies_records_produced_during_it_and_emits_at_its_intervals(
    airflow_db, clusters, prefix, tmp_path, dag_bag_for
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic, group = f"{prefix}.pulse", f"{prefix}-readers"
    create_topic(a, topic, PARTITIONS)
    for p in range(PARTITIONS):
        produce(a, topic, p, sample_records(20, f"before{p}"))
    config = live_config(tmp_path / "mm2.properties", clusters, prefix)
    assert main(["replicate", str(config), "--flow", "a->b"]) == 0
    producer = SteadyProducer(a, topic, PARTITIONS, burst=10, pause=0.1)
    reader = AdvancingGroup(a, group, topic)
    producer.start()
    reader.start()
    try:
        run = live_run(dag_bag_for, config)
    finally:
        producer.stop()
        reader.stop()

    tis = task_instances(run)
    assert {ti.state for ti in tis.values()} == {"success"}
    replicate = tis["replicate"]
    copied = replicate.xcom_pull(task_ids="replicate")
    assert copied["batches"] >= 1 and copied["records"] > 0
    produced_while_live = [
        r for p in range(PARTITIONS) for r in records_of(b, f"a.{topic}", p) if r.timestamp >= replicate.start_date.timestamp() * 1000
    ]
    assert produced_while_live, "the live run copied nothing produced during its window"

    heartbeats = stamped_within(b, "heartbeats", tis["emit_heartbeats"].start_date, tis["emit_heartbeats"].end_date)
    assert len(heartbeats) >= 3, heartbeats
    window = tis["emit_checkpoints"]
    checkpoint_times = stamped_within(b, "a.checkpoints.internal", window.start_date, window.end_date)
    assert len(set(checkpoint_times)) >= 2, checkpoint_times
    groups = {Checkpoint.decode(r.key, r.value).group for _, r in read_partition(b, "a.checkpoints.internal", 0)}
    assert groups == {group}
    assert group_offsets_on(b, group), "group offsets were not synced during the live run"

    assert main(["replicate", str(config), "--flow", "a->b"]) == 0
    for p in range(PARTITIONS):
        assert records_of(b, f"a.{topic}", p) == records_of(a, topic, p)


def test_a_failing_live_replicate_does_not_stop_heartbeats_or_checkpoints(
    airflow_db, clusters, prefix, tmp_path, dag_bag_for
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    create_topic(a, f"{prefix}.doomed")
    produce(a, f"{prefix}.doomed", 0, sample_records(5))
    config = live_config(tmp_path / "mm2.properties", clusters, prefix, "airmirror.spark.conn.id = no_such_connection")

    run = live_run(dag_bag_for, config)

    tis = task_instances(run)
    assert tis["replicate"].state == "failed"
    assert tis["emit_heartbeats"].state == "success" and tis["emit_checkpoints"].state == "success"
    heartbeats = stamped_within(b, "heartbeats", tis["emit_heartbeats"].start_date, tis["emit_heartbeats"].end_date)
    assert len(heartbeats) >= 3, heartbeats
