"""Confluent's framing: which payloads name a schema id, and rewriting the id changes bytes 1-4 only."""

from __future__ import annotations

import struct

import pytest

from airmirror.schemas.framing import FRAME_LENGTH, HEADERS, MAGIC_GUID, MAGIC_ID, Side, framed_id, with_id


def frame(schema_id: int, rest: bytes = b"") -> bytes:
    return bytes([MAGIC_ID]) + struct.pack(">I", schema_id) + rest


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (frame(7, b"avro-bytes"), 7),
        (frame(0x01020304), 0x01020304),
        (frame(2**32 - 1, b"x"), 2**32 - 1),
        (frame(7), 7),
    ],
)
def test_a_framed_payload_names_its_big_endian_id(data: bytes, expected: int) -> None:
    assert framed_id(data) == expected


@pytest.mark.parametrize(
    "data",
    [
        None,
        b"",
        b"\x00",
        b"\x00\x00\x00\x07",
        bytes([MAGIC_GUID]) + b"\x00\x00\x00\x07payload",
        b"\x02\x00\x00\x00\x07",
        b"{json}",
    ],
)
def test_null_short_or_other_magic_payloads_are_not_framed(data: bytes | None) -> None:
    assert framed_id(data) is None


def test_rewriting_changes_the_id_and_nothing_else() -> None:
    protobuf_indexes = b"\x04\x02\x06\x00"
    payload = frame(5, protobuf_indexes + b"\x0a\x03abc")
    rewritten = with_id(payload, 1_000_001)
    assert framed_id(rewritten) == 1_000_001
    assert len(rewritten) == len(payload)
    assert rewritten[0] == MAGIC_ID
    assert rewritten[FRAME_LENGTH:] == payload[FRAME_LENGTH:]
    assert rewritten[FRAME_LENGTH : FRAME_LENGTH + len(protobuf_indexes)] == protobuf_indexes


def test_a_bare_frame_is_rewritten_too() -> None:
    assert with_id(frame(1), 2) == frame(2)


@pytest.mark.parametrize("data", [b"", b"\x00\x00", bytes([MAGIC_GUID]) + bytes(16), b"plain text"])
def test_rewriting_an_unframed_payload_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError, match="not a framed payload"):
        with_id(data, 3)


def test_the_header_id_form_is_a_frame_and_the_guid_form_is_not() -> None:
    id_form = frame(42, b"\x00")
    guid_form = bytes([MAGIC_GUID]) + bytes(range(16))
    assert framed_id(id_form) == 42
    assert framed_id(guid_form) is None
    assert with_id(id_form, 43) == frame(43, b"\x00")


def test_the_headers_confluent_kafka_writes_name_their_side() -> None:
    assert (Side.KEY.header, Side.VALUE.header) == ("__key_schema_id", "__value_schema_id")
    assert HEADERS == {"__key_schema_id": Side.KEY, "__value_schema_id": Side.VALUE}
