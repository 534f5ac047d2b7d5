"""Field transforms on Avro keys and values framed with a registry id (rule 5 of :mod:`airmirror.config.transforms`).

Contract:

1. **Which sides.**  A key or value in Confluent's framing (magic byte 0, a 4-byte schema id) whose id the *target*
   cluster's registry serves as an ``AVRO`` record schema without references.  The copy rewrites schema ids before
   it runs the transforms (:mod:`airmirror.replication.spark.task_writer`), so the id a field step sees is the
   target's (the schema sync and :mod:`airmirror.schemas.record_ids` rule 3 put it there), under ``translate`` and
   ``keep`` alike; a flow whose ids are ``off`` decodes no Avro, and its field steps fail on framed bytes as on any
   other non-JSON side.  A side framed with an id that is not Avro (Protobuf, JSON Schema), or that the registry does
   not serve, fails the step (:class:`AvroFailure`), as a side that is not JSON does.
2. **Read.**  The payload after the frame is decoded with the schema (fastavro): the record as a ``dict``, which the
   field steps edit as they edit a JSON object.
3. **The derived schema** is the side's schema as the field steps that ran on the record change it, in their order
   (:func:`derived_schema`): ``MaskField`` keeps it (a masked field keeps its type); ``ReplaceField`` keeps the fields
   ``include`` names (all when empty), drops those of ``exclude`` and renames per ``renames``; ``InsertField`` appends
   each inserted field as an optional one (``["null", T]``, default null, as Connect's ``InsertField`` adds optional
   fields): the topic and the static value ``string``, the partition ``int``, the timestamp ``long`` with logical
   type ``timestamp-millis``; ``HeaderFrom`` with ``move`` drops its fields.  As in Connect on a ``Struct``, a
   masked or moved field the schema does not have, and an inserted one it has already, fail the step.  The record
   keeps its schema's name, namespace and documentation.
4. **Write.**  The edited record is encoded with the derived schema, which is registered on the target registry under
   the remote topic's subject (``{remote topic}-key`` / ``-value``, Connect's ``TopicNameStrategy``; registering is
   idempotent, so a retried chunk gets the same id), and framed with its id.  A schema the registry refuses
   (incompatible with the subject's versions) fails the step naming the subject.  Without registering
   (``register=False``, what ``airmirror verify`` asks) the id is looked up instead, and a derived schema the registry
   does not hold fails the step: no copy was written with it.
5. **Cost.**  Schemas are asked for once per id, derived schemas once per (id, steps that ran) and registered once per
   task; each record pays a decode and an encode.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro

from airmirror.config.transforms import FieldEdit, Side, Step, StepKind
from airmirror.errors import RegistryRefusal
from airmirror.schemas.framing import FRAME_LENGTH, MAGIC_ID
from airmirror.schemas.registry_client import RegistryClient, SchemaText


class AvroFailure(ValueError):
    """A side framed with a registry id that a field step cannot read or write as Avro (rules 1, 3 and 4)."""


INSERTED_TYPES: dict[str, Any] = {
    "topic": "string",
    "partition": "int",
    "timestamp": {"type": "long", "logicalType": "timestamp-millis"},
    "static": "string",
}
"""The Avro type of each kind of field ``InsertField`` inserts (made optional, rule 3)."""


def framed_id(data: bytes | None) -> int | None:
    """The schema id ``data`` is framed with, ``None`` when it is not framed."""
    if data is None or len(data) < FRAME_LENGTH or data[0] != MAGIC_ID:
        return None
    return int.from_bytes(data[1:FRAME_LENGTH], "big")


@dataclass(frozen=True)
class AvroSide:
    """A side read as Avro: its schema id and the schema as JSON (rule 2)."""

    schema_id: int
    schema: dict[str, Any]


class AvroFields:
    """One task's Avro sides, on the target registry ``registry`` (rules 1-5); ``register`` is ``False`` for a
    reader that must not change the registry (``airmirror verify``)."""

    def __init__(self, registry: RegistryClient, *, register: bool = True) -> None:
        self.registry = registry
        self.register = register
        self._schemas: dict[int, tuple[dict[str, Any], Any] | str] = {}
        """Schema id -> its JSON and parsed form, or why it is no Avro record schema."""
        self._written: dict[tuple[int, str, tuple[Step, ...]], tuple[int, Any]] = {}
        """(schema id, subject, steps that ran) -> the derived schema's id and parsed form."""

    def read(self, data: bytes) -> tuple[AvroSide, dict[str, Any]] | None:
        """The side and its record when ``data`` is framed (rule 2); ``None`` when it is not.  Raises
        :class:`AvroFailure` when the id names no Avro record schema or the payload does not decode."""
        schema_id = framed_id(data)
        if schema_id is None:
            return None
        schema, parsed = self._schema(schema_id)
        try:
            record = fastavro.schemaless_reader(io.BytesIO(data[FRAME_LENGTH:]), parsed, None)
        except Exception as error:  # fastavro raises what the bytes make it raise
            raise AvroFailure(f"cannot decode the Avro of schema id {schema_id}: {error}") from error
        return AvroSide(schema_id, schema), record  # type: ignore[return-value]

    def write(self, side: AvroSide, subject: str, steps: Sequence[Step], record: dict[str, Any]) -> bytes:
        """``record`` encoded with the derived schema of ``side`` after ``steps`` and framed with its target id
        (rules 3 and 4)."""
        schema_id, parsed = self._derived(side, subject, tuple(steps))
        buffer = io.BytesIO()
        buffer.write(bytes([MAGIC_ID]) + schema_id.to_bytes(4, "big"))
        try:
            fastavro.schemaless_writer(buffer, parsed, record)
        except Exception as error:  # fastavro's errors for a value its schema does not take
            raise AvroFailure(f"cannot write the record in Avro with schema id {schema_id}: {error}") from error
        return buffer.getvalue()

    def _schema(self, schema_id: int) -> tuple[dict[str, Any], Any]:
        known = self._schemas.get(schema_id)
        if known is None:
            known = self._schemas[schema_id] = self._fetched(schema_id)
        if isinstance(known, str):
            raise AvroFailure(known)
        return known

    def _fetched(self, schema_id: int) -> tuple[dict[str, Any], Any] | str:
        text = self.registry.schema(schema_id)
        where = f"schema id {schema_id} of the registry {self.registry!r}"
        if text is None:
            return f"{where} is not there"
        if text.schema_type != "AVRO" or text.references:
            kind = "has references" if text.references else f"is {text.schema_type}"
            return f"{where} {kind}: field transforms read Avro record schemas without references"
        schema = json.loads(text.schema)
        if not isinstance(schema, dict) or schema.get("type") != "record":
            return f"{where} is no Avro record schema"
        return schema, fastavro.parse_schema(schema)

    def _derived(self, side: AvroSide, subject: str, steps: tuple[Step, ...]) -> tuple[int, Any]:
        cached = self._written.get((side.schema_id, subject, steps))
        if cached is not None:
            return cached
        derived = derived_schema(side.schema, steps)
        parsed = fastavro.parse_schema(derived)
        if derived == side.schema:
            schema_id = side.schema_id
        else:
            text = SchemaText(json.dumps(derived, separators=(",", ":")))
            schema_id = self._registered(subject, text)
        self._written[(side.schema_id, subject, steps)] = (schema_id, parsed)
        return schema_id, parsed

    def _registered(self, subject: str, text: SchemaText) -> int:
        if not self.register:
            found = self.registry.lookup(subject, text)
            if found is None:
                raise AvroFailure(f"the registry {self.registry!r} holds no derived schema under {subject}")
            return found[0]
        try:
            return self.registry.register(subject, text)
        except RegistryRefusal as refused:
            if refused.status not in (409, 422):
                raise
            raise AvroFailure(f"the derived schema was refused under {subject}: {refused}") from refused


def derived_schema(schema: dict[str, Any], steps: Iterable[Step]) -> dict[str, Any]:
    """``schema`` (an Avro record schema as JSON) as the field ``steps`` change it, in order (rule 3); raises
    :class:`AvroFailure` where Connect fails the step on a ``Struct``."""
    fields: list[dict[str, Any]] = list(schema["fields"])
    for step in steps:
        edit = step.fields
        assert edit is not None, "only field steps change a schema"
        names = [field["name"] for field in fields]
        if step.kind is StepKind.MASK_FIELD:
            _require_fields(step, edit.masked, names)
        elif step.kind is StepKind.REPLACE_FIELD:
            fields = _replaced(fields, edit)
        elif step.kind is StepKind.INSERT_FIELD:
            taken = [name for name, _ in edit.inserted if name in names]
            if taken:
                raise AvroFailure(f"{step.alias}: the schema has a field {taken[0]!r} already")
            fields += [
                {"name": name, "type": ["null", INSERTED_TYPES[what]], "default": None} for name, what in edit.inserted
            ]
        elif step.kind is StepKind.HEADER_FROM and edit.move:
            moved = [name for name, _ in edit.to_headers]
            _require_fields(step, moved, names)
            fields = [field for field in fields if field["name"] not in moved]
    return {**schema, "fields": fields}


def _replaced(fields: list[dict[str, Any]], edit: FieldEdit) -> list[dict[str, Any]]:
    renames = dict(edit.renames)
    return [
        {**field, "name": renames.get(field["name"], field["name"])}
        for field in fields
        if field["name"] not in edit.exclude and (not edit.include or field["name"] in edit.include)
    ]


def _require_fields(step: Step, wanted: Iterable[str], names: list[str]) -> None:
    missing = [name for name in wanted if name not in names]
    if missing:
        raise AvroFailure(f"{step.alias}: the schema has no field {missing[0]!r}")


def subject_of(topic: str, side: Side) -> str:
    """The subject of ``topic``'s key or value (Connect's ``TopicNameStrategy``)."""
    return f"{topic}-{side.value.lower()}"
