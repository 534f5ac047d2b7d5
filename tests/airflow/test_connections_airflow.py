"""Target credentials from an Airflow connection (``b.airflow.conn.id``) in real ``dag.test()`` runs against
the real test clusters: parsing never needs the connection, a run without it fails at once naming it, a run
with it (``AIRFLOW_CONN_TARGET_KAFKA``, read by Airflow's own lookup in the tasks) replicates, and its secret
never reaches a log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airmirror.cli import main
from tests.conftest import write_config
from tests.kafka_helpers import create_topic, produce, records_of, sample_records

pytestmark = pytest.mark.integration

SECRET = "conn-only-key-password-9d8e7f"


def flow_with_target_connection(tmp_path: Path, clusters, prefix: str, monkeypatch, extra: str = "") -> Path:
    """Flow a->b whose target cluster is named only by ``b.airflow.conn.id = target_kafka`` (the variable
    unset), with 15 records on the source."""
    create_topic(clusters["a"].bootstrap, f"{prefix}.vault")
    produce(clusters["a"].bootstrap, f"{prefix}.vault", 0, sample_records(15))
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*\n{extra}")
    config.write_text(
        config.read_text().replace(
            f"b.bootstrap.servers = {clusters['b'].bootstrap}\n", "b.airflow.conn.id = target_kafka\n"
        )
    )
    monkeypatch.delenv("AIRFLOW_CONN_TARGET_KAFKA", raising=False)
    return config


def test_a_flow_takes_its_target_from_an_airflow_connection(
    airflow_db, clusters, prefix, tmp_path, dag_bag_for, monkeypatch, capfd, caplog
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    config = flow_with_target_connection(tmp_path, clusters, prefix, monkeypatch, "airmirror.task.retries = 2")

    bag = dag_bag_for(config)
    assert bag.import_errors == {}
    missing = bag.dags["airmirror__a__b"].test()
    tis = {ti.task_id: ti for ti in missing.get_task_instances()}
    assert (tis["sync_topics"].state, tis["sync_topics"].try_number) == ("failed", 1)
    failed = capfd.readouterr()
    assert "Airflow connection 'target_kafka' not found" in caplog.text + failed.out + failed.err

    extra = {"bootstrap.servers": b, "ssl.key.password": SECRET}
    monkeypatch.setenv("AIRFLOW_CONN_TARGET_KAFKA", json.dumps({"conn_type": "kafka", "extra": extra}))
    run = dag_bag_for(config).dags["airmirror__a__b"].test()

    assert {ti.task_id: ti.state for ti in run.get_task_instances()}["record_batch"] == "success"
    assert records_of(b, f"a.{prefix}.vault", 0) == records_of(a, f"{prefix}.vault", 0)
    captured = capfd.readouterr()
    assert SECRET not in caplog.text + captured.out + captured.err


def test_the_cli_resolves_the_same_connection_from_the_environment(clusters, prefix, tmp_path, monkeypatch, capsys):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    config = flow_with_target_connection(tmp_path, clusters, prefix, monkeypatch)

    assert main(["validate", str(config)]) == 0
    assert main(["replicate", str(config), "--flow", "a->b"]) == 2
    assert "key 'b.airflow.conn.id'" in capsys.readouterr().err

    monkeypatch.setenv("AIRFLOW_CONN_TARGET_KAFKA", f"kafka://?bootstrap.servers={b}&ssl.key.password={SECRET}")
    assert main(["replicate", str(config), "--flow", "a->b"]) == 0
    assert records_of(b, f"a.{prefix}.vault", 0) == records_of(a, f"{prefix}.vault", 0)
    assert SECRET not in "".join(capsys.readouterr())
