"""Real schema registries for tests: one Apicurio Registry (Confluent's API) per cluster, whose ids differ, and
confluent-kafka's own serializers and deserializers against them.

The session fixture ``registries`` (in ``tests/conftest.py``) starts registries ``a`` and ``b`` once per pytest
session (each pytest-xdist worker has its own pair), with padding schemas on ``b`` so that the same schema never gets
the same id on both.  Tests share them: each names its subjects after its own ``prefix`` topics.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.common.serde import SchemaId
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

from airmirror.devtools.local_registry import LocalRegistry
from airmirror.devtools.local_registry.clients import TOPIC_SUBJECTS, registry_client

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


SERIALIZER_CONF = TOPIC_SUBJECTS
client = registry_client


def avro_serializer(url: str, schema: str | Schema, **conf: Any) -> Callable[[Any, str, MessageField], bytes]:
    """``serialize(obj, topic, field)`` with confluent-kafka's AvroSerializer (auto-registers under
    TopicNameStrategy unless ``conf`` says otherwise)."""
    serializer = AvroSerializer(client(url), schema, conf={**SERIALIZER_CONF, **conf})

    def serialize(obj: Any, topic: str, field: MessageField = MessageField.VALUE) -> bytes:
        return serializer(obj, SerializationContext(topic, field))

    return serialize


def avro_deserializer(url: str) -> Callable[[bytes, str, MessageField], Any]:
    """``deserialize(data, topic, field)`` with confluent-kafka's AvroDeserializer, schemas read from ``url`` only."""
    deserializer = AvroDeserializer(client(url))

    def deserialize(data: bytes, topic: str, field: MessageField = MessageField.VALUE) -> Any:
        return deserializer(data, SerializationContext(topic, field))

    return deserialize


def json_serializer(url: str, schema: str | Schema, **conf: Any) -> Callable[[Any, str, MessageField], bytes]:
    serializer = JSONSerializer(schema, client(url), conf={**SERIALIZER_CONF, **conf})

    def serialize(obj: Any, topic: str, field: MessageField = MessageField.VALUE) -> bytes:
        return serializer(obj, SerializationContext(topic, field))

    return serialize


def json_deserializer(url: str) -> Callable[[bytes, str, MessageField], Any]:
    """``deserialize(data, topic, field)`` with confluent-kafka's JSONDeserializer, the schema fetched from ``url``."""
    deserializer = JSONDeserializer(None, schema_registry_client=client(url))

    def deserialize(data: bytes, topic: str, field: MessageField = MessageField.VALUE) -> Any:
        return deserializer(data, SerializationContext(topic, field))

    return deserialize


def get(url: str, path: str) -> Any:
    """``GET {url}{path}`` on a registry, its JSON answer (``None`` for a 404)."""
    answer = httpx.get(f"{url}{path}", timeout=30)
    if answer.status_code == 404:
        return None
    answer.raise_for_status()
    return answer.json()


def subject_version(url: str, subject: str, version: int | str = "latest") -> dict[str, Any] | None:
    """``GET /subjects/{subject}/versions/{version}`` (``id``, ``schema``, ``references``...); ``None`` when absent."""
    found: dict[str, Any] | None = get(url, f"/subjects/{quote(subject, safe='')}/versions/{version}")
    return found


def versions(url: str, subject: str) -> list[int]:
    """The subject's versions, empty when it does not exist."""
    return list(get(url, f"/subjects/{quote(subject, safe='')}/versions") or [])


def set_compatibility(url: str, subject: str, level: str) -> None:
    """Give ``subject`` a compatibility level of its own (``PUT /config/{subject}``)."""
    answer = httpx.put(
        f"{url}/config/{quote(subject, safe='')}", json={"compatibility": level}, headers=CONTENT_TYPE, timeout=30
    )
    answer.raise_for_status()


def message_classes(*files: descriptor_pb2.FileDescriptorProto) -> Callable[[str], type[Message]]:
    """Protobuf message classes built at run time (no protoc): ``files`` (imports first) go into a pool of their
    own; the result returns the class of a message by its full name (``pkg.Outer.Inner``)."""
    pool = descriptor_pool.DescriptorPool()
    for file in files:
        pool.Add(file)
    return lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def registry_message_class(url: str, schema_id: int, indexes: list[int]) -> type[Message]:
    """The Protobuf message class of ``schema_id`` and message ``indexes`` built from what the registry at ``url``
    alone holds: the schema's file and, recursively, its references, each as confluent-kafka's serializer registers
    them (base64 of a FileDescriptorProto)."""
    pool = descriptor_pool.DescriptorPool()

    def add(schema: dict[str, Any]) -> descriptor_pb2.FileDescriptorProto:
        for reference in schema.get("references") or ():
            found = subject_version(url, reference["subject"], reference["version"])
            assert found is not None, f"reference {reference} missing on {url}"
            add(found)
        file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema["schema"]))
        try:
            pool.FindFileByName(file.name)
        except KeyError:
            pool.Add(file)
        return file

    file = add(get(url, f"/schemas/ids/{schema_id}"))
    names, messages = [], file.message_type
    for index in indexes:
        names.append(messages[index].name)
        messages = messages[index].nested_type
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(".".join([file.package, *names])))


def protobuf_serializer(
    url: str, message_class: type[Message], **conf: Any
) -> Callable[[Message, str, MessageField], bytes]:
    """``serialize(message, topic, field)`` with confluent-kafka's ProtobufSerializer: it registers the message's
    file (base64 of its FileDescriptorProto) under TopicNameStrategy and each import under its file name."""
    serializer = ProtobufSerializer(
        message_class, client(url), conf={**SERIALIZER_CONF, "use.deprecated.format": False, **conf}
    )

    def serialize(message: Message, topic: str, field: MessageField = MessageField.VALUE) -> bytes:
        return serializer(message, SerializationContext(topic, field))

    return serialize


def protobuf_deserializer(message_class: type[Message]) -> Callable[[bytes, str, MessageField], Message]:
    """``deserialize(data, topic, field)`` with confluent-kafka's ProtobufDeserializer and no registry: Apicurio
    3.3 answers ``GET /schemas/ids/N?format=serialized`` with garbage or HTTP 500 for Protobuf, so the message class
    is given (check the id against the registry with :func:`protobuf_frame` and ``/schemas/ids/N``)."""
    deserializer = ProtobufDeserializer(message_class, {"use.deprecated.format": False})

    def deserialize(data: bytes, topic: str, field: MessageField = MessageField.VALUE) -> Message:
        return deserializer(data, SerializationContext(topic, field))

    return deserialize


def protobuf_frame(data: bytes) -> tuple[int, list[int], bytes]:
    """A Protobuf record's schema id, message indexes and serialized message (confluent-kafka's own reading)."""
    schema_id = SchemaId("PROTOBUF")
    rest = schema_id.from_bytes(io.BytesIO(data))
    return schema_id.id, list(schema_id.message_indexes), rest.read()


def protobuf_framed(schema_id: int, indexes: list[int], message: Message) -> bytes:
    """``message`` framed as confluent-kafka frames it: magic byte, id, message indexes, serialized message."""
    return SchemaId("PROTOBUF", schema_id, None, indexes).id_to_bytes() + message.SerializeToString()
