"""Flow DAG runs with ``dag.test()`` against real local Kafka and real Spark."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from confluent_kafka.admin import AdminClient

from tests.airflow.run_helpers import asset_events, run_flow, task_states
from tests.conftest import write_config
from tests.kafka_helpers import create_topic, produce, records_of, sample_records

pytestmark = pytest.mark.integration


def labels(run) -> dict[str, str | None]:
    """Each task instance's label (its rendered map index), as Airflow's task-instance lists show it."""
    return {ti.task_id: ti.rendered_map_index for ti in run.get_task_instances()}


def test_run_copies_every_topic_of_the_flow_and_verifies_it_when_asked(
    airflow_db, clusters, prefix, tmp_path, dag_bag_for
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    create_topic(a, f"{prefix}.orders", 2)
    for p in range(2):
        produce(a, f"{prefix}.orders", p, sample_records(40, f"p{p}"))
    config = write_config(
        tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.task.retries = 0"
    )

    run = run_flow(dag_bag_for, config, {"verify": True})

    assert set(task_states(run).values()) == {"success"}
    assert labels(run)["record_batch"] == "80 records copied"
    verified = run.get_task_instance("verify").xcom_pull(task_ids="verify")
    assert verified["equal"] and verified["verdicts"]["equal"] == 2
    batch_id = run.get_task_instance("record_batch").xcom_pull(task_ids="record_batch")["batch_id"]
    assert asset_events(run) == {f"kafka://{b}/a.{prefix}.orders": {"batch_id": batch_id, "records": 80}}
    for p in range(2):
        assert records_of(b, f"a.{prefix}.orders", p) == records_of(a, f"{prefix}.orders", p)


def test_params_topics_until_and_dry_run_do_what_they_say(airflow_db, clusters, prefix, tmp_path, dag_bag_for):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    create_topic(a, f"{prefix}.one")
    create_topic(a, f"{prefix}.two")
    early = sample_records(10, "early")
    late = sample_records(10, "late", base_ts=early[-1].timestamp + 60_000)
    produce(a, f"{prefix}.one", 0, early + late)
    produce(a, f"{prefix}.two", 0, early)
    config = write_config(
        tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.task.retries = 0"
    )
    target_admin = AdminClient({"bootstrap.servers": b})

    dry = run_flow(dag_bag_for, config, {"dry_run": True})
    states = task_states(dry)
    assert (
        states["plan_batch"] == "success" and states["replicate"] == "skipped" and states["record_batch"] == "skipped"
    )
    assert not {f"a.{prefix}.one", f"a.{prefix}.two"} & set(target_admin.list_topics(timeout=10).topics)

    until = datetime.fromtimestamp(late[0].timestamp / 1000, UTC).isoformat()
    bounded = run_flow(dag_bag_for, config, {"topics": f"{prefix}\\.one", "until": until})
    assert task_states(bounded)["record_batch"] == "success"
    assert records_of(b, f"a.{prefix}.one", 0) == early
    assert f"a.{prefix}.two" not in target_admin.list_topics(timeout=10).topics

    rest = run_flow(dag_bag_for, config)
    assert task_states(rest)["record_batch"] == "success"
    assert records_of(b, f"a.{prefix}.one", 0) == early + late
    assert records_of(b, f"a.{prefix}.two", 0) == early


def test_invalid_params_are_rejected_before_any_work(airflow_db, clusters, prefix, tmp_path, dag_bag_for):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    create_topic(a, f"{prefix}.guarded")
    produce(a, f"{prefix}.guarded", 0, sample_records(5))
    config = write_config(
        tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.task.retries = 0"
    )
    bad_regex = run_flow(dag_bag_for, config, {"topics": "(unclosed"})
    assert task_states(bad_regex)["sync_topics"] == "failed"
    assert f"a.{prefix}.guarded" not in AdminClient({"bootstrap.servers": b}).list_topics(timeout=10).topics

    assert task_states(run_flow(dag_bag_for, config))["record_batch"] == "success"
    produce(a, f"{prefix}.guarded", 0, sample_records(5, "more"))
    moved = run_flow(dag_bag_for, config, {"start_from": "earliest"})
    assert task_states(moved)["sync_topics"] == "failed"
    assert len(records_of(b, f"a.{prefix}.guarded", 0)) == 5


def test_failing_replicate_still_emits_heartbeats_and_checkpoints(airflow_db, clusters, prefix, tmp_path, dag_bag_for):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    create_topic(a, f"{prefix}.doomed")
    produce(a, f"{prefix}.doomed", 0, sample_records(5))
    config = write_config(
        tmp_path / "mm2.properties",
        clusters,
        f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.task.retries = 0\n"
        "airmirror.spark.conn.id = no_such_connection",
    )

    run = run_flow(dag_bag_for, config)

    states = task_states(run)
    assert states["replicate"] == "failed" and states["record_batch"] == "upstream_failed"
    assert states["emit_heartbeats"] == "success" and states["emit_checkpoints"] == "success"
    assert records_of(b, "heartbeats", 0)


def test_an_idle_run_skips_replicate_without_starting_spark(airflow_db, clusters, prefix, tmp_path, dag_bag_for):
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    create_topic(a, f"{prefix}.calm")
    produce(a, f"{prefix}.calm", 0, sample_records(20))
    config = write_config(
        tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.task.retries = 0"
    )
    assert task_states(run_flow(dag_bag_for, config))["replicate"] == "success"
    if (session := SparkSession.getActiveSession()) is not None:
        session.stop()
    assert SparkContext._active_spark_context is None

    idle = run_flow(dag_bag_for, config)

    states = task_states(idle)
    assert states["plan_batch"] == "success" and states["replicate"] == "skipped"
    assert states["record_batch"] == "success" and states["emit_checkpoints"] == "success"
    assert SparkContext._active_spark_context is None, "the idle run started Spark"
    assert asset_events(idle) == {}
    assert records_of(b, f"a.{prefix}.calm", 0) == records_of(a, f"{prefix}.calm", 0)


def test_a_config_error_met_while_running_fails_at_once_without_retries(
    airflow_db, clusters, prefix, tmp_path, dag_bag_for
):
    create_topic(clusters["a"].bootstrap, f"{prefix}.wide")
    body = f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.task.retries = 2\nreplication.factor = 3"
    config = write_config(tmp_path / "mm2.properties", clusters, body)

    run = run_flow(dag_bag_for, config)

    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    assert (tis["sync_topics"].state, tis["sync_topics"].try_number) == ("failed", 1)
    assert tis["record_batch"].state == "upstream_failed"
