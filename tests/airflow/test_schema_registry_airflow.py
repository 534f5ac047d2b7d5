"""Schema registries in real ``dag.test()`` runs: the target's registry named only by an Airflow connection of type
``http`` (``b.schema.registry.airflow.conn.id``), resolved by Airflow's own lookup in the tasks; the run syncs the
source's subjects, rewrites the schema ids it copies, and its password never reaches a log."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer

from airmirror.config import load_config
from airmirror.store import MetadataStore
from tests.conftest import write_config
from tests.kafka_helpers import create_topic, read_partition
from tests.registry_helpers import avro_deserializer, avro_serializer, registry_url

pytestmark = pytest.mark.integration

SECRET = "registry-password-5c4b3a"
ORDER = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})


def test_a_dag_run_translates_schema_ids_with_the_target_registry_from_a_connection(
    airflow_db, clusters, registries, prefix, tmp_path, dag_bag_for, monkeypatch, capfd, caplog
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    source_url, target_url = registry_url(registries["a"]), registry_url(registries["b"])
    topic = f"{prefix}.orders"
    create_topic(a, topic)
    serialize = avro_serializer(source_url, ORDER)
    producer = Producer({"bootstrap.servers": a})
    for number in range(20):
        producer.produce(topic, serialize({"id": number}, topic), partition=0)
    assert producer.flush(30) == 0
    config = write_config(
        tmp_path / "mm2.properties",
        clusters,
        f"a->b.enabled = true\ntopics = {prefix}.*\na.schema.registry.url = {source_url}\n"
        "b.schema.registry.airflow.conn.id = target_registry\n",
    )
    port = registries["b"].port
    monkeypatch.setenv(
        "AIRFLOW_CONN_TARGET_REGISTRY",
        json.dumps(
            {
                "conn_type": "http",
                "host": "127.0.0.1/apis/ccompat/v7",
                "port": port,
                "schema": "http",
                "login": "airmirror",
                "password": SECRET,
                "extra": {},
            }
        ),
    )

    run = dag_bag_for(config).dags["airmirror__a__b"].test()

    assert {ti.task_id: ti.state for ti in run.get_task_instances()}["record_batch"] == "success"
    remote = f"a.{topic}"
    deserialize = avro_deserializer(target_url)
    copied = read_partition(b, remote, 0)
    assert [deserialize(record.value, remote) for _, record in copied] == [{"id": n} for n in range(20)]
    flow = load_config(config).flow("a->b")
    store = MetadataStore.open(flow.metadata_db_url)
    try:
        assert [s.target_subject for s in store.schema_subjects("a->b")] == [f"{remote}-value"]
        assert store.schema_ids("a->b")
    finally:
        store.dispose()
    captured = capfd.readouterr()
    assert SECRET not in caplog.text + captured.out + captured.err
