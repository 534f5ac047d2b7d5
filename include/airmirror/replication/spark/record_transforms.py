"""What a flow's transform chain does to one record on its way to the target (rules 4 and 5 of
:mod:`airmirror.config.transforms`).

Contract: :class:`RecordTransforms` runs the steps that :meth:`~airmirror.config.transforms.TransformChain.for_topic`
kept for one remote topic, in order, on a record's key, value and headers (raw bytes, confluent-kafka's header
list of ``(name, bytes | None)``), with Kafka Connect's meaning:

* ``Filter`` drops the record: :meth:`RecordTransforms.apply` returns ``None`` and the steps after it do not run.
  The copy then writes nothing for the record; its source offset is consumed all the same, so the range's progress
  passes it and its offset-sync runs skip it (:mod:`airmirror.replication.spark.task_writer`).
* ``InsertHeader`` appends a header (Connect's ``Headers.add``: a header of the same name stays).
* ``DropHeaders`` removes every header whose name it lists.
* ``MaskField``, ``ReplaceField`` and ``InsertField`` edit the key or value as a JSON object, as Connect edits a
  schemaless ``Map`` (:data:`~airmirror.config.transforms.CLASS_DOCS`); ``HeaderFrom`` appends headers of its fields
  (rule 5 of :mod:`airmirror.config.transforms` gives their bytes) and, for ``move``, removes them.  The side is
  parsed once, when the first field step reaches it, and written once, after the last step (compact JSON, its
  fields in their order, new ones last): a record no field step changes (none, or HeaderFrom's ``copy`` only)
  keeps its bytes.  JSON is read and written by :mod:`~airmirror.replication.spark.record_codec`; a side framed
  with a registry id, when the chain has the flow's registries (:class:`~airmirror.schemas.avro_fields.AvroFields`),
  is read as Avro and written with the derived schema of the field steps that ran on it.  A side that is neither
  a JSON object nor an Avro record raises :class:`TransformFailure` naming the step and why (the caller names the
  record).
* A step with a predicate runs only where the predicate holds (where it does not, with ``negate``):
  ``HasHeaderKey`` holds when some header has the name, ``RecordIsTombstone`` when the value is null.  Topic
  predicates were decided per topic before (``TopicNameMatches``).

A record's timestamp passes unchanged; InsertField's ``timestamp.field`` and ``partition.field`` take the record's
timestamp and partition, ``topic.field`` the remote topic as the step sees it (its :attr:`Step.topic
<airmirror.config.transforms.Step.topic>`: the name before the routers that follow it).  The remote partition's
``topic`` (the name after every router) names the subjects of the Avro a chain writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, time
from decimal import Decimal
from operator import itemgetter
from typing import Any

from airmirror.config.transforms import FieldEdit, Predicate, PredicateKind, Side, Step, StepKind
from airmirror.replication.spark.own_transforms import RecordTest, StepFailure, condition_test, python_call
from airmirror.replication.spark.record_codec import GivenHeaders, Headers, header_list, read_json, written_json
from airmirror.schemas.avro_fields import AvroFailure, AvroFields, AvroSide, subject_of
from airmirror.schemas.framing import NO_SIDES
from airmirror.schemas.framing import Side as FramedSide

_UNPARSED = object()


class _AvroRecord:
    """A side read as Avro while the chain runs: the record (replaced by each field step's edit), its schema and
    the field steps that ran on it, which decide the schema it is written with."""

    __slots__ = ("avro", "record", "side", "steps")

    def __init__(self, avro: AvroSide, record: dict[str, Any], side: FramedSide) -> None:
        self.avro, self.record, self.side = avro, record, side
        self.steps: list[Step] = []


class TransformFailure(ValueError):
    """A step could not process a record (rule 5 of :mod:`airmirror.config.transforms`); the message names the step,
    ``step_class`` is its Connect class (``org.apache.kafka.connect.transforms.MaskField$Value``)."""

    def __init__(self, step: Step, message: str) -> None:
        super().__init__(f"transform '{step.alias}' ({step.class_name}) {message}")
        self.step_class = f"{step.kind.value}${step.fields.side.value}" if step.fields else step.kind.value


def record_test(predicate: Predicate, topic: str = "", partition: int = 0) -> RecordTest:
    """Whether a record predicate holds, as a test of a record's key, value, headers and timestamp (those of
    ``topic``-``partition``, the remote partition)."""
    if predicate.kind is PredicateKind.RECORD_IS_TOMBSTONE:
        return lambda key, value, headers, timestamp: value is None
    if predicate.kind is PredicateKind.HAS_HEADER_KEY:
        name = predicate.header

        def has_header(key: bytes | None, value: bytes | None, headers: Headers | None, timestamp: int) -> bool:
            return headers is not None and name in map(_NAME, headers)

        return has_header
    if predicate.kind is PredicateKind.CONDITION:
        return condition_test(predicate, topic, partition)
    raise ValueError(f"{predicate.kind.value} is decided per topic, not per record")


_NAME = itemgetter(0)
_FILTER, _INSERT_HEADER, _DROP_HEADERS = StepKind.FILTER, StepKind.INSERT_HEADER, StepKind.DROP_HEADERS
_HEADER_FROM = StepKind.HEADER_FROM
_KEY = Side.KEY


class RecordTransforms:
    """The steps one range's records go through (see the module docstring); ``topic`` and ``partition`` are the
    remote partition's, which InsertField may insert.  Each step's predicate is made a test once, here, and each
    Python step's function imported: the chain runs for every record copied."""

    def __init__(
        self, steps: Sequence[Step], topic: str = "", partition: int = 0, avro: AvroFields | None = None
    ) -> None:
        self.steps = tuple(steps)
        self.topic, self.partition, self.avro = topic, partition, avro
        self.settled: frozenset[FramedSide] = NO_SIDES
        """The sides the last :meth:`apply` wrote in Avro with a derived schema, framed with the target's id: the
        copy's id rewrite leaves them as they are (:mod:`airmirror.schemas.avro_fields` rule 4)."""
        self._plan = tuple(
            (
                step,
                step.kind,
                None if step.predicate is None else record_test(step.predicate, step.topic or topic, partition),
                step.negate,
                python_call(step, step.topic or topic, partition) if step.kind is StepKind.PYTHON else None,
            )
            for step in self.steps
        )

    def apply(
        self, key: bytes | None, value: bytes | None, given: GivenHeaders, timestamp: int = 0
    ) -> tuple[bytes | None, bytes | None, Headers | None] | None:
        """The record as the chain leaves it, or ``None`` when a step dropped it; raises :class:`TransformFailure`
        when a step cannot process it.  Afterwards :attr:`settled` holds the sides it wrote in Avro, framed with a
        target id."""
        headers = header_list(given)
        parsed_key: Any = _UNPARSED
        parsed_value: Any = _UNPARSED
        reads_avro = self.avro is not None
        if reads_avro:
            self.settled = NO_SIDES
        for step, kind, test, negate, call in self._plan:
            if (test or call) and (parsed_key is not _UNPARSED or parsed_value is not _UNPARSED):
                # a predicate or a Python step after a field step sees the record as written so far
                key, value = self._flushed(parsed_key, key), self._flushed(parsed_value, value)
                parsed_key = parsed_value = _UNPARSED
            try:
                if test is not None and test(key, value, headers, timestamp) == negate:
                    continue
                if call is not None:
                    kept = call(key, value, headers, timestamp)
                    if kept is None:
                        return None
                    key, value, headers = kept
                    continue
            except StepFailure as failure:
                raise TransformFailure(step, str(failure)) from failure
            if kind is _FILTER:
                return None
            if kind is _INSERT_HEADER or kind is _DROP_HEADERS:
                headers = _header_step(step, headers)
                continue
            parsed_key, parsed_value, headers = self.field_step(
                step, (key, value), (parsed_key, parsed_value), headers, timestamp, reads_avro
            )
        return self._flushed(parsed_key, key), self._flushed(parsed_value, value), headers

    def field_step(
        self,
        step: Step,
        written: tuple[bytes | None, bytes | None],
        parsed: tuple[Any, Any],
        headers: Headers | None,
        timestamp: int,
        reads_avro: bool = False,
    ) -> tuple[Any, Any, Headers | None]:
        """One field step: the parsed key and value after it (a side it did not change as it was, maybe unparsed),
        and the headers."""
        edit = step.fields
        assert edit is not None
        on_key = edit.side is _KEY
        data = parsed[0] if on_key else parsed[1]
        if data is _UNPARSED:
            data = self._parsed(written[0] if on_key else written[1], step, reads_avro)
        as_avro = data if type(data) is _AvroRecord else None
        content = data if as_avro is None else as_avro.record
        if step.kind is _HEADER_FROM:
            content, added = headers_from(step, edit, content)
            headers = [*(headers or ()), *added]
            if not edit.move:
                return parsed[0], parsed[1], headers  # a copy leaves the key or value as it was, its bytes too
        else:
            content = self.edited(step, edit, content, timestamp)
        if as_avro is not None:
            as_avro.record = content
            as_avro.steps.append(step)
            content = as_avro
        return (content, parsed[1], headers) if on_key else (parsed[0], content, headers)

    def edited(self, step: Step, edit: FieldEdit, data: Any, timestamp: int) -> Any:
        """One field step on the side's parsed JSON (``None`` for a null side)."""
        if data is None and step.kind is StepKind.INSERT_FIELD:
            return None  # Connect leaves a null key or value as it is
        _require_object(step, edit, data)
        if step.kind is StepKind.MASK_FIELD:
            return {**data, **{field: _masked(data.get(field), edit.replacement, step) for field in edit.masked}}
        if step.kind is StepKind.REPLACE_FIELD:
            renames = dict(edit.renames)
            return {
                renames.get(name, name): field
                for name, field in data.items()
                if name not in edit.exclude and (not edit.include or name in edit.include)
            }
        inserted = {"topic": step.topic or self.topic, "partition": self.partition, "timestamp": timestamp}
        return {**data, **{field: inserted.get(what, edit.static_value) for field, what in edit.inserted}}

    def _parsed(self, data: bytes | None, step: Step, reads_avro: bool) -> Any:
        """A key or value as JSON (``None`` when null), or as an :class:`_AvroRecord` when it is framed and the
        chain reads Avro."""
        if data is None:
            return None
        side = step.fields.side if step.fields else Side.VALUE
        if reads_avro and self.avro is not None:
            try:
                found = self.avro.read(data)
            except AvroFailure as failure:
                raise TransformFailure(step, str(failure)) from failure
            if found is not None:
                return _AvroRecord(*found, FramedSide(side.value.lower()))
        try:
            return read_json(data)
        except ValueError as error:
            raise TransformFailure(
                step, f"needs a JSON object, the {side.value.lower()} is not JSON ({error})"
            ) from error

    def _flushed(self, parsed: Any, written: bytes | None) -> bytes | None:
        """A side as bytes: ``written`` while unparsed, else its parsed JSON encoded, or its Avro record written
        with the schema the field steps that ran on it derive (:mod:`airmirror.schemas.avro_fields` rules 3-4)."""
        if parsed is _UNPARSED:
            return written
        if type(parsed) is not _AvroRecord:
            return _encoded(parsed)
        assert self.avro is not None
        try:
            written = self.avro.write(parsed.avro, subject_of(self.topic, parsed.side), parsed.steps, parsed.record)
        except AvroFailure as failure:
            raise TransformFailure(parsed.steps[-1], str(failure)) from failure
        self.settled |= {parsed.side}
        return written


def _header_step(step: Step, headers: Headers | None) -> Headers | None:
    """InsertHeader appends its header; DropHeaders removes the headers it names."""
    if step.kind is _INSERT_HEADER:
        assert step.header is not None
        return [*(headers or ()), (step.header, step.literal)]
    if not headers:
        return headers
    dropped = step.headers
    return [header for header in headers if header[0] not in dropped]


def headers_from(step: Step, edit: FieldEdit, data: Any) -> tuple[Any, Headers]:
    """HeaderFrom on the side's parsed JSON: the side (without the fields, for ``move``) and the headers to append."""
    _require_object(step, edit, data)
    try:
        added: Headers = [(header, _header_value(data.get(field))) for field, header in edit.to_headers]
    except TypeError as error:
        raise TransformFailure(step, f"cannot write a field as a header: {error}") from error
    if edit.move:
        moved = {field for field, _ in edit.to_headers}
        data = {name: field for name, field in data.items() if name not in moved}
    return data, added


def _header_value(field: Any) -> bytes | None:
    """A field as a header's bytes: a string's UTF-8 bytes, an Avro ``bytes`` or ``fixed`` field as it is, null as
    null, any other value its compact JSON (``TypeError`` for a value JSON has no form for)."""
    if field is None:
        return None
    if isinstance(field, bytes):
        return field
    return field.encode("utf-8") if isinstance(field, str) else written_json(field)


def _require_object(step: Step, edit: FieldEdit, data: Any) -> None:
    """Connect's ``requireMap``: a field step needs a JSON object."""
    if not isinstance(data, dict):
        found = "null" if data is None else f"JSON {type(data).__name__}"
        raise TransformFailure(step, f"needs a JSON object, the {edit.side.value.lower()} is {found}")


def _encoded(data: Any) -> bytes | None:
    return None if data is None else written_json(data)


def _masked(field: Any, replacement: str | None, step: Step) -> Any:
    """Connect's ``MaskField.masked`` for a JSON value: null stays null; else its type's empty value, or the
    replacement as that type (strings and numbers only)."""
    if field is None:
        return None
    if replacement is None:
        if type(field) not in _EMPTY:
            raise TransformFailure(step, f"cannot mask a {type(field).__name__}")
        return _EMPTY[type(field)]
    if isinstance(field, str):
        return replacement
    if isinstance(field, bool) or not isinstance(field, int | float):
        raise TransformFailure(step, f"cannot mask a JSON {type(field).__name__} with a replacement")
    try:
        return type(field)(replacement)
    except ValueError as error:
        raise TransformFailure(step, f"cannot convert replacement {replacement!r} to a number") from error


_EMPTY: dict[type, Any] = {
    bool: False,
    int: 0,
    float: 0.0,
    str: "",
    list: [],
    dict: {},
    Decimal: Decimal(0),
    datetime: datetime(1970, 1, 1, tzinfo=UTC),
    date: date(1970, 1, 1),
    time: time(0),
}
"""Connect's masked value of each type a JSON or Avro field has (Avro's decimals, timestamps, dates and times as
fastavro reads them: Connect masks a ``BigDecimal`` to zero and a ``java.util.Date`` to the epoch).  As in Connect,
bytes have none."""
