"""The range reader against a real broker when the partition ends below the planned end (a new leader whose
high watermark lags, follower fetching, a truncated log): it waits instead of ending the range early."""

from __future__ import annotations

import threading

import pytest

from airmirror.replication.spark import range_reader
from airmirror.replication.spark.range_reader import RangeReader
from tests.kafka_helpers import create_topic, produce, sample_records

pytestmark = pytest.mark.integration


def read_all(reader: RangeReader) -> list[int]:
    return [message.offset() for messages in reader.messages() for message in messages]


def test_end_of_partition_below_the_plan_waits_for_the_missing_records(clusters, prefix):
    a = clusters["a"].bootstrap
    topic = f"{prefix}.lagging"
    create_topic(a, topic)
    produce(a, topic, 0, sample_records(10, "early"))
    late = threading.Timer(3.0, produce, (a, topic, 0, sample_records(5, "late")))
    with RangeReader({"bootstrap.servers": a}, topic, 0, 0, 15) as reader:
        late.start()
        try:
            offsets = read_all(reader)
        finally:
            late.join()
        assert offsets == list(range(15)) and reader.reached == 15


def test_log_ending_below_the_plan_ends_the_range_where_the_log_ends(clusters, prefix, monkeypatch):
    a = clusters["a"].bootstrap
    topic = f"{prefix}.truncated"
    create_topic(a, topic)
    produce(a, topic, 0, sample_records(10, "kept"))
    monkeypatch.setattr(range_reader, "EARLY_END_WAIT_S", 2.0)
    with RangeReader({"bootstrap.servers": a}, topic, 0, 0, 15) as reader:
        assert read_all(reader) == list(range(10))
        assert (reader.reached, reader.end) == (10, 10)
