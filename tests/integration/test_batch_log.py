"""The batch log's scan against a real broker: it reads every transaction the broker acknowledged before the scan,
even while the transaction's markers are not written yet (a read_committed client's watermark is then below it)."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from airmirror.replication.spark.batch_log import log_watermarks, scan_log
from tests.kafka_helpers import await_partition, create_topic

pytestmark = pytest.mark.integration


def test_a_scan_reads_up_to_the_high_watermark_not_the_last_stable_offset(clusters, prefix):
    a = clusters["a"].bootstrap
    log_topic = f"{prefix}.batch-log"
    create_topic(a, log_topic)
    producer = Producer({"bootstrap.servers": a, "transactional.id": f"{prefix}-writer"})
    await_partition(producer, log_topic, 0)
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(3):
        producer.produce(log_topic, b"runs-%d" % i, f"runs-{i}".encode(), partition=0)
    producer.flush(30)
    committed_view = Consumer(
        {"bootstrap.servers": a, "group.id": f"{prefix}-probe", "isolation.level": "read_committed"}
    )
    try:
        assert committed_view.get_watermark_offsets(TopicPartition(log_topic, 0), timeout=10, cached=False) == (0, 0)
    finally:
        committed_view.close()
    assert log_watermarks({"bootstrap.servers": a}, log_topic) == (0, 3)

    commit = threading.Timer(2.0, producer.commit_transaction)
    commit.start()
    try:
        scanned = [(key, value, offset) for key, value, offset in scan_log({"bootstrap.servers": a}, log_topic, 0)]
    finally:
        commit.join()
    assert scanned == [(f"runs-{i}".encode(), b"runs-%d" % i, i) for i in range(3)]
