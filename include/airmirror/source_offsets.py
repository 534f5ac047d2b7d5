"""Ask the source cluster for the offsets the planner needs, for many partitions at once.

All queries use ``read_committed``: the end offset is the last stable offset, so a plan never reaches into
an open transaction.  ``until`` is resolved with the broker's offsets-for-times: the first offset whose
timestamp is at or after the given time, or the end when every record is older.
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from airmirror.errors import ReplicationFailure
from airmirror.model import PartitionKey
from airmirror.planner import PartitionOffsets

REQUEST_TIMEOUT_S = 30.0


def list_offsets(admin: AdminClient, keys: Iterable[PartitionKey], spec: OffsetSpec) -> dict[PartitionKey, int]:
    """One ListOffsets round for every partition with the same spec."""
    requests = {TopicPartition(k.topic, k.partition): spec for k in keys}
    if not requests:
        return {}
    futures = admin.list_offsets(
        requests, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=REQUEST_TIMEOUT_S
    )
    offsets: dict[PartitionKey, int] = {}
    for tp, future in futures.items():
        try:
            offsets[PartitionKey(tp.topic, tp.partition)] = future.result().offset
        except KafkaException as error:
            raise ReplicationFailure(f"cannot list offsets of {tp.topic}-{tp.partition}: {error}") from error
    return offsets


def partition_offsets(
    admin: AdminClient, keys: list[PartitionKey], until_ms: int | None = None, start_ms: int | None = None
) -> dict[PartitionKey, PartitionOffsets]:
    """Log start, last stable offset and, when asked, the offsets of ``until_ms`` and ``start_ms``."""
    starts = list_offsets(admin, keys, OffsetSpec.earliest())
    ends = list_offsets(admin, keys, OffsetSpec.latest())
    untils = offsets_for_time(admin, keys, until_ms, ends)
    start_points = offsets_for_time(admin, keys, start_ms, ends)
    return {
        key: PartitionOffsets(starts[key], ends[key], untils.get(key), start_points.get(key)) for key in keys
    }


def offsets_for_time(
    admin: AdminClient, keys: list[PartitionKey], timestamp_ms: int | None, ends: dict[PartitionKey, int]
) -> dict[PartitionKey, int]:
    """First offset at or after ``timestamp_ms`` per partition (the end when every record is older)."""
    if timestamp_ms is None:
        return {}
    found = list_offsets(admin, keys, OffsetSpec.for_timestamp(timestamp_ms))
    return {key: offset if offset >= 0 else ends[key] for key, offset in found.items()}
