"""The clients one run shares: a producer warmed before the copy job is the one the run's writes then use."""

from __future__ import annotations

from pathlib import Path

from airmirror.config import FlowConfig, load_config
from airmirror.kafka.clients import producer_client, shared_clients, warm_producer
from airmirror.kafka.records import WRITE_QUEUE_RECORDS, warm_writer


def flow(tmp_path: Path) -> FlowConfig:
    path = tmp_path / "mm2.properties"
    # nothing listens on these ports: creating a producer only starts librdkafka's connection attempts
    path.write_text(
        "clusters = a, b\na.bootstrap.servers = 127.0.0.1:9\nb.bootstrap.servers = 127.0.0.1:9\na->b.enabled = true\n"
    )
    return load_config(path, env={}).flow("a->b")


def test_a_warmed_producer_is_the_one_later_writes_get(tmp_path: Path) -> None:
    config = flow(tmp_path)
    with shared_clients():
        warm_writer(config)
        warmed = producer_client(config, config.target, WRITE_QUEUE_RECORDS)
        assert producer_client(config, config.target, WRITE_QUEUE_RECORDS) is warmed
        assert producer_client(config, config.source, WRITE_QUEUE_RECORDS) is not warmed


def test_warming_outside_a_shared_block_creates_nothing_to_keep(tmp_path: Path) -> None:
    config = flow(tmp_path)
    warm_producer(config, config.target, WRITE_QUEUE_RECORDS)
    assert producer_client(config, config.target, WRITE_QUEUE_RECORDS) is not producer_client(
        config, config.target, WRITE_QUEUE_RECORDS
    )
