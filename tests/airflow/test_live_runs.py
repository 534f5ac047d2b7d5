"""Live flow DAG runs (``airmirror.live = true``) with ``dag.test()`` against real local Kafka and real Spark.

A live run's ``replicate`` copies batches back to back for the length of its data interval (the schedule,
here 10 s), while ``emit_heartbeats`` and ``emit_checkpoints`` emit at their own intervals for as long.
``dag.test()`` runs the tasks one after another in this process, so each task's window is checked against
its own start and end; a deployment's executor runs them side by side.
"""

from __future__ import annotations

import os
import sys
import threading
from datetime import datetime
from pathlib import Path

import pytest

from airmirror.cli import main
from airmirror.mm2.wire_formats import Checkpoint, Heartbeat
from airmirror.model import BatchState
from airmirror.store.opening import open_flow
from tests.airflow.run_helpers import asset_events
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
    """A consumer group that commits one offset further on every partition each second, from 1 to 20 (offsets the
    test copied before the live run) and round again, so each checkpoint emission has something new to write however
    late a loaded machine starts the live run's tasks."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.halt = threading.Event()

    def run(self) -> None:
        offset, first = 1, True
        while not self.halt.wait(0 if first else 1.0):
            commit_offsets(self.bootstrap, self.group, {(self.topic, p): offset for p in range(PARTITIONS)})
            offset, first = offset % 20 + 1, False

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=60)


def committed_batches(config: Path) -> int:
    with open_flow(str(config), "a->b") as (flow, store):
        return sum(1 for batch in store.batches(flow.name) if batch.state == BatchState.COMMITTED)


def last_committed_batch(config: Path) -> int:
    with open_flow(str(config), "a->b") as (flow, store):
        return max(batch.id for batch in store.batches(flow.name) if batch.state == BatchState.COMMITTED)


def heartbeats_within(bootstrap: str, start: datetime, end: datetime) -> list[int]:
    """Timestamps (ms) of flow a->b's heartbeats on the target written between ``start`` and ``end``."""
    low, high = start.timestamp() * 1000, end.timestamp() * 1000
    beats = (Heartbeat.decode(record.key, record.value) for _, record in read_partition(bootstrap, "heartbeats", 0))
    return [
        beat.timestamp
        for beat in beats
        if (beat.source_alias, beat.target_alias) == ("a", "b") and low <= beat.timestamp <= high
    ]


@pytest.mark.parametrize("spark_submit", [False, True], ids=["pyspark-task", "spark-submit"])
def test_a_live_run_copies_records_produced_during_it_and_emits_at_its_intervals(
    airflow_db, clusters, prefix, tmp_path, dag_bag_for, monkeypatch, spark_submit
):
    monkeypatch.setenv(
        "PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    )  # PySpark's spark-submit
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic, group = f"{prefix}.pulse", f"{prefix}-readers"
    create_topic(a, topic, PARTITIONS)
    for p in range(PARTITIONS):
        produce(a, topic, p, sample_records(20, f"before{p}"))
    config = live_config(
        tmp_path / "mm2.properties", clusters, prefix, f"airmirror.spark.submit = {str(spark_submit).lower()}"
    )
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
    assert tis.pop("verify").state == "skipped" and {ti.state for ti in tis.values()} == {"success"}
    replicate = tis["replicate"]
    assert committed_batches(config) >= 2
    copied = tis["record_batch"].xcom_pull(task_ids="record_batch")  # read back from the DB, spark-submit or not
    assert copied["records"] > 0 and copied["batch_id"] == last_committed_batch(config)
    assert tis["record_batch"].rendered_map_index == f"{copied['records']:,} records copied"
    assert asset_events(run) == {
        f"kafka://{b}/a.{topic}": {"batch_id": copied["batch_id"], "records": copied["records"]}
    }
    if not spark_submit:
        assert replicate.xcom_pull(task_ids="replicate")["batches"] >= 1
    produced_while_live = [
        r
        for p in range(PARTITIONS)
        for r in records_of(b, f"a.{topic}", p)
        if r.timestamp >= replicate.start_date.timestamp() * 1000
    ]
    assert produced_while_live, "the live run copied nothing produced during its window"

    heartbeats = heartbeats_within(b, tis["emit_heartbeats"].start_date, tis["emit_heartbeats"].end_date)
    assert len(heartbeats) >= 3, heartbeats
    window = tis["emit_checkpoints"]
    low, high = window.start_date.timestamp() * 1000, window.end_date.timestamp() * 1000
    checkpoint_times = {
        record.timestamp
        for _, record in read_partition(b, "a.checkpoints.internal", 0)
        if low <= record.timestamp <= high and Checkpoint.decode(record.key, record.value).group == group
    }
    assert len(checkpoint_times) >= 2, checkpoint_times
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
    heartbeats = heartbeats_within(b, tis["emit_heartbeats"].start_date, tis["emit_heartbeats"].end_date)
    assert len(heartbeats) >= 3, heartbeats
