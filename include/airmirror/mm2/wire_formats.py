"""MirrorMaker 2's record formats: heartbeats, checkpoints and offset syncs, byte for byte.

Kafka protocol types, all big-endian: INT16, INT32, INT64, and STRING = INT16 byte length + UTF-8 bytes
(a null STRING, length -1, is not allowed).  Layouts (MM2's ``Heartbeat``, ``Checkpoint``, ``OffsetSync``):

* Heartbeat (topic ``heartbeats``): key ``sourceClusterAlias STRING, targetClusterAlias STRING``;
  value ``version INT16 = 0, timestamp INT64`` (epoch milliseconds).
* Checkpoint (topic ``{source}.checkpoints.internal``): key ``group STRING, topic STRING, partition INT32``
  (``topic`` is the topic's name on the cluster the checkpoint is written to); value
  ``version INT16 = 0, upstreamOffset INT64, offset INT64, metadata STRING`` (``offset`` = downstream).
* OffsetSync (topic ``mm2-offset-syncs.{alias}.internal``): key ``topic STRING, partition INT32``;
  value ``upstreamOffset INT64, offset INT64``.  It has no version.

Decoding is strict: an unknown version, a truncated field, a null string or bytes left over after the last
field raise :class:`WireFormatError`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

HEARTBEAT_VERSION = 0
CHECKPOINT_VERSION = 0

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_STRING_MAX_BYTES = 0x7FFF


class WireFormatError(ValueError):
    """Bytes that are not a valid record of the expected MM2 format."""


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    if len(data) > _STRING_MAX_BYTES:
        raise ValueError(f"string of {len(data)} bytes is longer than a Kafka STRING allows ({_STRING_MAX_BYTES})")
    return _INT16.pack(len(data)) + data


class _Reader:
    """Reads Kafka protocol fields from ``data`` in order."""

    def __init__(self, data: bytes, what: str) -> None:
        self._data = data
        self._position = 0
        self._what = what

    def _take(self, size: int) -> bytes:
        end = self._position + size
        if end > len(self._data):
            raise WireFormatError(f"{self._what}: truncated at byte {self._position} of {len(self._data)}")
        chunk = self._data[self._position : end]
        self._position = end
        return chunk

    def int16(self) -> int:
        value: int = _INT16.unpack(self._take(_INT16.size))[0]
        return value

    def int32(self) -> int:
        value: int = _INT32.unpack(self._take(_INT32.size))[0]
        return value

    def int64(self) -> int:
        value: int = _INT64.unpack(self._take(_INT64.size))[0]
        return value

    def string(self) -> str:
        length = self.int16()
        if length < 0:
            raise WireFormatError(f"{self._what}: null string where a string is required")
        try:
            return self._take(length).decode("utf-8")
        except UnicodeDecodeError as error:
            raise WireFormatError(f"{self._what}: string is not UTF-8: {error}") from error

    def version(self, supported: int) -> None:
        version = self.int16()
        if version != supported:
            raise WireFormatError(f"{self._what}: unsupported version {version} (supported: {supported})")

    def end(self) -> None:
        if self._position != len(self._data):
            raise WireFormatError(f"{self._what}: {len(self._data) - self._position} unexpected trailing bytes")


@dataclass(frozen=True)
class Heartbeat:
    """A heartbeat emitted by flow ``source_alias->target_alias`` at ``timestamp`` (epoch ms)."""

    source_alias: str
    target_alias: str
    timestamp: int

    def key(self) -> bytes:
        return _string(self.source_alias) + _string(self.target_alias)

    def value(self) -> bytes:
        return _INT16.pack(HEARTBEAT_VERSION) + _INT64.pack(self.timestamp)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Heartbeat:
        keys, values = _Reader(key, "heartbeat key"), _Reader(value, "heartbeat value")
        source, target = keys.string(), keys.string()
        keys.end()
        values.version(HEARTBEAT_VERSION)
        timestamp = values.int64()
        values.end()
        return cls(source, target, timestamp)


@dataclass(frozen=True)
class Checkpoint:
    """Group ``group`` has consumed ``topic``-``partition`` up to ``upstream_offset`` on the source cluster;
    on the cluster holding the checkpoint it resumes at ``downstream_offset`` of ``topic`` (the name there)."""

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def key(self) -> bytes:
        return _string(self.group) + _string(self.topic) + _INT32.pack(self.partition)

    def value(self) -> bytes:
        return (
            _INT16.pack(CHECKPOINT_VERSION)
            + _INT64.pack(self.upstream_offset)
            + _INT64.pack(self.downstream_offset)
            + _string(self.metadata)
        )

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Checkpoint:
        keys, values = _Reader(key, "checkpoint key"), _Reader(value, "checkpoint value")
        group, topic, partition = keys.string(), keys.string(), keys.int32()
        keys.end()
        values.version(CHECKPOINT_VERSION)
        upstream, downstream, metadata = values.int64(), values.int64(), values.string()
        values.end()
        return cls(group, topic, partition, upstream, downstream, metadata)


@dataclass(frozen=True)
class OffsetSync:
    """Upstream offset ``upstream_offset`` of ``topic``-``partition`` was copied to ``downstream_offset``."""

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def key(self) -> bytes:
        return _string(self.topic) + _INT32.pack(self.partition)

    def value(self) -> bytes:
        return _INT64.pack(self.upstream_offset) + _INT64.pack(self.downstream_offset)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> OffsetSync:
        keys, values = _Reader(key, "offset-sync key"), _Reader(value, "offset-sync value")
        topic, partition = keys.string(), keys.int32()
        keys.end()
        upstream, downstream = values.int64(), values.int64()
        values.end()
        return cls(topic, partition, upstream, downstream)
