"""The raw pipe copier: one Python process, one confluent-kafka consumer and producer, no guarantees.

``python raw_pipe.py SOURCE_BOOTSTRAP TOPIC PARTITIONS TARGET_BOOTSTRAP TARGET_TOPIC`` copies every partition
from offset 0 to its end (read_committed) into the same partition of the target topic, keeping key, value,
headers and timestamp, and prints ``{"records": n, "first_s": t0, "done_s": t1}`` (seconds since start).
The upper bound of what a single librdkafka consumer->producer loop in Python can do on this machine.
"""

from __future__ import annotations

import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition


def main(source: str, topic: str, partitions: int, target: str, target_topic: str) -> None:
    started = time.monotonic()
    consumer = Consumer(
        {
            "bootstrap.servers": source,
            "group.id": "airmirror-bench-raw-pipe",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": target,
            "linger.ms": 20,
            "batch.size": 1024 * 1024,
            "queue.buffering.max.kbytes": 1024 * 1024,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    open_partitions = set(range(partitions))
    copied = 0
    first = None
    produce = producer.produce
    while open_partitions:
        for m in consumer.consume(10000, 0.1):
            error = m.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    open_partitions.discard(m.partition())
                    continue
                raise KafkaException(error)
            if first is None:
                first = time.monotonic()
            while True:
                try:
                    produce(
                        target_topic,
                        m.value(),
                        m.key(),
                        partition=m.partition(),  # type: ignore[arg-type]  # a consumed record has one
                        timestamp=m.timestamp()[1],
                        headers=m.headers(),
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            copied += 1
        producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("records undelivered after 120 s")
    done = time.monotonic()
    consumer.close()
    print(json.dumps({"records": copied, "first_s": (first or done) - started, "done_s": done - started}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
