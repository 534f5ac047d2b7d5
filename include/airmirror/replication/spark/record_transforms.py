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
  schemaless ``Map`` (:data:`~airmirror.config.transforms.CLASS_DOCS`).  The side is parsed once, when the first
  field step reaches it, and written once, after the last step (compact JSON, its fields in their order, new ones
  last): a record no field step touches keeps its bytes.  JSON is read with orjson, except a text holding a run of
  19 digits or more, which the standard library reads so that no integer beyond 64 bits becomes a float (the run
  is found by a byte translation and a substring search: a regular expression costs more than orjson's whole
  parse).  A side that is not a JSON object raises :class:`TransformFailure` naming the step and why (the caller
  names the record).
* A step with a predicate runs only where the predicate holds (where it does not, with ``negate``):
  ``HasHeaderKey`` holds when some header has the name, ``RecordIsTombstone`` when the value is null.  Topic
  predicates were decided per topic before (``TopicNameMatches``).

A record's timestamp passes unchanged; InsertField's ``timestamp.field`` and ``partition.field`` take the record's
timestamp and partition, ``topic.field`` the remote topic.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from typing import Any

import orjson

from airmirror.config.transforms import FieldEdit, Predicate, PredicateKind, Side, Step, StepKind

HeaderValue = str | bytes | None
Headers = list[tuple[str, HeaderValue]]
GivenHeaders = Sequence[tuple[str, HeaderValue]] | Mapping[str, HeaderValue] | None
"""Headers in either form confluent-kafka takes (a consumer's records have the list form)."""
_UNPARSED = object()
_DIGITS = bytes(0x31 if ord("0") <= byte <= ord("9") else 0x30 for byte in range(256))
"""Maps each digit to ``1`` and every other byte to ``0``: a run of digits is then found by a substring search."""
_LONG_RUN = b"1" * 19


class TransformFailure(ValueError):
    """A step could not process a record (rule 5 of :mod:`airmirror.config.transforms`); the message names the step,
    ``step_class`` is its Connect class (``org.apache.kafka.connect.transforms.MaskField$Value``)."""

    def __init__(self, step: Step, message: str) -> None:
        super().__init__(f"transform '{step.alias}' ({step.class_name}) {message}")
        self.step_class = f"{step.kind.value}${step.fields.side.value}" if step.fields else step.kind.value


def header_list(given: GivenHeaders) -> Headers | None:
    """Headers in the list form (``None`` for none); a list is returned as it is (no step changes one in place)."""
    if given is None or isinstance(given, list):
        return given
    return list(given.items()) if isinstance(given, Mapping) else list(given)


RecordTest = Callable[[bytes | None, Headers | None], bool]


def record_test(predicate: Predicate) -> RecordTest:
    """Whether a record predicate holds, as a test of a record's value and headers."""
    if predicate.kind is PredicateKind.RECORD_IS_TOMBSTONE:
        return lambda value, headers: value is None
    if predicate.kind is PredicateKind.HAS_HEADER_KEY:
        name = predicate.header

        def has_header(value: bytes | None, headers: Headers | None) -> bool:
            return headers is not None and name in map(_NAME, headers)

        return has_header
    raise ValueError(f"{predicate.kind.value} is decided per topic, not per record")


_NAME = itemgetter(0)
_FILTER, _INSERT_HEADER, _DROP_HEADERS = StepKind.FILTER, StepKind.INSERT_HEADER, StepKind.DROP_HEADERS
_KEY = Side.KEY


class RecordTransforms:
    """The steps one range's records go through (see the module docstring); ``topic`` and ``partition`` are the
    remote partition's, which InsertField may insert.  Each step's predicate is made a test once, here: the chain
    runs for every record copied."""

    def __init__(self, steps: Sequence[Step], topic: str = "", partition: int = 0) -> None:
        self.steps = tuple(steps)
        self.topic, self.partition = topic, partition
        self._plan = tuple(
            (step, step.kind, None if step.predicate is None else record_test(step.predicate), step.negate)
            for step in self.steps
        )

    def apply(
        self, key: bytes | None, value: bytes | None, given: GivenHeaders, timestamp: int = 0
    ) -> tuple[bytes | None, bytes | None, Headers | None] | None:
        """The record as the chain leaves it, or ``None`` when a step dropped it; raises :class:`TransformFailure`
        when a field step cannot process it."""
        headers = header_list(given)
        parsed_key: Any = _UNPARSED
        parsed_value: Any = _UNPARSED
        for step, kind, test, negate in self._plan:
            if test is not None:
                current = value if parsed_value is _UNPARSED else None if parsed_value is None else b""
                if test(current, headers) == negate:
                    continue
            if kind is _FILTER:
                return None
            if kind is _INSERT_HEADER:
                assert step.header is not None
                headers = [*(headers or ()), (step.header, step.literal)]
            elif kind is _DROP_HEADERS:
                if headers:
                    dropped = step.headers
                    headers = [header for header in headers if header[0] not in dropped]
            else:
                edit = step.fields
                assert edit is not None
                if edit.side is _KEY:
                    parsed_key = self.edited(
                        step, edit, _parsed(key, step) if parsed_key is _UNPARSED else parsed_key, timestamp
                    )
                else:
                    parsed_value = self.edited(
                        step, edit, _parsed(value, step) if parsed_value is _UNPARSED else parsed_value, timestamp
                    )
        if parsed_key is not _UNPARSED:
            key = _encoded(parsed_key)
        if parsed_value is not _UNPARSED:
            value = _encoded(parsed_value)
        return key, value, headers

    def edited(self, step: Step, edit: FieldEdit, data: Any, timestamp: int) -> Any:
        """One field step on the side's parsed JSON (``None`` for a null side)."""
        if data is None and step.kind is StepKind.INSERT_FIELD:
            return None  # Connect leaves a null key or value as it is
        if not isinstance(data, dict):
            found = "null" if data is None else f"JSON {type(data).__name__}"
            raise TransformFailure(step, f"needs a JSON object, the {edit.side.value.lower()} is {found}")
        if step.kind is StepKind.MASK_FIELD:
            return {**data, **{field: _masked(data.get(field), edit.replacement, step) for field in edit.masked}}
        if step.kind is StepKind.REPLACE_FIELD:
            renames = dict(edit.renames)
            return {
                renames.get(name, name): field
                for name, field in data.items()
                if name not in edit.exclude and (not edit.include or name in edit.include)
            }
        inserted = {"topic": self.topic, "partition": self.partition, "timestamp": timestamp}
        return {**data, **{field: inserted.get(what, edit.static_value) for field, what in edit.inserted}}


def _parsed(data: bytes | None, step: Step) -> Any:
    """A key or value as JSON (``None`` when null)."""
    if data is None:
        return None
    try:
        return json.loads(data) if _LONG_RUN in data.translate(_DIGITS) else orjson.loads(data)
    except ValueError as error:
        side = step.fields.side.value.lower() if step.fields else "value"
        raise TransformFailure(step, f"needs a JSON object, the {side} is not JSON ({error})") from error


def _encoded(data: Any) -> bytes | None:
    if data is None:
        return None
    try:
        return orjson.dumps(data)
    except TypeError:  # an integer beyond 64 bits
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _masked(field: Any, replacement: str | None, step: Step) -> Any:
    """Connect's ``MaskField.masked`` for a JSON value: null stays null; else its type's empty value, or the
    replacement as that type (strings and numbers only)."""
    if field is None:
        return None
    if replacement is None:
        empty: dict[type, Any] = {bool: False, int: 0, float: 0.0, str: "", list: [], dict: {}}
        return empty[type(field)]
    if isinstance(field, str):
        return replacement
    if isinstance(field, bool) or not isinstance(field, int | float):
        raise TransformFailure(step, f"cannot mask a JSON {type(field).__name__} with a replacement")
    try:
        return type(field)(replacement)
    except ValueError as error:
        raise TransformFailure(step, f"cannot convert replacement {replacement!r} to a number") from error
