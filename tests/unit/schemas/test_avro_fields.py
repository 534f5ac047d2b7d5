"""Field transforms on Avro sides framed with a registry id (airmirror.schemas.avro_fields), against the in-process
registry stand-in: the derived schema of each field transform, the record written with it, registered once, and
what cannot be read or written."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import fastavro
import pytest

from airmirror.config.transforms import Step
from airmirror.replication.spark.record_transforms import RecordTransforms, TransformFailure
from airmirror.schemas.avro_fields import AvroFields, derived_schema
from airmirror.schemas.registry_client import RegistryClient
from tests.unit.config.test_mirror_config import flow
from tests.unit.schemas.fake_registry import FakeRegistry

T = "org.apache.kafka.connect.transforms."
USER = {
    "type": "record",
    "name": "User",
    "namespace": "acme",
    "doc": "a user",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "password", "type": "string"},
        {"name": "pin", "type": "int"},
        {"name": "avatar", "type": "bytes"},
        {"name": "internal", "type": "boolean"},
        {"name": "email", "type": ["null", "string"], "default": None},
    ],
}
CHAIN = f"""\
a->b.transforms = mask, cut, add
a->b.transforms.mask.type = {T}MaskField$Value
a->b.transforms.mask.fields = password, pin, avatar
a->b.transforms.cut.type = {T}ReplaceField$Value
a->b.transforms.cut.exclude = internal
a->b.transforms.cut.renames = name:login
a->b.transforms.add.type = {T}InsertField$Value
a->b.transforms.add.topic.field = origin
a->b.transforms.add.partition.field = part
a->b.transforms.add.timestamp.field = ts
a->b.transforms.add.static.field = mirror
a->b.transforms.add.static.value = dr
"""


@pytest.fixture
def registry() -> Iterator[FakeRegistry]:
    with FakeRegistry(first_id=40) as fake:
        yield fake


def framed(schema_id: int, schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    out.write(b"\0" + schema_id.to_bytes(4, "big"))
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def decoded(registry: FakeRegistry, data: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """The schema ``data`` is framed with, read from the registry, and the record it decodes to."""
    schema = json.loads(registry.schemas[int.from_bytes(data[1:5], "big")]["schema"])
    return schema, fastavro.schemaless_reader(io.BytesIO(data[5:]), fastavro.parse_schema(schema), None)


def steps(tmp_path, text: str = CHAIN) -> tuple[Step, ...]:
    return flow(tmp_path, text).transform_steps("orders")


def user(**changed: Any) -> dict[str, Any]:
    return {"name": "ann", "password": "x", "pin": 1234, "avatar": b"\x01", "internal": True, "email": None, **changed}


def test_each_field_transform_derives_the_schema_connect_derives_on_a_struct(tmp_path) -> None:
    derived = derived_schema(USER, steps(tmp_path))
    assert {key: derived[key] for key in ("type", "name", "namespace", "doc")} == {
        "type": "record",
        "name": "User",
        "namespace": "acme",
        "doc": "a user",
    }
    assert derived["fields"] == [
        {"name": "login", "type": "string"},
        *USER["fields"][1:4],
        USER["fields"][5],
        {"name": "origin", "type": ["null", "string"], "default": None},
        {"name": "part", "type": ["null", "int"], "default": None},
        {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None},
        {"name": "mirror", "type": ["null", "string"], "default": None},
    ]
    move = f"a->b.transforms = h\na->b.transforms.h.type = {T}HeaderFrom$Value\na->b.transforms.h.fields = email\n"
    move += "a->b.transforms.h.headers = x-email\na->b.transforms.h.operation = move\n"
    assert [f["name"] for f in derived_schema(USER, steps(tmp_path, move))["fields"]] == [
        "name",
        "password",
        "pin",
        "avatar",
        "internal",
    ]


def test_a_chain_writes_the_avro_record_with_its_derived_schema_registered_once(tmp_path, registry) -> None:
    source_id = registry.add("a.orders-value", json.dumps(USER))
    with RegistryClient(registry.access("b")) as client:
        chain = RecordTransforms(steps(tmp_path), "a.orders", 3, AvroFields(client))
        outs = [chain.apply(b"k", framed(source_id, USER, user(pin=i)), None, 1_700_000_000_000) for i in range(3)]
    written = [out[1] for out in outs if out is not None]
    assert len(written) == 3 and len({data[:5] for data in written if data}) == 1
    schema, record = decoded(registry, written[0] or b"")
    assert schema == derived_schema(USER, steps(tmp_path))
    assert registry.subjects["a.orders-value"][-1] == int.from_bytes((written[0] or b"")[1:5], "big") != source_id
    assert record == {
        "login": "ann",
        "password": "",
        "pin": 0,
        "avatar": b"",
        "email": None,
        "origin": "a.orders",
        "part": 3,
        "ts": record["ts"],
        "mirror": "dr",
    }
    assert int(record["ts"].timestamp() * 1000) == 1_700_000_000_000
    registrations = [r for r in registry.requests if r.method == "POST" and r.path.endswith("/versions")]
    assert len(registrations) == 1  # once per task, not per record


def test_a_mask_alone_keeps_the_schema_and_its_id(tmp_path, registry) -> None:
    source_id = registry.add("a.orders-value", json.dumps(USER))
    mask = f"a->b.transforms = m\na->b.transforms.m.type = {T}MaskField$Value\na->b.transforms.m.fields = password\n"
    with RegistryClient(registry.access("b")) as client:
        kept = RecordTransforms(steps(tmp_path, mask), "a.orders", 0, AvroFields(client)).apply(
            None, framed(source_id, USER, user()), None
        )
    assert kept is not None and kept[1] is not None and int.from_bytes(kept[1][1:5], "big") == source_id
    assert decoded(registry, kept[1])[1] == user(password="")


@pytest.mark.parametrize(
    ("chain", "message"),
    [
        (
            f"a->b.transforms = m\na->b.transforms.m.type = {T}MaskField$Value\na->b.transforms.m.fields = nope\n",
            "no field 'nope'",
        ),
        (
            f"a->b.transforms = i\na->b.transforms.i.type = {T}InsertField$Value\n"
            "a->b.transforms.i.topic.field = pin\n",
            "has a field 'pin' already",
        ),
    ],
)
def test_what_connect_fails_on_a_struct_fails_the_step(tmp_path, registry, chain, message) -> None:
    source_id = registry.add("a.orders-value", json.dumps(USER))
    with RegistryClient(registry.access("b")) as client:
        transforms = RecordTransforms(steps(tmp_path, chain), "a.orders", 0, AvroFields(client))
        with pytest.raises(TransformFailure, match=message):
            transforms.apply(None, framed(source_id, USER, user()), None)


def test_a_side_that_is_not_an_avro_record_fails_the_step_and_an_unmapped_one_is_read_as_bytes(
    tmp_path, registry
) -> None:
    protobuf_id = registry.add("a.p-value", 'syntax = "proto3"; message M { string a = 1; }', "PROTOBUF")
    with RegistryClient(registry.access("b")) as client:
        chain = RecordTransforms(steps(tmp_path), "a.orders", 0, AvroFields(client))
        with pytest.raises(TransformFailure, match="is PROTOBUF"):
            chain.apply(None, b"\0" + protobuf_id.to_bytes(4, "big") + b"\x0a\x01x", None)
        with pytest.raises(TransformFailure, match="is not there"):
            chain.apply(None, b"\0\0\0\x03\x99" + b"x", None)
        with pytest.raises(TransformFailure, match="is not JSON"):
            chain.apply(None, framed(protobuf_id, USER, user()), None, avro=False)  # its id unmapped by the copy


def test_a_reader_that_must_not_register_looks_the_derived_schema_up(tmp_path, registry) -> None:
    source_id = registry.add("a.orders-value", json.dumps(USER))
    record = framed(source_id, USER, user())
    with RegistryClient(registry.access("b")) as client:
        with pytest.raises(TransformFailure, match=r"holds no derived schema under a\.orders-value"):
            RecordTransforms(steps(tmp_path), "a.orders", 0, AvroFields(client, register=False)).apply(
                None, record, None
            )
        written = RecordTransforms(steps(tmp_path), "a.orders", 0, AvroFields(client)).apply(None, record, None)
        looked_up = RecordTransforms(steps(tmp_path), "a.orders", 0, AvroFields(client, register=False)).apply(
            None, record, None
        )
    assert written is not None and looked_up is not None and looked_up[1][:5] == written[1][:5]  # type: ignore[index]


def test_a_derived_schema_the_registry_refuses_fails_the_step_naming_the_subject(tmp_path, registry) -> None:
    source_id = registry.add("a.orders-value", json.dumps(USER))
    registry.incompatible["a.orders-value"] = "incompatible with version 1"
    with RegistryClient(registry.access("b")) as client:
        chain = RecordTransforms(steps(tmp_path), "a.orders", 0, AvroFields(client))
        with pytest.raises(TransformFailure, match=r"refused under a\.orders-value"):
            chain.apply(None, framed(source_id, USER, user()), None)
