"""Confluent's framing of schema-registry serialized keys and values: where a record names its schema.

Contract:

* A framed payload starts with the magic byte ``0`` and the schema id as a 4-byte big-endian unsigned integer;
  what follows (Protobuf's message indexes, then the serialized data) is never read or changed here.
* Newer confluent-kafka serializers may name the schema in a header instead, ``__key_schema_id`` or
  ``__value_schema_id``: magic ``0`` plus the 4-byte id, or magic ``1`` plus a 16-byte GUID, then (Protobuf) the
  message indexes.  :func:`id_slots` finds the id form; :func:`guid_slots` the GUID form, whose translation
  (:mod:`airmirror.schemas.record_ids`) asks both registries.
* A leading zero byte alone does not make a payload framed: whether a topic's keys or values are framed is
  decided by the caller (:mod:`airmirror.schemas.record_ids`); here, a payload shorter than five bytes or with
  another first byte is simply not framed.
* Rewriting changes bytes 1-4 and nothing else, so every other byte, and the length, stay as they were.
* **Where a record names its schemas** (:func:`id_slots`, the one statement of it, for the copy job and for
  ``airmirror verify``): given the sides a topic frames, the key's and the value's frames, except a side whose schema
  a header names (an id or a GUID: confluent-kafka's deserializers read the header first, so that side's payload is
  not framed, even when it starts with a zero byte); then the id form of every schema-id header, in header order.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Collection, Mapping, Sequence
from enum import Enum
from typing import NamedTuple

MAGIC_ID = 0
MAGIC_GUID = 1
_ID = struct.Struct(">I")
FRAME_LENGTH = 1 + _ID.size
GUID_FRAME_LENGTH = 1 + 16
HeaderValue = str | bytes | None
"""A header's value as confluent-kafka types it (a consumer returns bytes or ``None``)."""


class Side(str, Enum):
    """Which part of a record a schema frames."""

    KEY = "key"
    VALUE = "value"

    @property
    def header(self) -> str:
        """The header confluent-kafka's header serializer writes this side's schema id or GUID into."""
        return f"__{self.value}_schema_id"


HEADERS = {Side.KEY.header: Side.KEY, Side.VALUE.header: Side.VALUE}
NO_SIDES: frozenset[Side] = frozenset()


def framed_id(data: HeaderValue) -> int | None:
    """The schema id ``data`` names in its frame, ``None`` when it is not framed (or not bytes)."""
    if not isinstance(data, bytes) or len(data) < FRAME_LENGTH or data[0] != MAGIC_ID:
        return None
    schema_id: int = _ID.unpack_from(data, 1)[0]
    return schema_id


def with_id(data: bytes, schema_id: int) -> bytes:
    """``data`` (framed) naming ``schema_id`` instead; every other byte unchanged."""
    if framed_id(data) is None:
        raise ValueError("not a framed payload")
    return data[:1] + _ID.pack(schema_id) + data[FRAME_LENGTH:]


class IdSlot(NamedTuple):
    """Where a record names a schema id: ``side``, ``header`` (the index of the header that holds it; -1 for the
    side's payload) and the id."""

    side: Side
    header: int
    schema_id: int


def id_slots(
    framed: Collection[Side],
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, HeaderValue]] | None,
) -> list[IdSlot]:
    """The schema ids a record of a topic framed on ``framed`` names (see the module docstring)."""
    listed = headers or ()
    named = {HEADERS[name] for name, data in listed if name in HEADERS and data is not None}
    slots = []
    for side, payload in ((Side.KEY, key), (Side.VALUE, value)):
        if side in framed and side not in named and (schema_id := framed_id(payload)) is not None:
            slots.append(IdSlot(side, -1, schema_id))
    for index, (name, data) in enumerate(listed):
        header_side = HEADERS.get(name)
        if header_side is not None and isinstance(data, bytes) and (schema_id := framed_id(data)) is not None:
            slots.append(IdSlot(header_side, index, schema_id))
    return slots


class GuidSlot(NamedTuple):
    """A schema-id header in the GUID form: ``side``, the header's index and the GUID (canonical text form)."""

    side: Side
    header: int
    guid: str


def guid_slots(headers: Sequence[tuple[str, HeaderValue]] | None) -> list[GuidSlot]:
    """The schema-id headers of ``headers`` in the GUID form, in header order."""
    slots = []
    for index, (name, data) in enumerate(headers or ()):
        side = HEADERS.get(name)
        if side is not None and isinstance(data, bytes) and len(data) >= GUID_FRAME_LENGTH and data[0] == MAGIC_GUID:
            slots.append(GuidSlot(side, index, str(uuid.UUID(bytes=data[1:GUID_FRAME_LENGTH]))))
    return slots


def with_guid(data: bytes, guid: str) -> bytes:
    """Header ``data`` (GUID form) naming ``guid`` instead; every other byte unchanged."""
    return data[:1] + uuid.UUID(guid).bytes + data[GUID_FRAME_LENGTH:]


def slot_data(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, HeaderValue]] | None, slot: IdSlot
) -> HeaderValue:
    """The bytes that hold ``slot``'s id in a record."""
    if slot.header >= 0:
        return (headers or ())[slot.header][1]
    return key if slot.side is Side.KEY else value


def with_ids(
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, HeaderValue]] | None,
    ids: Mapping[IdSlot, int],
) -> tuple[bytes | None, bytes | None, list[tuple[str, HeaderValue]] | None]:
    """The record with the id of each slot of ``ids`` replaced by ``ids[slot]``, every other byte as it was; the
    headers come back as a list (``None`` stays ``None``)."""
    rewritten: list[tuple[str, HeaderValue]] | None = None if headers is None else list(headers)
    for slot, schema_id in ids.items():
        if slot.header >= 0 and rewritten is not None:
            name, data = rewritten[slot.header]
            if isinstance(data, bytes):
                rewritten[slot.header] = (name, with_id(data, schema_id))
        elif slot.side is Side.KEY and key is not None:
            key = with_id(key, schema_id)
        elif slot.side is Side.VALUE and value is not None:
            value = with_id(value, schema_id)
    return key, value, rewritten
