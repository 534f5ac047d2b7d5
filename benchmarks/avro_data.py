"""Avro data for the bench's schema-id case (issue 24): a real schema registry per cluster, and values framed exactly
as confluent-kafka's AvroSerializer frames them (magic byte 0, the schema's 4-byte id, the Avro body).

The registries are Apicurio (``airmirror.devtools.local_registry``, Confluent's API), the target one padded with
schemas of its own first, so that a schema never has the same id on both and a translating copy rewrites every
value.  :class:`AvroValues` registers its schema through a real AvroSerializer and checks, on record 0, that its
own framing of fastavro's bytes is byte for byte what the serializer writes; it then frames every value itself,
which loads hundreds of thousands of records in seconds.
"""

from __future__ import annotations

import io
import json
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from kafka_io import Expected, Record

from airmirror.devtools.local_kafka import free_port
from airmirror.devtools.local_registry import LocalRegistry, start_registry, stop_registry
from airmirror.devtools.local_registry.clients import TOPIC_SUBJECTS, registry_client

REGISTRIES = ("bench-source", "bench-target")
AVRO_MASKED = ("customer", "amount_cents")
AVRO_MASK_CHAIN = (
    "{source}->{target}.transforms = mask",
    "{source}->{target}.transforms.mask.type = org.apache.kafka.connect.transforms.MaskField$Value",
    f"{{source}}->{{target}}.transforms.mask.fields = {','.join(AVRO_MASKED)}",
)
"""The Avro transform case's chain: MaskField on two fields of :data:`ORDER_SCHEMA` (its schema stays as it is)."""
TARGET_PADDING = 3
ORDER_SCHEMA = {
    "type": "record",
    "name": "BenchOrder",
    "namespace": "airmirror.bench",
    "fields": [
        {"name": "order", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount_cents", "type": "int"},
        {"name": "currency", "type": {"type": "enum", "name": "Currency", "symbols": ["EUR", "USD", "GBP"]}},
        {"name": "payload", "type": "bytes"},
    ],
}
_ID = struct.Struct(">I")


@dataclass(frozen=True)
class Registries:
    """The bench's two registries, one per cluster."""

    source: LocalRegistry
    target: LocalRegistry


def start_registries(home: Path) -> Registries:
    """Start the source and the target registry under ``home`` (stop them with :func:`stop_registries`); the target
    holds :data:`TARGET_PADDING` schemas of its own."""
    source = start_registry(REGISTRIES[0], free_port(), home)
    target = start_registry(REGISTRIES[1], free_port(), home)
    client = registry_client(target.url)
    for index in range(TARGET_PADDING):
        padding = {"type": "record", "name": f"Padding{index}", "fields": [{"name": f"f{index}", "type": "long"}]}
        client.register_schema(f"bench-padding-{index}", Schema(json.dumps(padding), "AVRO"))
    return Registries(source, target)


def stop_registries(home: Path) -> None:
    """Stop the registries :func:`start_registries` started under ``home``."""
    for name in REGISTRIES:
        stop_registry(name, home)


def registry_lines(registries: Registries) -> tuple[str, ...]:
    """The flow lines that give both clusters the bench's registries (``{source}`` and ``{target}`` to fill in)."""
    return (
        f"{{source}}.schema.registry.url = {registries.source.url}",
        f"{{target}}.schema.registry.url = {registries.target.url}",
    )


def latest_id(registry: LocalRegistry, subject: str) -> int:
    """The id of ``subject``'s latest version on ``registry``."""
    schema_id = registry_client(registry.url).get_latest_version(subject).schema_id
    if schema_id is None:
        raise RuntimeError(f"{registry.url}: {subject} has no id")
    return int(schema_id)


class AvroValues:
    """``values(i)``: the framed Avro value of record ``i`` of ``topic``, about ``size`` bytes (a random ``payload``
    makes up the size: incompressible, different for every record).  Creating it registers :data:`ORDER_SCHEMA`
    under ``{topic}-value`` on ``registry`` through AvroSerializer; :attr:`schema_id` is the id it got there."""

    def __init__(self, registry: LocalRegistry, topic: str, size: int) -> None:
        self.parsed = fastavro.parse_schema(ORDER_SCHEMA)
        self.block = os.urandom(size + 65536)
        self.payload_size = 0
        self.payload_size = max(0, size - len(self.body(0)) - 5 - 2)  # 2: the payload's length, as an Avro varint
        serializer = AvroSerializer(registry_client(registry.url), json.dumps(ORDER_SCHEMA), conf=TOPIC_SUBJECTS)
        framed = serializer(self.record(0), SerializationContext(topic, MessageField.VALUE))
        self.schema_id: int = _ID.unpack_from(framed, 1)[0]
        self.frame = b"\0" + _ID.pack(self.schema_id)
        if framed != self(0):
            raise RuntimeError("the bench's Avro framing differs from AvroSerializer's")

    def record(self, number: int) -> dict[str, Any]:
        """Record ``number`` as AvroSerializer is given it."""
        start = (number * 7919) % 65536
        return {
            "order": number,
            "customer": f"customer-{number % 1000}",
            "amount_cents": (number * 37) % 10_000,
            "currency": ("EUR", "USD", "GBP")[number % 3],
            "payload": self.block[start : start + self.payload_size],
        }

    def body(self, number: int) -> bytes:
        """Record ``number`` as fastavro writes it, unframed."""
        out = io.BytesIO()
        fastavro.schemaless_writer(out, self.parsed, self.record(number))
        return out.getvalue()

    def __call__(self, number: int) -> bytes:
        return self.frame + self.body(number)


def decoded_values(
    bootstrap: str, topic: str, partition: int, registry: LocalRegistry, count: int
) -> list[dict[str, Any]]:
    """The first ``count`` values of ``topic``-``partition`` (fewer if there are fewer after 30 s), decoded by
    AvroDeserializer with the schemas of ``registry`` alone."""
    deserializer = AvroDeserializer(registry_client(registry.url), conf=TOPIC_SUBJECTS)
    context = SerializationContext(topic, MessageField.VALUE)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-avro-decode", "enable.auto.commit": False})
    messages: list[Message] = []
    try:
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 30
        while len(messages) < count and time.monotonic() < deadline:
            messages += [m for m in consumer.consume(count - len(messages), 1) if m.error() is None]
    finally:
        consumer.close()
    return [deserializer(m.value(), context) for m in messages]


_PARSED = fastavro.parse_schema(ORDER_SCHEMA)


def masked_record(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` (of :data:`ORDER_SCHEMA`) as :data:`AVRO_MASK_CHAIN` leaves it: its masked fields set to their
    type's empty value."""
    return {**record, "customer": "", "amount_cents": 0}


def masked_reframed(messages: list[Record], schema_id: int) -> list[Record]:
    """What a copy through :data:`AVRO_MASK_CHAIN` holds of ``messages`` (values framed with :data:`ORDER_SCHEMA`)
    when its schema has ``schema_id`` on the target: each value decoded here with fastavro, its masked fields set to
    their type's empty value, encoded again and framed with ``schema_id`` (bind it with :func:`functools.partial`)."""
    frame = b"\0" + _ID.pack(schema_id)
    out: list[Record] = []
    for message in messages:
        value = message.value()
        assert value is not None, "every value of the bench's Avro topics is framed Avro"
        record = fastavro.schemaless_reader(io.BytesIO(value[5:]), _PARSED, None)
        assert isinstance(record, dict), "ORDER_SCHEMA is a record"
        body = io.BytesIO()
        fastavro.schemaless_writer(body, _PARSED, masked_record(record))
        out.append(Expected(message, value=frame + body.getvalue()))
    return out
