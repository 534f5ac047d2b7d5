"""DAG parsing: one DAG per enabled flow, broken configs surface as import errors, no I/O at import."""

from __future__ import annotations

from pathlib import Path

THREE_FLOWS = """clusters = a, b, c
a.bootstrap.servers = 127.0.0.1:1
b.bootstrap.servers = 127.0.0.1:2
c.bootstrap.servers = 127.0.0.1:3
a->b.enabled = true
b->a.enabled = true
a->c.enabled = true
b->c.enabled = false
a.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="s3cret";
a.security.protocol = SASL_PLAINTEXT
a.sasl.mechanism = PLAIN
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mm2.properties"
    path.write_text(text)
    return path


def test_one_dag_per_enabled_flow(tmp_path, dag_bag_for):
    bag = dag_bag_for(write(tmp_path, THREE_FLOWS))
    assert bag.import_errors == {}
    assert sorted(bag.dag_ids) == ["airmirror__a__b", "airmirror__a__c", "airmirror__b__a"]
    flow_dag = bag.dags["airmirror__a__b"]
    assert {t.task_id for t in flow_dag.tasks} == {
        "sync_topics",
        "plan_batch",
        "replicate",
        "record_batch",
        "emit_heartbeats",
        "emit_checkpoints",
        "verify",
    }
    assert flow_dag.max_active_runs == 1
    assert {"airmirror", "source:a", "target:b"} <= set(flow_dag.tags)
    assert set(flow_dag.params) == {
        "topics",
        "start_from",
        "start_at",
        "reset_cursor",
        "until",
        "max_records_per_partition",
        "dry_run",
        "verify",
    }
    assert "s3cret" not in flow_dag.doc_md and "********" in flow_dag.doc_md
    assert flow_dag.get_task("emit_heartbeats").upstream_task_ids == set()
    assert flow_dag.get_task("emit_checkpoints").trigger_rule == "all_done"
    assert flow_dag.get_task("verify").upstream_task_ids == {"record_batch"}


def test_a_live_flow_emits_beside_replicate_and_submits_its_window(tmp_path, dag_bag_for):
    text = THREE_FLOWS + "a->b.airmirror.live = true\na->c.airmirror.live = true\na->c.airmirror.spark.submit = true\n"
    bag = dag_bag_for(write(tmp_path, text))
    assert bag.import_errors == {}
    live = bag.dags["airmirror__a__b"]
    assert live.get_task("emit_checkpoints").upstream_task_ids == set()
    assert live.get_task("emit_heartbeats").upstream_task_ids == set()
    assert "`airmirror.live` | `True`" in live.doc_md
    assert bag.dags["airmirror__b__a"].get_task("emit_checkpoints").upstream_task_ids == {"record_batch"}
    submitted = bag.dags["airmirror__a__c"].get_task("replicate")
    assert "--live-seconds" in submitted.application_args


def test_a_worker_running_one_task_builds_only_that_flows_dag(tmp_path, dag_bag_for, monkeypatch):
    monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", "airmirror__b__a")
    monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_TASK_ID", "replicate")
    assert dag_bag_for(write(tmp_path, THREE_FLOWS)).dag_ids == ["airmirror__b__a"]
    monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", "some_other_dag")
    assert len(dag_bag_for(write(tmp_path, THREE_FLOWS)).dag_ids) == 3


def test_aliases_are_sanitised_in_dag_ids(tmp_path, dag_bag_for):
    text = (
        "clusters = us.east, eu-west\nus.east.bootstrap.servers = h:1\neu-west.bootstrap.servers = h:2\n"
        "us.east->eu-west.enabled = true\n"
    )
    bag = dag_bag_for(write(tmp_path, text))
    assert bag.import_errors == {} and bag.dag_ids == ["airmirror__us_east__eu-west"]


def test_adding_a_flow_adds_a_dag_without_code_changes(tmp_path, dag_bag_for):
    config = write(tmp_path, THREE_FLOWS)
    assert len(dag_bag_for(config).dag_ids) == 3
    config.write_text(THREE_FLOWS.replace("b->c.enabled = false", "b->c.enabled = true"))
    assert "airmirror__b__c" in dag_bag_for(config).dag_ids


def test_broken_config_is_an_import_error_naming_the_key(tmp_path, dag_bag_for):
    bag = dag_bag_for(write(tmp_path, THREE_FLOWS + "topics = (unclosed\n"))
    assert bag.dag_ids == []
    (message,) = bag.import_errors.values()
    assert "'topics'" in message and "line 12" in message


def test_bad_schedule_is_an_import_error_naming_the_key(tmp_path, dag_bag_for):
    bag = dag_bag_for(write(tmp_path, THREE_FLOWS + "a->b.airmirror.schedule = every minute\n"))
    (message,) = bag.import_errors.values()
    assert "airmirror.schedule" in message


def test_no_enabled_flow_never_registers_zero_dags_silently(tmp_path, dag_bag_for):
    bag = dag_bag_for(write(tmp_path, "clusters = a\na.bootstrap.servers = h:1\n"))
    (message,) = bag.import_errors.values()
    assert "enables no flow" in message


def test_missing_config_variable_is_an_import_error(tmp_path, dag_bag_for, monkeypatch):
    config = write(tmp_path, THREE_FLOWS)
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.delenv("AIRMIRROR_CONFIG", raising=False)
    bag = DagBag(dag_folder=str(Path(__file__).resolve().parents[2] / "dags"))
    assert config.exists()
    (message,) = bag.import_errors.values()
    assert "AIRMIRROR_CONFIG" in message
