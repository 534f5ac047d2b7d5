"""The split of ``airmirror.task.max.buffer.bytes`` between reader prefetch, handed-over batches and producer
queue (task_buffer's contract: the shares sum to at most the setting), and client settings kept within it."""

from __future__ import annotations

import logging

import pytest

from airmirror.config.flow_settings import TASK_BUFFER_CLIENT_KEYS
from airmirror.errors import InputError
from airmirror.replication.spark.range_reader import FETCH_QUEUE_BACKOFF_MS, reader_config
from airmirror.replication.spark.task_buffer import (
    HANDOVER_COPIES,
    MAX_BATCH_RECORDS,
    RECORD_OVERHEAD_BYTES,
    TaskBuffer,
    bounded,
)

MIB = 1024 * 1024
SETTINGS = [16 * MIB, 16 * MIB + 1, 100_000_000, 256 * MIB, 3 * 1024 * MIB + 7, 64 * 1024 * MIB]


@pytest.mark.parametrize("max_bytes", SETTINGS)
@pytest.mark.proves("task_writer rule 8")
def test_the_shares_sum_to_at_most_the_setting(max_bytes: int) -> None:
    buffer = TaskBuffer(max_bytes)
    assert buffer.total <= max_bytes
    reader = buffer.fetch_bytes + buffer.prefetch_bytes + buffer.prefetch_records * RECORD_OVERHEAD_BYTES
    producer = buffer.producer_bytes + buffer.producer_records * RECORD_OVERHEAD_BYTES
    assert reader <= max_bytes // 4 and buffer.handover_bytes <= max_bytes // 4 and producer <= max_bytes // 2


def test_the_default_split_of_256_mib() -> None:
    buffer = TaskBuffer()
    assert buffer.total == 256 * MIB
    assert buffer.consumer_limits() == {
        "fetch.max.bytes": 16 * MIB,
        "max.partition.fetch.bytes": 16 * MIB,
        "queued.max.messages.kbytes": 16 * 1024,
        "queued.min.messages": 65_536,
        "message.max.bytes": 16 * MIB,
    }
    assert buffer.producer_limits() == {
        "queue.buffering.max.kbytes": 64 * 1024,
        "queue.buffering.max.messages": 131_072,
        "message.max.bytes": 20 * MIB,
    }


@pytest.mark.parametrize("max_bytes", SETTINGS)
def test_limits_stay_within_librdkafkas_ranges_and_one_fetch_holds_a_1_mb_batch(max_bytes: int) -> None:
    consumer, producer = TaskBuffer(max_bytes).consumer_limits(), TaskBuffer(max_bytes).producer_limits()
    assert 1_000_000 <= consumer["fetch.max.bytes"] <= 1_000_000_000
    assert consumer["message.max.bytes"] <= consumer["fetch.max.bytes"]
    assert 1 <= consumer["queued.max.messages.kbytes"] <= 2_097_151
    assert 1 <= consumer["queued.min.messages"] <= 10_000_000
    assert producer["message.max.bytes"] <= producer["queue.buffering.max.kbytes"] * 1024


@pytest.mark.parametrize("largest", [0, 100, 1024, 100_000, 1_000_000, 20 * MIB, 1024 * MIB])
@pytest.mark.parametrize("max_bytes", SETTINGS)
@pytest.mark.proves("task_writer rule 8")
def test_a_handed_over_batch_fits_its_share_in_all_its_copies(max_bytes: int, largest: int) -> None:
    buffer = TaskBuffer(max_bytes)
    records = buffer.batch_records(largest)
    assert 1 <= records <= MAX_BATCH_RECORDS
    assert records == 1 or records * HANDOVER_COPIES * (largest + RECORD_OVERHEAD_BYTES) <= buffer.handover_bytes


def test_small_values_get_full_batches_and_large_ones_fewer_records() -> None:
    buffer = TaskBuffer()
    assert buffer.batch_records(100) == MAX_BATCH_RECORDS
    assert buffer.batch_records(1_000_000) == 67
    assert buffer.batch_records(1024 * MIB) == 1


def test_client_settings_keep_the_lower_value_and_warn_when_theirs_is_higher(caplog: pytest.LogCaptureFixture) -> None:
    limits = {"fetch.max.bytes": 1000, "queued.min.messages": 50}
    with caplog.at_level(logging.WARNING):
        settings = {"fetch.max.bytes": "4000", "queued.min.messages": "20", "sasl.password": "s3cret"}
        result = bounded(settings, limits, "lower.consumer")
    assert result == {"fetch.max.bytes": 1000, "queued.min.messages": 20, "sasl.password": "s3cret"}
    assert len(caplog.records) == 1
    warning = caplog.records[0].getMessage()
    assert "lower.consumer" in warning and "fetch.max.bytes = 4000" in warning
    assert "airmirror.task.max.buffer.bytes" in warning
    assert "s3cret" not in caplog.text


def test_a_lowered_setting_warns_once_per_client_key_and_value_in_a_process(caplog: pytest.LogCaptureFixture) -> None:
    limits = {"fetch.max.bytes": 1000}
    with caplog.at_level(logging.WARNING):
        for _ in range(3):  # three batches of one flow
            assert bounded({"fetch.max.bytes": "4000"}, limits, "once.consumer") == {"fetch.max.bytes": 1000}
        bounded({"fetch.max.bytes": "5000"}, limits, "once.consumer")  # another value
        bounded({"fetch.max.bytes": "4000"}, limits, "twice.consumer")  # another client
        bounded({"fetch.max.bytes": "4000"}, limits, "once.consumer")
    warned = [record.getMessage().split(" exceeds")[0] for record in caplog.records]
    assert warned == [
        "once.consumer setting fetch.max.bytes = 4000",
        "once.consumer setting fetch.max.bytes = 5000",
        "twice.consumer setting fetch.max.bytes = 4000",
    ]


def test_unset_client_settings_take_the_limit_silently(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert bounded({}, {"fetch.max.bytes": 1000}, "a.consumer") == {"fetch.max.bytes": 1000}
    assert not caplog.records


@pytest.mark.parametrize("value", ["lots", "-5", "1.5", "\u00b2"])
def test_a_setting_from_a_connection_that_is_not_an_integer_is_refused_naming_it(value: str) -> None:
    """An Airflow connection's extra is resolved at run time, past load-time validation: bounded checks it."""
    with pytest.raises(InputError, match=r"b\.producer setting queue\.buffering\.max\.kbytes") as error:
        bounded({"queue.buffering.max.kbytes": value}, {"queue.buffering.max.kbytes": 1000}, "b.producer")
    assert error.value.exit_code == 2


def test_the_keys_bounded_are_the_ones_config_validates_at_load() -> None:
    buffer = TaskBuffer()
    assert set(buffer.consumer_limits()) == TASK_BUFFER_CLIENT_KEYS["consumer"]
    assert set(buffer.producer_limits()) == TASK_BUFFER_CLIENT_KEYS["producer"]


def test_the_reader_keeps_a_flows_lower_fetch_and_lowers_message_max_bytes_with_it() -> None:
    config = reader_config({"fetch.max.bytes": "1048576", "bootstrap.servers": "a:9092"}, TaskBuffer())
    assert (config["fetch.max.bytes"], config["message.max.bytes"], config["max.partition.fetch.bytes"]) == (
        1_048_576,
        1_048_576,
        16 * MIB,
    )
    assert config["queued.max.messages.kbytes"] == 16 * 1024 and config["isolation.level"] == "read_committed"


def test_the_reader_fetches_again_soon_after_a_full_queue_unless_the_flow_says_otherwise() -> None:
    assert (
        reader_config({"bootstrap.servers": "a:9092"}, TaskBuffer())["fetch.queue.backoff.ms"]
        == FETCH_QUEUE_BACKOFF_MS
        == 10
    )
    own = reader_config({"bootstrap.servers": "a:9092", "fetch.queue.backoff.ms": "250"}, TaskBuffer())
    assert own["fetch.queue.backoff.ms"] == "250"
