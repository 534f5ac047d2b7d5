"""Field transforms on Avro keys and values framed with a registry id (rule 5 of :mod:`airmirror.config.transforms`).

Contract:

1. **Which sides.**  A key or value in Confluent's framing (magic byte 0, a 4-byte schema id) whose id the *source*
   cluster's registry serves as an ``AVRO`` record schema without references, in a flow whose schema ids are
   ``translate`` or ``keep`` (both clusters have a registry); a flow whose ids are ``off`` decodes no Avro, and its
   field steps fail on framed bytes as on any other non-JSON side.  A side framed with an id that is not Avro
   (Protobuf, JSON Schema), or that the registry does not serve, fails the step (:class:`AvroFailure`), as a side
   that is not JSON does; an id the registry did not serve is asked for again once
   :data:`~airmirror.schemas.record_ids.UNKNOWN_ID_TTL_S` has passed.
2. **Read.**  The payload after the frame is decoded with the schema (fastavro): the record as a ``dict``, which the
   field steps edit as they edit a JSON object.  The chain runs before the copy rewrites schema ids, so a record a
   step drops never has its ids mapped (:mod:`airmirror.schemas.record_ids`).
3. **The derived schema** is the side's schema as the field steps that ran on the record change it, in their order
   (:func:`derived_schema`): ``MaskField`` keeps it (a masked field keeps its type); ``ReplaceField`` keeps the fields
   ``include`` names (all when empty), drops those of ``exclude`` and renames per ``renames``; ``InsertField`` appends
   each inserted field as an optional one (``["null", T]``, default null, as Connect's ``InsertField`` adds optional
   fields): the topic and the static value ``string``, the partition ``int``, the timestamp ``long`` with logical
   type ``timestamp-millis``; ``HeaderFrom`` with ``move`` drops its fields.  As in Connect on a ``Struct``, a
   masked or moved field the schema does not have, and an inserted one it has already, fail the step.  The record
   keeps its schema's name, namespace and documentation.
4. **Write.**  The edited record is encoded with the derived schema, registered on the *target* registry under the
   remote topic's subject (``{remote topic}-key`` / ``-value``, Connect's ``TopicNameStrategy``; registering is
   idempotent, so a retried chunk gets the same id), and framed with its id; the copy's id rewrite leaves such a side
   as it is (:attr:`~airmirror.replication.spark.record_transforms.RecordTransforms.settled`).  A schema the registry
   refuses (incompatible with the subject's versions) fails the step naming the subject.  Under ``keep`` (the
   target's ids are the source's) the side is framed with its own id when the schema is unchanged, and a derived
   schema, which no source id names, fails the step.  Without registering (``register=False``, what ``airmirror
   verify`` asks) the id is looked up instead, and a derived schema the registry does not hold fails the step: no
   copy was written with it.
5. **The schema sync** copies no source subject of a side whose every record a schema-changing step rewrites
   (:func:`~airmirror.config.transforms.reschemaed_sides`): that subject on the target holds the derived schemas
   alone, so the source's evolution never meets them in a compatibility check.
6. **Cost.**  Schemas are asked for once per id, derived schemas once per (id, steps that ran) and registered once per
   task; each record pays a decode and an encode.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro

from airmirror.config.transforms import FieldEdit, Step, StepKind
from airmirror.errors import RegistryRefusal
from airmirror.schemas.framing import FRAME_LENGTH, MAGIC_ID, framed_id
from airmirror.schemas.framing import Side as FramedSide
from airmirror.schemas.record_ids import UNKNOWN_ID_TTL_S
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


@dataclass(frozen=True)
class AvroSide:
    """A side read as Avro: its schema id and the schema as JSON (rule 2)."""

    schema_id: int
    schema: dict[str, Any]


class AvroFields:
    """One task's Avro sides (rules 1-4): read with the ``source`` registry, derived schemas registered on (or, when
    ``register`` is ``False``, looked up in) the ``target`` one; ``derives`` is ``False`` under ``keep``, where no
    derived schema may be registered.  :meth:`close` closes both clients."""

    def __init__(
        self, source: RegistryClient, target: RegistryClient, *, register: bool = True, derives: bool = True
    ) -> None:
        self.source, self.target = source, target
        self.register, self.derives = register, derives
        self._schemas: dict[int, tuple[dict[str, Any], Any]] = {}
        """Schema id -> its JSON and parsed form."""
        self._unusable: dict[int, tuple[str, float]] = {}
        """Schema id -> why it is no Avro record schema here, and when that was found (``time.monotonic()``)."""
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

    def close(self) -> None:
        self.source.close()
        self.target.close()

    def _schema(self, schema_id: int) -> tuple[dict[str, Any], Any]:
        known = self._schemas.get(schema_id)
        if known is not None:
            return known
        told = self._unusable.get(schema_id)
        if told is not None and time.monotonic() - told[1] < UNKNOWN_ID_TTL_S:
            raise AvroFailure(told[0])
        found = self._fetched(schema_id)
        if isinstance(found, str):
            self._unusable[schema_id] = (found, time.monotonic())
            raise AvroFailure(found)
        self._unusable.pop(schema_id, None)
        self._schemas[schema_id] = found
        return found

    def _fetched(self, schema_id: int) -> tuple[dict[str, Any], Any] | str:
        text = self.source.schema(schema_id)
        where = f"schema id {schema_id} of the registry {self.source!r}"
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
        try:
            parsed = fastavro.parse_schema(derived)
        except Exception as error:  # fastavro's errors for a schema that no longer parses (a named type cut off)
            raise AvroFailure(f"the derived schema of schema id {side.schema_id} is not valid Avro: {error}") from error
        if not self.derives:
            if derived != side.schema:
                raise AvroFailure(
                    "under airmirror.schema.ids = keep the target's ids are the source's, and no source id names "
                    f"the schema these steps derive from schema id {side.schema_id}: use translate"
                )
            schema_id = side.schema_id
        else:
            schema_id = self._registered(subject, SchemaText(json.dumps(derived, separators=(",", ":"))))
        self._written[(side.schema_id, subject, steps)] = (schema_id, parsed)
        return schema_id, parsed

    def _registered(self, subject: str, text: SchemaText) -> int:
        if not self.register:
            found = self.target.lookup(subject, text)
            if found is None:
                raise AvroFailure(f"the registry {self.target!r} holds no derived schema under {subject}")
            return found[0]
        try:
            return self.target.register(subject, text)
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


def subject_of(topic: str, side: FramedSide) -> str:
    """The subject of ``topic``'s key or value (Connect's ``TopicNameStrategy``)."""
    return f"{topic}-{side.value}"
