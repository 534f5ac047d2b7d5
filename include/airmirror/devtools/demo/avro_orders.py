"""The demo's Avro topic: orders framed by confluent-kafka's AvroSerializer against cluster ``a``'s schema registry,
and a consumer on cluster ``b`` that decodes their copies with cluster ``b``'s registry only.

* :func:`produce_avro_orders` writes orders to :data:`~airmirror.devtools.demo.sample_data.AVRO_TOPIC`: plain
  ``customer-N`` keys, values in Avro (:data:`ORDER_SCHEMA`), which the serializer registers under
  ``orders-avro-value`` on the source registry and frames with that registry's id.
* :func:`register_local_schema` gives cluster ``b``'s registry a schema of its own first, so the orders' schema gets
  another id there: the copies on ``b`` decode only because airmirror rewrote each record's schema id.
* :func:`decode_orders` reads a topic from its start with AvroDeserializer, which asks only the registry it is given
  for the schemas.

Needs confluent-kafka's schema-registry extras (``authlib``, ``fastavro``: the ``dev`` extra), so only the demo's
main module imports it; the sample producer does not.
"""

from __future__ import annotations

import json
import struct
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from airmirror.devtools.demo.sample_data import AVRO_TOPIC, CUSTOMERS
from airmirror.devtools.local_registry.clients import TOPIC_SUBJECTS, registry_client

ORDER_SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "airmirror.demo",
        "fields": [
            {"name": "order", "type": "long"},
            {"name": "customer", "type": "int"},
            {"name": "amount_cents", "type": "int"},
            {"name": "currency", "type": {"type": "enum", "name": "Currency", "symbols": ["EUR", "USD", "GBP"]}},
        ],
    }
)
LOCAL_SUBJECT = "inventory-value"
"""The subject of cluster ``b``'s own schema (:func:`register_local_schema`)."""
LOCAL_SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Stock",
        "namespace": "airmirror.demo.b",
        "fields": [{"name": "sku", "type": "string"}, {"name": "units", "type": "int"}],
    }
)
_FRAME = struct.Struct(">bI")


@dataclass(frozen=True)
class DecodedOrder:
    """One record of an Avro orders topic, as a consumer decoded it: where it is, the schema id its value names, and
    the order."""

    partition: int
    offset: int
    schema_id: int
    order: dict[str, Any]


def avro_order(number: int) -> dict[str, Any]:
    """Order ``number`` as the Avro topic holds it."""
    return {
        "order": number,
        "customer": number % CUSTOMERS,
        "amount_cents": (number * 37) % 10_000,
        "currency": ("EUR", "USD", "GBP")[number % 3],
    }


def produce_avro_orders(bootstrap: str, registry_url: str, first: int, count: int) -> None:
    """Produce orders ``first .. first + count - 1`` to :data:`AVRO_TOPIC`, values serialized by AvroSerializer
    against ``registry_url`` (which registers :data:`ORDER_SCHEMA` under the topic's value subject)."""
    serializer = AvroSerializer(registry_client(registry_url), ORDER_SCHEMA, conf=TOPIC_SUBJECTS)
    context = SerializationContext(AVRO_TOPIC, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    for number in range(first, first + count):
        order = avro_order(number)
        producer.produce(AVRO_TOPIC, serializer(order, context), f"customer-{order['customer']}".encode())
        producer.poll(0)
    if producer.flush(60):
        raise KafkaException(f"{AVRO_TOPIC}: orders still undelivered after 60 s")


def register_local_schema(registry_url: str) -> int:
    """Register cluster ``b``'s own schema (:data:`LOCAL_SUBJECT`) on ``registry_url``; its id (the same again on a
    later call)."""
    schema_id: int = registry_client(registry_url).register_schema(LOCAL_SUBJECT, Schema(LOCAL_SCHEMA, "AVRO"))
    return schema_id


def latest_schema_id(registry_url: str, subject: str) -> int:
    """The id of the latest version of ``subject`` on ``registry_url``."""
    schema_id = registry_client(registry_url).get_latest_version(subject).schema_id
    if schema_id is None:
        raise ValueError(f"{registry_url}: the latest version of {subject} has no id")
    return schema_id


def decode_orders(bootstrap: str, topic: str, registry_url: str, count: int, timeout: float = 30) -> list[DecodedOrder]:
    """The first ``count`` committed records of ``topic`` (fewer if there are fewer after ``timeout`` seconds), their
    values decoded by AvroDeserializer with the schemas of ``registry_url`` only; sorted by partition and offset.
    Raises what the deserializer raises for a value it cannot decode (a schema id the registry does not know)."""
    deserializer = AvroDeserializer(registry_client(registry_url), conf=TOPIC_SUBJECTS)
    context = SerializationContext(topic, MessageField.VALUE)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "airmirror-demo-avro-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    decoded: list[DecodedOrder] = []
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        deadline = time.monotonic() + timeout
        while len(decoded) < count and time.monotonic() < deadline:
            for message in consumer.consume(min(500, count - len(decoded)), 0.5):
                if message.error() is not None:
                    raise KafkaException(message.error())
                partition, offset, value = message.partition(), message.offset(), message.value()
                if partition is None or offset is None or value is None:
                    raise ValueError(f"{topic}: a record without partition, offset or value")
                schema_id = _FRAME.unpack_from(value)[1]
                decoded.append(DecodedOrder(partition, offset, schema_id, deserializer(value, context)))
    finally:
        consumer.close()
    return sorted(decoded, key=lambda d: (d.partition, d.offset))


def decoded_orders_lines(
    target_bootstrap: str, source_registry: str, target_registry: str, remote_topic: str, shown: int = 5
) -> list[str]:
    """What the demo prints after its run: the value schema's id on each registry, and the first ``shown`` records of
    ``remote_topic`` on the target, decoded with ``target_registry`` alone."""
    source_id = latest_schema_id(source_registry, f"{AVRO_TOPIC}-value")
    target_id = latest_schema_id(target_registry, f"{remote_topic}-value")
    lines = [
        f"== Avro orders on cluster b, decoded with cluster b's schema registry only ({target_registry})",
        f"value schema: id {source_id} on a ({AVRO_TOPIC}-value), id {target_id} on b ({remote_topic}-value)",
    ]
    for record in decode_orders(target_bootstrap, remote_topic, target_registry, shown):
        lines.append(f"{remote_topic}-{record.partition}@{record.offset}  schema id {record.schema_id}  {record.order}")
    return lines
