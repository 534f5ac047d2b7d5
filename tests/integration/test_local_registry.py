"""``airmirror local-registry``: real Apicurio registries on 127.0.0.1 serving Confluent's API, one per cluster, whose
schema ids differ; started and stopped from the library and from the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from airmirror.devtools.local_kafka import free_port
from airmirror.devtools.local_registry import start_registry, stop_registry

pytestmark = pytest.mark.integration

AVRO = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}


def register(url: str, subject: str, schema: dict) -> int:
    answer = httpx.post(
        f"{url}/subjects/{subject}/versions",
        json={"schema": json.dumps(schema), "schemaType": "AVRO"},
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        timeout=30,
    )
    answer.raise_for_status()
    return int(answer.json()["id"])


def test_two_registries_serve_confluents_api_with_ids_of_their_own(tmp_path: Path) -> None:
    a = start_registry("a", free_port(), tmp_path)
    try:
        b = start_registry("b", free_port(avoid=(a.port, a.management_port)), tmp_path)
        try:
            register(b.url, "padding-value", {"type": "string"})
            on_a, on_b = register(a.url, "orders-value", AVRO), register(b.url, "a.orders-value", AVRO)
            assert on_a != on_b
            fetched = httpx.get(f"{b.url}/schemas/ids/{on_b}", timeout=30).json()
            assert json.loads(fetched["schema"]) == AVRO
            assert httpx.get(f"{a.url}/subjects", timeout=30).json() == ["orders-value"]
        finally:
            assert stop_registry("b", tmp_path)
    finally:
        assert stop_registry("a", tmp_path)
    assert not stop_registry("a", tmp_path)


def test_the_command_line_starts_and_stops_a_registry_and_refuses_a_bad_name(tmp_path: Path) -> None:
    env = {**os.environ, "AIRMIRROR_HOME": str(tmp_path)}
    cli = [sys.executable, "-m", "airmirror.cli", "local-registry"]
    port = free_port()
    started = subprocess.run([*cli, "start", "r1", "--port", str(port)], capture_output=True, text=True, env=env)
    try:
        assert started.returncode == 0, started.stderr
        assert f"http://127.0.0.1:{port}/apis/ccompat/v7" in started.stdout
        assert httpx.get(f"http://127.0.0.1:{port}/apis/ccompat/v7/subjects", timeout=30).json() == []
    finally:
        stopped = subprocess.run([*cli, "stop", "r1"], capture_output=True, text=True, env=env)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    bad = subprocess.run([*cli, "start", "no/such", "--port", str(port)], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "invalid registry name 'no/such'" in bad.stderr


def test_a_registry_with_a_data_dir_keeps_its_schemas_across_a_restart(tmp_path: Path) -> None:
    port = free_port()
    first = start_registry("kept", port, tmp_path, tmp_path / "data")
    try:
        schema_id = register(first.url, "orders-value", AVRO)
    finally:
        stop_registry("kept", tmp_path)
    again = start_registry("kept", port, tmp_path, tmp_path / "data")
    try:
        assert httpx.get(f"{again.url}/subjects", timeout=30).json() == ["orders-value"]
        assert json.loads(httpx.get(f"{again.url}/schemas/ids/{schema_id}", timeout=30).json()["schema"]) == AVRO
    finally:
        stop_registry("kept", tmp_path)
