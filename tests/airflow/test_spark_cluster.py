"""The copy job on a real Spark standalone cluster (a master and two one-core workers on 127.0.0.1, from the
installed pyspark), through the CLI (``airmirror.spark.master = spark://...``) and through the DAG's
spark-submit path (SparkSubmitOperator submitting ``spark_apps/``); Spark's own event log shows where each
task ran."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import write_config
from tests.kafka_helpers import create_topic, produce, records_of, sample_records
from tests.spark_cluster import LOOPBACK, SparkCluster, spark_standalone, tasks_per_worker

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 6


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory) -> Iterator[SparkCluster]:
    with spark_standalone(tmp_path_factory.mktemp("spark-standalone")) as cluster:
        yield cluster


def cluster_config(path: Path, clusters, prefix: str, cluster: SparkCluster, extra: str = "") -> Path:
    conf = "\n".join(f"airmirror.spark.conf.{key} = {value}" for key, value in cluster.job_conf().items())
    body = (
        f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.task.retries = 0\n"
        f"airmirror.spark.master = {cluster.master_url}\n{conf}\n{extra}"
    )
    return write_config(path, clusters, body)


def loaded_topic(bootstrap: str, topic: str) -> None:
    create_topic(bootstrap, topic, PARTITIONS)
    for p in range(PARTITIONS):
        produce(bootstrap, topic, p, sample_records(200, f"p{p}"))


def assert_copied(clusters, topic: str) -> None:
    for p in range(PARTITIONS):
        source = records_of(clusters["a"].bootstrap, topic, p)
        assert len(source) == 200 and records_of(clusters["b"].bootstrap, f"a.{topic}", p) == source, f"partition {p}"


def assert_tasks_on_every_worker(cluster: SparkCluster, before: set[Path]) -> None:
    new_logs = set(cluster.event_log_dir.iterdir()) - before
    assert len(new_logs) == 1, f"expected one new application event log, found {sorted(p.name for p in new_logs)}"
    per_worker = tasks_per_worker(new_logs)
    assert set(per_worker) == set(cluster.worker_ui_ports), f"tasks per worker (by worker UI port): {dict(per_worker)}"
    assert sum(per_worker.values()) >= len(cluster.worker_ui_ports)  # one copy task per core, several partitions each


def test_the_cli_copies_a_topic_with_tasks_on_both_workers(clusters, prefix, tmp_path, spark_cluster):
    topic = f"{prefix}.spread"
    loaded_topic(clusters["a"].bootstrap, topic)
    config = cluster_config(tmp_path / "mm2.properties", clusters, prefix, spark_cluster)
    before = set(spark_cluster.event_log_dir.iterdir())

    done = subprocess.run(
        [sys.executable, "-m", "airmirror.cli", "replicate", str(config), "--flow", "a->b"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **LOOPBACK},
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert_copied(clusters, topic)
    assert_tasks_on_every_worker(spark_cluster, before)


def test_the_dags_spark_submit_path_copies_with_tasks_on_both_workers(
    airflow_db, clusters, prefix, tmp_path, dag_bag_for, monkeypatch, spark_cluster
):
    monkeypatch.setenv(
        "PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    )  # PySpark's spark-submit
    for key, value in LOOPBACK.items():
        monkeypatch.setenv(key, value)
    host, port = spark_cluster.master_url.rsplit(":", 1)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", f'{{"conn_type": "spark", "host": "{host}", "port": {port}}}')
    topic = f"{prefix}.submitted"
    loaded_topic(clusters["a"].bootstrap, topic)
    config = cluster_config(
        tmp_path / "mm2.properties",
        clusters,
        prefix,
        spark_cluster,
        "airmirror.spark.submit = true\nairmirror.spark.conn.id = spark_cluster",
    )
    before = set(spark_cluster.event_log_dir.iterdir())

    bag = dag_bag_for(config)
    assert bag.import_errors == {}
    run = bag.dags["airmirror__a__b"].test()

    assert {ti.task_id: ti.state for ti in run.get_task_instances()}["record_batch"] == "success"
    assert_copied(clusters, topic)
    assert_tasks_on_every_worker(spark_cluster, before)
