"""The transform case's data (issue 41): JSON values with personal fields, headers a chain strips, a marker it
filters on, the chains as MM2 file lines, and what a copy through each chain must hold.

The expected copies are worked out here, from the records as consumed, without airmirror's code: a record carrying
:data:`TEST_HEADER` is dropped; of the others, :data:`HEADER_CHAIN` removes the :data:`STRIPPED` headers and appends
:data:`TAG` (:func:`header_chain`); :data:`MASK_CHAIN` empties the :data:`MASKED` string fields of each value,
which stays compact JSON with its fields in order (what Kafka Connect's ``MaskField`` does to a schemaless value).
"""

from __future__ import annotations

import json
import os

from kafka_io import Expected, Header, ProducedHeaders, Record

TEST_EVERY = 10
"""Every tenth record carries the test marker, which the header chain filters out."""
TEST_HEADER = "x-test"
STRIPPED = ("authorization", "x-user-email")
TAG = ("mirrored-by", b"dr")
MASKED = ("email", "password")
_FLOW = "{source}->{target}"

HEADER_CHAIN = (
    f"{_FLOW}.transforms = dropTest, stripPII, tag",
    f"{_FLOW}.transforms.dropTest.type = org.apache.kafka.connect.transforms.Filter",
    f"{_FLOW}.transforms.dropTest.predicate = isTest",
    f"{_FLOW}.predicates = isTest",
    f"{_FLOW}.predicates.isTest.type = org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
    f"{_FLOW}.predicates.isTest.name = {TEST_HEADER}",
    f"{_FLOW}.transforms.stripPII.type = org.apache.kafka.connect.transforms.DropHeaders",
    f"{_FLOW}.transforms.stripPII.headers = {','.join(STRIPPED)}",
    f"{_FLOW}.transforms.tag.type = org.apache.kafka.connect.transforms.InsertHeader",
    f"{_FLOW}.transforms.tag.header = {TAG[0]}",
    f"{_FLOW}.transforms.tag.value.literal = {TAG[1].decode()}",
)
"""Filter + DropHeaders + InsertHeader, flow-prefixed as MM2 reads them (``{source}`` and ``{target}`` to fill in)."""
MASK_CHAIN = (
    f"{_FLOW}.transforms = mask",
    f"{_FLOW}.transforms.mask.type = org.apache.kafka.connect.transforms.MaskField$Value",
    f"{_FLOW}.transforms.mask.fields = {','.join(MASKED)}",
)
MM2_HEADER_CONVERTER = "header.converter = org.apache.kafka.connect.storage.SimpleHeaderConverter"
"""What MM2 needs to run InsertHeader at all: its default header converter, ``ByteArrayConverter``, refuses the
inserted header's string.  It would base64-encode any other header it copies; the header chain leaves none."""


class JsonValues:
    """Record ``i``'s value: a compact JSON object of about ``size`` bytes, its personal fields first and an
    incompressible note after them."""

    def __init__(self, size: int) -> None:
        self.note_size = max(16, size - 120)
        self.block = os.urandom((self.note_size + 65536) // 2 + 1).hex()

    def __call__(self, i: int) -> bytes:
        start = (i * 7919) % 65536
        value = {
            "id": i,
            "user": f"user-{i}",
            "email": f"user{i}@example.com",
            "password": f"secret-{i:08d}",
            "note": self.block[start : start + self.note_size],
        }
        return json.dumps(value, separators=(",", ":")).encode()


def headers(i: int) -> ProducedHeaders:
    """Record ``i``'s headers: the two the header chain strips, and the test marker on every :data:`TEST_EVERY`-th."""
    found: ProducedHeaders = [(STRIPPED[0], b"Bearer token-%d" % i), (STRIPPED[1], b"user%d@example.com" % i)]
    return [*found, (TEST_HEADER, b"1")] if i % TEST_EVERY == 0 else found


def header_chain(headers: list[Header] | None) -> list[Header] | None:
    """What :data:`HEADER_CHAIN` makes of a record's headers: ``None`` when it drops the record (it has the test
    marker), else the headers without the stripped ones and with :data:`TAG` last."""
    if any(name == TEST_HEADER for name, _ in headers or ()):
        return None
    return [*(header for header in headers or () if header[0] not in STRIPPED), TAG]


def through_header_chain(messages: list[Record]) -> list[Record]:
    """What a copy through :data:`HEADER_CHAIN` holds of ``messages``."""
    return [Expected(m, headers=headers) for m in messages if (headers := header_chain(m.headers())) is not None]


def through_mask_chain(messages: list[Record]) -> list[Record]:
    """What a copy through :data:`MASK_CHAIN` holds of ``messages``."""
    return [Expected(m, value=_masked(m.value())) for m in messages]


def _masked(value: bytes | None) -> bytes:
    assert value is not None, "every value of the transform case's topic is a JSON object"
    data = json.loads(value)
    data.update((field, "") for field in MASKED if field in data)
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
