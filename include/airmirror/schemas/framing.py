"""Confluent's framing of schema-registry serialized keys and values: where a record names its schema.

Contract:

* A framed payload starts with the magic byte ``0`` and the schema id as a 4-byte big-endian unsigned integer;
  what follows (Protobuf's message indexes, then the serialized data) is never read or changed here.
* Newer confluent-kafka serializers may name the schema in a header instead, ``__key_schema_id`` or
  ``__value_schema_id``: magic ``0`` plus the 4-byte id, or magic ``1`` plus a 16-byte GUID, then (Protobuf) the
  message indexes.  Only the id form carries an id this module rewrites; a GUID is left as it is.
* A leading zero byte alone does not make a payload framed: whether a topic's keys or values are framed is
  decided by the caller (:mod:`airmirror.schemas.record_ids`); here, a payload shorter than five bytes or with
  another first byte is simply not framed.
* Rewriting changes bytes 1-4 and nothing else, so every other byte, and the length, stay as they were.
"""

from __future__ import annotations

import struct
from enum import Enum

MAGIC_ID = 0
MAGIC_GUID = 1
_ID = struct.Struct(">I")
FRAME_LENGTH = 1 + _ID.size


class Side(str, Enum):
    """Which part of a record a schema frames."""

    KEY = "key"
    VALUE = "value"

    @property
    def header(self) -> str:
        """The header confluent-kafka's header serializer writes this side's schema id or GUID into."""
        return f"__{self.value}_schema_id"


HEADERS = {Side.KEY.header: Side.KEY, Side.VALUE.header: Side.VALUE}


def framed_id(data: bytes | None) -> int | None:
    """The schema id ``data`` names in its frame, ``None`` when it is not framed."""
    if data is None or len(data) < FRAME_LENGTH or data[0] != MAGIC_ID:
        return None
    schema_id: int = _ID.unpack_from(data, 1)[0]
    return schema_id


def with_id(data: bytes, schema_id: int) -> bytes:
    """``data`` (framed) naming ``schema_id`` instead; every other byte unchanged."""
    if framed_id(data) is None:
        raise ValueError("not a framed payload")
    return data[:1] + _ID.pack(schema_id) + data[FRAME_LENGTH:]
