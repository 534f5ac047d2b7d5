"""MM2 wire formats against hand-built byte vectors (Kafka protocol: big-endian, STRING = INT16 length + UTF-8)."""

from __future__ import annotations

import struct

import pytest

from airmirror.mm2.wire_formats import Checkpoint, Heartbeat, OffsetSync, WireFormatError
from tests.mirror_helpers import kafka_string


def test_heartbeat_matches_literal_bytes():
    heartbeat = Heartbeat("a", "b", 1_700_000_000_000)
    assert heartbeat.key() == bytes.fromhex("0001 61 0001 62")
    assert heartbeat.value() == bytes.fromhex("0000 0000018bcfe56800")
    assert Heartbeat.decode(heartbeat.key(), heartbeat.value()) == heartbeat


def test_checkpoint_matches_literal_bytes():
    checkpoint = Checkpoint("g1", "a.orders", 2, 100, 42, "m")
    assert checkpoint.key() == bytes.fromhex("0002 6731 0008 612e6f7264657273 00000002")
    assert checkpoint.value() == bytes.fromhex("0000 0000000000000064 000000000000002a 0001 6d")


def test_checkpoint_matches_struct_built_bytes_with_utf8_and_empty_metadata():
    checkpoint = Checkpoint("grüppe", "primary.topic-ü", 7, 2**40, 12345, "")
    key = kafka_string("grüppe") + kafka_string("primary.topic-ü") + struct.pack(">i", 7)
    value = struct.pack(">hqq", 0, 2**40, 12345) + struct.pack(">h", 0)
    assert (checkpoint.key(), checkpoint.value()) == (key, value)
    assert Checkpoint.decode(key, value) == checkpoint


def test_offset_sync_has_no_version():
    sync = OffsetSync("orders", 3, 1000, 990)
    key = kafka_string("orders") + struct.pack(">i", 3)
    value = struct.pack(">qq", 1000, 990)
    assert (sync.key(), sync.value()) == (key, value)
    assert OffsetSync.decode(key, value) == sync


def test_heartbeat_round_trips_struct_built_bytes():
    key = kafka_string("us-west") + kafka_string("us-east")
    value = struct.pack(">hq", 0, 123)
    assert Heartbeat.decode(key, value) == Heartbeat("us-west", "us-east", 123)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (kafka_string("a") + kafka_string("b"), struct.pack(">hq", 1, 5), "unsupported version 1"),
        (kafka_string("a") + kafka_string("b"), struct.pack(">h", 0) + b"\x00\x01", "truncated"),
        (kafka_string("a") + kafka_string("b") + b"\x00", struct.pack(">hq", 0, 5), "trailing"),
        (kafka_string("a") + struct.pack(">h", -1), struct.pack(">hq", 0, 5), "null string"),
        (struct.pack(">h", 2) + b"\xff\xfe" + kafka_string("b"), struct.pack(">hq", 0, 5), "not UTF-8"),
    ],
)
def test_heartbeat_decoding_rejects_malformed_bytes(key: bytes, value: bytes, message: str):
    with pytest.raises(WireFormatError, match=message):
        Heartbeat.decode(key, value)


def test_checkpoint_decoding_rejects_unknown_version():
    checkpoint = Checkpoint("g", "t", 0, 1, 1)
    with pytest.raises(WireFormatError, match="version 3"):
        Checkpoint.decode(checkpoint.key(), struct.pack(">h", 3) + checkpoint.value()[2:])


def test_strings_longer_than_int16_are_refused():
    with pytest.raises(ValueError, match="longer than a Kafka STRING"):
        Checkpoint("g" * 40_000, "t", 0, 0, 0).key()
