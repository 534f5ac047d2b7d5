"""airmirror's own transform and predicate (rule 6 of :mod:`airmirror.config.transforms`), as tests and calls that
:class:`~airmirror.replication.spark.record_transforms.RecordTransforms` runs for every record.

Contract:

1. **Condition** (``airmirror.predicates.Condition``): its JMESPath expression is searched in
   ``{key, value, headers, topic, partition, timestamp}`` and holds when the result is true in JMESPath's sense (not
   false, null, an empty string, list or object).  Key and value are their JSON when they are JSON
   (:func:`~airmirror.replication.spark.record_codec.read_json`), else their
   UTF-8 text (undecodable bytes replaced), null when null; only the sides the expression names are read.
   ``headers`` maps each header's name to its value's text (the last of a name wins), ``topic`` is the remote topic.
   A condition that raises (a function given the wrong type) fails the record as a transform does.
2. **Python** (``airmirror.transforms.Python``): the function is imported once per range (on the Spark executor)
   and called with a :class:`~airmirror.model.MirroredRecord` per record.  It returns a ``MirroredRecord`` with the
   same topic, partition and timestamp (key, value and headers may differ), or ``None`` to drop the record.
   Anything else, or an exception it raises, fails the record naming the step (the caller names the record), and
   ``errors.tolerance = all`` skips it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import jmespath

from airmirror.config.transforms import Predicate, Step, imported_function
from airmirror.model import MirroredRecord
from airmirror.replication.spark.record_codec import Headers, read_json

RecordTest = Callable[[bytes | None, bytes | None, Headers | None, int], bool]
"""Whether a predicate holds for a record's key, value, headers and timestamp."""
RecordCall = Callable[
    [bytes | None, bytes | None, Headers | None, int], tuple[bytes | None, bytes | None, Headers] | None
]
"""A Python step on a record's key, value, headers and timestamp: the record it leaves, or ``None`` (dropped)."""


class StepFailure(ValueError):
    """A step of airmirror's own could not process a record; the caller makes it a transform failure naming the
    step."""


def condition_test(predicate: Predicate, topic: str, partition: int) -> RecordTest:
    """Rule 1: the Condition's test on the records of one remote partition."""
    assert predicate.expression is not None
    compiled = jmespath.compile(predicate.expression)
    named = set(_field_names(compiled.parsed))
    reads_key, reads_value = "key" in named, "value" in named

    def holds(key: bytes | None, value: bytes | None, headers: Headers | None, timestamp: int) -> bool:
        record = {
            "key": _readable(key) if reads_key else None,
            "value": _readable(value) if reads_value else None,
            "headers": {name: _text(data) for name, data in headers or ()},
            "topic": topic,
            "partition": partition,
            "timestamp": timestamp,
        }
        try:
            found = compiled.search(record)
        except jmespath.exceptions.JMESPathError as error:
            raise StepFailure(f"condition {predicate.alias!r} failed: {error}") from error
        return found not in (None, False, "", [], {})

    return holds


def python_call(step: Step, topic: str, partition: int) -> RecordCall:
    """Rule 2: the Python step's call on the records of one remote partition."""
    assert step.function is not None
    function = imported_function(step.function)

    def call(
        key: bytes | None, value: bytes | None, headers: Headers | None, timestamp: int
    ) -> tuple[bytes | None, bytes | None, Headers] | None:
        given = MirroredRecord(topic, partition, timestamp, key, value, tuple(_bytes_headers(headers)))
        try:
            returned = function(given)
        except Exception as error:
            raise StepFailure(f"raised {type(error).__name__}: {error}") from error
        if returned is None:
            return None
        if not isinstance(returned, MirroredRecord):
            raise StepFailure(f"returned a {type(returned).__name__}, not a MirroredRecord or None")
        if (returned.topic, returned.partition, returned.timestamp) != (topic, partition, timestamp):
            raise StepFailure("changed the record's topic, partition or timestamp: it may change key, value, headers")
        return returned.key, returned.value, list(returned.headers)

    return call


def _field_names(node: dict[str, Any]) -> Iterator[str]:
    """Every field a parsed JMESPath expression names, at any depth (a superset of the top-level ones)."""
    if node.get("type") == "field":
        yield node["value"]
    for child in node.get("children", ()):
        if isinstance(child, dict):
            yield from _field_names(child)


def _readable(data: bytes | None) -> Any:
    """A key or value as a condition reads it: its JSON, else its text, null when null."""
    if data is None:
        return None
    try:
        return read_json(data)
    except ValueError:
        return _text(data)


def _text(data: str | bytes | None) -> str | None:
    return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data


def _bytes_headers(headers: Headers | None) -> Iterator[tuple[str, bytes | None]]:
    for name, data in headers or ():
        yield name, data.encode("utf-8") if isinstance(data, str) else data
