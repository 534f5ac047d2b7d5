"""Cluster credentials from Airflow connections (``{alias}.airflow.conn.id``), resolved from
``AIRFLOW_CONN_{NAME}`` outside Airflow, only when a client needs them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from airmirror.config import load_config
from airmirror.config.connections import FoundConnection, from_environment, use_resolver
from airmirror.errors import ConfigError

SECRET = "s3cr3t-from-the-connection"
CONFIG = """\
clusters = a, b
a.bootstrap.servers = a1:9092
b.airflow.conn.id = target_kafka
a->b.enabled = true
"""
EXTRA = {
    "bootstrap.servers": "b1:9092",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "mirror",
    "sasl.password": SECRET,
}


@pytest.fixture(autouse=True)
def resolved_from_the_environment() -> Iterator[None]:
    """The CLI's resolver, whatever an earlier in-process ``dag.test()`` installed (connections rule 3)."""
    use_resolver(from_environment)
    yield
    use_resolver(from_environment)


def flow(tmp_path: Path, text: str = CONFIG):
    path = tmp_path / "mm2.properties"
    path.write_text(text)
    return load_config(path, env={}).flow("a->b")


def test_the_connection_supplies_the_clusters_client_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_TARGET_KAFKA", json.dumps({"conn_type": "kafka", "extra": EXTRA}))
    producer = flow(tmp_path).target_client("producer")
    assert {key: producer[key] for key in EXTRA} == EXTRA
    assert flow(tmp_path).source_client("consumer")["bootstrap.servers"] == "a1:9092"


def test_the_files_keys_for_the_cluster_override_the_connection(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_TARGET_KAFKA", json.dumps({"conn_type": "kafka", "extra": EXTRA}))
    config = flow(tmp_path, CONFIG + "b.producer.linger.ms = 7\nb.bootstrap.servers = b9:9092\n").target_client(
        "producer"
    )
    assert (config["bootstrap.servers"], config["linger.ms"], config["sasl.password"]) == ("b9:9092", "7", SECRET)


def test_uri_form_with_the_extra_in_its_query(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_TARGET_KAFKA", "kafka://?bootstrap.servers=b1%3A9092&client.id=mirror")
    config = flow(tmp_path).target_client("consumer")
    assert (config["bootstrap.servers"], config["client.id"]) == ("b1:9092", "mirror")


def test_loading_and_validating_never_resolve_the_connection(tmp_path, monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_TARGET_KAFKA", raising=False)
    loaded = flow(tmp_path)
    with pytest.raises(ConfigError) as error:
        loaded.target_client("producer")
    assert error.value.key == "b.airflow.conn.id" and error.value.exit_code == 2
    assert "'target_kafka' not found" in str(error.value) and "AIRFLOW_CONN_TARGET_KAFKA" in str(error.value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (json.dumps({"conn_type": "postgres", "extra": EXTRA}), "of type 'postgres', expected 'kafka'"),
        (json.dumps({"conn_type": "kafka", "extra": {"nested": {"a": 1}}}), "flat object"),
        (json.dumps({"conn_type": "kafka", "extra": {"client.id": "x"}}), "sets bootstrap.servers"),
        ("{not json " + SECRET, "not valid JSON"),
    ],
    ids=["wrong type", "nested extra", "no bootstrap", "broken json"],
)
def test_bad_connections_name_the_key_and_never_show_their_values(tmp_path, monkeypatch, value, message):
    monkeypatch.setenv("AIRFLOW_CONN_TARGET_KAFKA", value)
    with pytest.raises(ConfigError) as error:
        flow(tmp_path).target_client("producer")
    assert error.value.key == "b.airflow.conn.id"
    assert message in str(error.value) and SECRET not in str(error.value)


def test_a_cluster_without_bootstrap_servers_or_connection_is_still_rejected_at_load(tmp_path):
    with pytest.raises(ConfigError) as error:
        flow(tmp_path, CONFIG.replace("b.airflow.conn.id = target_kafka\n", ""))
    assert error.value.key == "b.bootstrap.servers"


def test_an_installed_resolver_replaces_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_TARGET_KAFKA", raising=False)
    asked: list[str] = []

    def airflow_like(name: str) -> FoundConnection | None:
        asked.append(name)
        return FoundConnection("kafka", {"bootstrap.servers": "b7:9092", "enable.idempotence": True})

    use_resolver(airflow_like)
    config = flow(tmp_path).target_client("producer")
    assert asked == ["target_kafka"]
    assert (config["bootstrap.servers"], config["enable.idempotence"]) == ("b7:9092", "true")


def test_found_connections_never_show_their_extra():
    assert SECRET not in repr(FoundConnection("kafka", EXTRA))
