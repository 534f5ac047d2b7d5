"""Sample topics for the demo: keyed orders with headers, a compacted customers table, and orders in Avro (produced by
:mod:`airmirror.devtools.demo.avro_orders`)."""

from __future__ import annotations

import json
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

ORDERS_TOPIC = "orders"
CUSTOMERS_TOPIC = "customers"
AVRO_TOPIC = "orders-avro"
CUSTOMERS = 1000


def create_sample_topics(bootstrap: str) -> None:
    """Create the demo topics on the source cluster if they are missing."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=30).topics
    wanted = [
        NewTopic(ORDERS_TOPIC, 6, 1, config={"retention.ms": str(7 * 24 * 3600 * 1000)}),
        NewTopic(CUSTOMERS_TOPIC, 3, 1, config={"cleanup.policy": "compact"}),
        NewTopic(AVRO_TOPIC, 3, 1),
    ]
    missing = [t for t in wanted if t.topic not in existing]
    for future in admin.create_topics(missing).values() if missing else []:
        future.result()


def produce_orders(bootstrap: str, first: int, count: int) -> None:
    """Produce orders ``first .. first + count - 1`` (JSON values, customer keys, two headers)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    now = int(time.time() * 1000)
    for i in range(first, first + count):
        customer = i % CUSTOMERS
        body = {"order": i, "customer": customer, "amount_cents": (i * 37) % 10_000}
        producer.produce(
            ORDERS_TOPIC,
            json.dumps(body).encode(),
            f"customer-{customer}".encode(),
            timestamp=now,
            headers=[("source", b"airmirror-demo"), ("schema", b"order.v1")],
        )
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(60)


def consume_as_group(bootstrap: str, group: str, topic: str, count: int) -> int:
    """Consume about ``count`` records of ``topic`` as consumer group ``group`` and commit (a demo consumer
    part-way through the topic, whose offsets the flow translates for failover)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumed = 0
    try:
        consumer.subscribe([topic])
        while consumed < count:
            messages = consumer.consume(min(1000, count - consumed), 10)
            if not messages:
                break
            consumed += len([m for m in messages if m.error() is None])
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return consumed


def produce_customers(bootstrap: str) -> None:
    """One upsert per customer into the compacted customers topic."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    for c in range(CUSTOMERS):
        producer.produce(CUSTOMERS_TOPIC, json.dumps({"customer": c, "tier": c % 3}).encode(), f"customer-{c}".encode())
    producer.flush(60)
