"""What a flow's transform chain does to one record on its way to the target (rule 4 of
:mod:`airmirror.config.transforms`).

Contract: :class:`RecordTransforms` runs the steps that :meth:`~airmirror.config.transforms.TransformChain.for_topic`
kept for one remote topic, in order, on a record's key, value and headers (raw bytes, confluent-kafka's header
list of ``(name, bytes | None)``), with Kafka Connect's meaning:

* ``Filter`` drops the record: :meth:`RecordTransforms.apply` returns ``None`` and the steps after it do not run.
  The copy then writes nothing for the record; its source offset is consumed all the same, so the range's progress
  passes it and its offset-sync runs skip it (:mod:`airmirror.replication.spark.task_writer`).
* ``InsertHeader`` appends a header (Connect's ``Headers.add``: a header of the same name stays).
* ``DropHeaders`` removes every header whose name it lists.
* A step with a predicate runs only where the predicate holds (where it does not, with ``negate``):
  ``HasHeaderKey`` holds when some header has the name, ``RecordIsTombstone`` when the value is null.  Topic
  predicates were decided per topic before (``TopicNameMatches``).

The steps never fail a record: they read no key or value.  A record's timestamp, key and value pass unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from airmirror.config.transforms import Predicate, PredicateKind, Step, StepKind

HeaderValue = str | bytes | None
Headers = list[tuple[str, HeaderValue]]
GivenHeaders = Sequence[tuple[str, HeaderValue]] | Mapping[str, HeaderValue] | None
"""Headers in either form confluent-kafka takes (a consumer's records have the list form)."""


def holds(predicate: Predicate, value: bytes | None, headers: Headers | None) -> bool:
    """Whether a record predicate holds for a record with ``value`` and ``headers``."""
    if predicate.kind is PredicateKind.RECORD_IS_TOMBSTONE:
        return value is None
    if predicate.kind is PredicateKind.HAS_HEADER_KEY:
        return headers is not None and any(name == predicate.header for name, _ in headers)
    raise ValueError(f"{predicate.kind.value} is decided per topic, not per record")


class RecordTransforms:
    """The steps one range's records go through (see the module docstring)."""

    def __init__(self, steps: Sequence[Step]) -> None:
        self.steps = tuple(steps)

    def apply(
        self, key: bytes | None, value: bytes | None, given: GivenHeaders
    ) -> tuple[bytes | None, bytes | None, Headers | None] | None:
        """The record as the chain leaves it, or ``None`` when a step dropped it."""
        headers = list(given.items()) if isinstance(given, Mapping) else None if given is None else list(given)
        for step in self.steps:
            if step.predicate is not None and holds(step.predicate, value, headers) == step.negate:
                continue
            kind = step.kind
            if kind is StepKind.FILTER:
                return None
            if kind is StepKind.INSERT_HEADER:
                assert step.header is not None
                headers = [*(headers or ()), (step.header, step.literal)]
            elif kind is StepKind.DROP_HEADERS and headers:
                headers = [header for header in headers if header[0] not in step.headers]
        return key, value, headers
