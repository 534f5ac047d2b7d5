"""``airmirror_kafka_ranges``: a PySpark Python data source that reads planned Kafka offset ranges.

Why a Python data source rather than Spark's Kafka connector (``spark-sql-kafka-0-10``):
- exactness: each Spark partition is exactly one planned ``[start, end)`` range of one Kafka partition,
  read with ``read_committed`` and stopped at the planned bound even when the range ends in aborted records
  or transaction markers (the connector's offset-range logic and ``failOnDataLoss`` handling do not give
  that guarantee for transactional topics);
- one partition per task keeps source order, which the transactional writer needs, and lets the writer find
  its range from the Spark partition id;
- one Kafka client (librdkafka via confluent-kafka) serves reads, writes, the CLI and the tests, with one
  translation of the MM2 client settings, instead of a second JVM client with its own settings;
- data flows as Arrow record batches end to end, and no extra jars need to match the Spark build.

Options: ``consumer`` (JSON object: librdkafka settings for the source cluster) and ``ranges`` (JSON list of
``[topic, partition, start, end]``).  The DataFrame has :data:`RECORD_SPARK_SCHEMA`; partition ``i`` of the
DataFrame holds range ``i``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from airmirror.replication.range_reader import read_range
from airmirror.replication.record_schema import RECORD_SPARK_SCHEMA

SOURCE_NAME = "airmirror_kafka_ranges"


class RangePartition(InputPartition):
    """One planned range: ``(topic, partition, start, end)``."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end


class KafkaRangeReader(DataSourceReader):
    """Reads every planned range as one Spark partition."""

    def __init__(self, consumer: dict[str, str], ranges: Sequence[Sequence]) -> None:
        self.consumer = consumer
        self.ranges = [RangePartition(str(t), int(p), int(s), int(e)) for t, p, s, e in ranges]

    def partitions(self) -> Sequence[InputPartition]:
        return self.ranges

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        yield from read_range(
            self.consumer, partition.topic, partition.partition, partition.start, partition.end
        )


class KafkaRangeSource(DataSource):
    """Batch source over explicit Kafka offset ranges (see the module docstring)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return RECORD_SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaRangeReader(json.loads(self.options["consumer"]), json.loads(self.options["ranges"]))
