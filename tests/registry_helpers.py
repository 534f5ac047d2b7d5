"""Real schema registries for tests: one Apicurio Registry (Confluent's API) per cluster, whose ids differ, and
confluent-kafka's own serializers and deserializers against them.

The session fixture ``registries`` (in ``tests/conftest.py``) starts registries ``a`` and ``b`` once per pytest
session (each pytest-xdist worker has its own pair), with padding schemas on ``b`` so that the same schema never gets
the same id on both.  Tests share them: each names its subjects after its own ``prefix`` topics.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from airmirror.devtools.local_registry import LocalRegistry

CONTENT_TYPE = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
PADDING = [
    {"type": "record", "name": f"Padding{index}", "fields": [{"name": f"f{index}", "type": "string"}]}
    for index in range(3)
]


def registry_url(registry: LocalRegistry) -> str:
    """The registry's Confluent API base URL."""
    return f"http://127.0.0.1:{registry.port}/apis/ccompat/v7"


def register(
    url: str, subject: str, schema: str, schema_type: str = "AVRO", references: list[dict] | None = None
) -> int:
    """Register ``schema`` under ``subject`` with a plain HTTP call; returns its id."""
    body: dict[str, Any] = {"schema": schema, "schemaType": schema_type}
    if references:
        body["references"] = references
    answer = httpx.post(f"{url}/subjects/{subject}/versions", json=body, headers=CONTENT_TYPE, timeout=30)
    answer.raise_for_status()
    return int(answer.json()["id"])


def pad(url: str, label: str) -> None:
    """Register the padding schemas on ``url`` (under subjects named after ``label``), so its ids run ahead."""
    for index, schema in enumerate(PADDING):
        register(url, f"{label}-padding-{index}", json.dumps(schema))


def client(url: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": url})


def avro_serializer(url: str, schema: str, **conf: Any) -> Callable[[Any, str, MessageField], bytes]:
    """``serialize(obj, topic, field)`` with confluent-kafka's AvroSerializer (auto-registers under
    TopicNameStrategy unless ``conf`` says otherwise)."""
    serializer = AvroSerializer(client(url), schema, conf=conf or None)

    def serialize(obj: Any, topic: str, field: MessageField = MessageField.VALUE) -> bytes:
        return serializer(obj, SerializationContext(topic, field))

    return serialize


def avro_deserializer(url: str) -> Callable[[bytes, str, MessageField], Any]:
    """``deserialize(data, topic, field)`` with confluent-kafka's AvroDeserializer, schemas read from ``url`` only."""
    deserializer = AvroDeserializer(client(url))

    def deserialize(data: bytes, topic: str, field: MessageField = MessageField.VALUE) -> Any:
        return deserializer(data, SerializationContext(topic, field))

    return deserialize


def json_serializer(url: str, schema: str, **conf: Any) -> Callable[[Any, str, MessageField], bytes]:
    serializer = JSONSerializer(schema, client(url), conf=conf or None)

    def serialize(obj: Any, topic: str, field: MessageField = MessageField.VALUE) -> bytes:
        return serializer(obj, SerializationContext(topic, field))

    return serialize


def json_deserializer(url: str) -> Callable[[bytes, str, MessageField], Any]:
    """``deserialize(data, topic, field)`` with confluent-kafka's JSONDeserializer, the schema fetched from ``url``."""
    deserializer = JSONDeserializer(None, schema_registry_client=client(url))

    def deserialize(data: bytes, topic: str, field: MessageField = MessageField.VALUE) -> Any:
        return deserializer(data, SerializationContext(topic, field))

    return deserialize
