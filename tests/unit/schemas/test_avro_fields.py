"""Field transforms on Avro sides framed with a registry id (airmirror.schemas.avro_fields), against the in-process
registry stand-ins (``tests/unit/conftest.py``'s ``source`` and ``target``): the derived schema of each field
transform, the record written with it, registered once, and what cannot be read or written."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import fastavro
import pytest

from airmirror.config.transforms import Step
from airmirror.replication.spark.record_transforms import RecordTransforms, TransformFailure
from airmirror.schemas import avro_fields
from airmirror.schemas.avro_fields import AvroFields, derived_schema
from airmirror.schemas.framing import Side as FramedSide
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
a->b.transforms.mask.fields = password, pin
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
def avro(source: FakeRegistry, target: FakeRegistry) -> Iterator[AvroFields]:
    fields = AvroFields(RegistryClient(source.access("a")), RegistryClient(target.access("b")))
    yield fields
    fields.close()


def framed(schema_id: int, schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    out.write(b"\0" + schema_id.to_bytes(4, "big"))
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def decoded(registry: FakeRegistry, data: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """The schema ``data`` is framed with, read from ``registry``, and the record it decodes to."""
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


def test_a_chain_writes_the_avro_record_with_its_derived_schema_registered_once_on_the_target(
    tmp_path, source, target, avro
) -> None:
    source_id = source.add("orders-value", json.dumps(USER))
    chain = RecordTransforms(steps(tmp_path), "a.orders", 3, avro)
    outs = [chain.apply(b"k", framed(source_id, USER, user(pin=i)), None, 1_700_000_000_000) for i in range(3)]
    assert chain.settled == {FramedSide.VALUE}
    written = [out[1] or b"" for out in outs if out is not None]
    assert len(written) == 3 and len({data[:5] for data in written}) == 1
    schema, record = decoded(target, written[0])
    assert schema == derived_schema(USER, steps(tmp_path))
    assert target.subjects["a.orders-value"] == [int.from_bytes(written[0][1:5], "big")]
    assert record == {
        "login": "ann",
        "password": "",
        "pin": 0,
        "avatar": b"\x01",
        "email": None,
        "origin": "a.orders",
        "part": 3,
        "ts": record["ts"],
        "mirror": "dr",
    }
    assert int(record["ts"].timestamp() * 1000) == 1_700_000_000_000
    registrations = [r for r in target.requests if r.method == "POST" and r.path.endswith("/versions")]
    assert len(registrations) == 1  # once per task, not per record
    assert not [r for r in source.requests if r.method == "POST"]  # the source registry is only read


def test_a_mask_keeps_the_schema_registered_under_translate_and_the_id_under_keep(tmp_path, source, target) -> None:
    source_id = source.add("orders-value", json.dumps(USER))
    mask = f"a->b.transforms = m\na->b.transforms.m.type = {T}MaskField$Value\na->b.transforms.m.fields = password\n"
    for derives in (True, False):
        fields = AvroFields(RegistryClient(source.access("a")), RegistryClient(target.access("b")), derives=derives)
        kept = RecordTransforms(steps(tmp_path, mask), "a.orders", 0, fields).apply(
            None, framed(source_id, USER, user()), None
        )
        fields.close()
        assert kept is not None and kept[1] is not None
        assert int.from_bytes(kept[1][1:5], "big") == (target.subjects["a.orders-value"][0] if derives else source_id)
        assert decoded(target if derives else source, kept[1])[1] == user(password="")


def test_under_keep_a_schema_the_steps_change_fails_the_step(tmp_path, source, target) -> None:
    source_id = source.add("orders-value", json.dumps(USER))
    fields = AvroFields(RegistryClient(source.access("a")), RegistryClient(target.access("b")), derives=False)
    with pytest.raises(TransformFailure, match=r"airmirror\.schema\.ids = keep"):
        RecordTransforms(steps(tmp_path), "a.orders", 0, fields).apply(None, framed(source_id, USER, user()), None)
    fields.close()
    assert "a.orders-value" not in target.subjects


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
        (
            f"a->b.transforms = m\na->b.transforms.m.type = {T}MaskField$Value\na->b.transforms.m.fields = avatar\n",
            "cannot mask a bytes",
        ),
    ],
)
def test_what_connect_fails_on_a_struct_fails_the_step(tmp_path, source, avro, chain, message) -> None:
    source_id = source.add("orders-value", json.dumps(USER))
    transforms = RecordTransforms(steps(tmp_path, chain), "a.orders", 0, avro)
    with pytest.raises(TransformFailure, match=message):
        transforms.apply(None, framed(source_id, USER, user()), None)


def test_a_side_that_is_not_an_avro_record_fails_the_step_and_is_asked_for_again_later(
    tmp_path, source, avro, monkeypatch
) -> None:
    protobuf_id = source.add("p-value", 'syntax = "proto3"; message M { string a = 1; }', "PROTOBUF")
    chain = RecordTransforms(steps(tmp_path), "a.orders", 0, avro)
    with pytest.raises(TransformFailure, match="is PROTOBUF"):
        chain.apply(None, b"\0" + protobuf_id.to_bytes(4, "big") + b"\x0a\x01x", None)
    late = framed(source.first_id + 50, USER, user())
    with pytest.raises(TransformFailure, match="is not there"):
        chain.apply(None, late, None)
    source.add("orders-value", json.dumps(USER), schema_id=source.first_id + 50)  # registered late
    with pytest.raises(TransformFailure, match="is not there"):
        chain.apply(None, late, None)  # the miss is remembered for a while
    monkeypatch.setattr(avro_fields, "UNKNOWN_ID_TTL_S", 0.0)
    assert chain.apply(None, late, None) is not None


def test_a_reader_that_must_not_register_looks_the_derived_schema_up(tmp_path, source, target, avro) -> None:
    source_id = source.add("orders-value", json.dumps(USER))
    record = framed(source_id, USER, user())
    reader = AvroFields(RegistryClient(source.access("a")), RegistryClient(target.access("b")), register=False)
    with pytest.raises(TransformFailure, match=r"holds no derived schema under a\.orders-value"):
        RecordTransforms(steps(tmp_path), "a.orders", 0, reader).apply(None, record, None)
    written = RecordTransforms(steps(tmp_path), "a.orders", 0, avro).apply(None, record, None)
    reader = AvroFields(RegistryClient(source.access("a")), RegistryClient(target.access("b")), register=False)
    looked_up = RecordTransforms(steps(tmp_path), "a.orders", 0, reader).apply(None, record, None)
    reader.close()
    assert written is not None and looked_up is not None and looked_up[1][:5] == written[1][:5]  # type: ignore[index]


def test_a_derived_schema_the_registry_refuses_fails_the_step_naming_the_subject(
    tmp_path, source, target, avro
) -> None:
    source_id = source.add("orders-value", json.dumps(USER))
    target.incompatible["a.orders-value"] = "incompatible with version 1"
    chain = RecordTransforms(steps(tmp_path), "a.orders", 0, avro)
    with pytest.raises(TransformFailure, match=r"refused under a\.orders-value"):
        chain.apply(None, framed(source_id, USER, user()), None)
