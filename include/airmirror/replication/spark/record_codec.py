"""A record's parts as the transforms read and write them (:mod:`~airmirror.replication.spark.record_transforms`,
:mod:`~airmirror.replication.spark.own_transforms`): headers in confluent-kafka's list form, JSON keys and values.

Contract: JSON is read with orjson, which reads an integer beyond 64 bits as a float: where what it read holds a float
and the text holds a run of 19 digits or more, the standard library reads the text again, so that no such integer
becomes a float.  Most JSON holds no float, and finding none in what orjson read (the types of each object's or
list's values, compared in C) costs less than looking for the run in the text (a byte translation and a substring
search, which cost more than orjson's whole parse; a regular expression costs ten times that); it is written
compact, fields in their order, with orjson, or the standard library for an integer beyond 64 bits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

HeaderValue = str | bytes | None
Headers = list[tuple[str, HeaderValue]]
GivenHeaders = Sequence[tuple[str, HeaderValue]] | Mapping[str, HeaderValue] | None
"""Headers in either form confluent-kafka takes (a consumer's records have the list form)."""
_DIGITS = bytes(0x31 if ord("0") <= byte <= ord("9") else 0x30 for byte in range(256))
"""Maps each digit to ``1`` and every other byte to ``0``: a run of digits is then found by a substring search."""
_LONG_RUN = b"1" * 19
_NESTED = (dict, list)


def header_list(given: GivenHeaders) -> Headers | None:
    """Headers in the list form (``None`` for none); a list is returned as it is (no step changes one in place)."""
    if given is None or isinstance(given, list):
        return given
    return list(given.items()) if isinstance(given, Mapping) else list(given)


def read_json(data: bytes) -> Any:
    """``data`` as JSON; raises ValueError when it is not JSON."""
    read = orjson.loads(data)
    if holds_float(read) and _LONG_RUN in data.translate(_DIGITS):
        return json.loads(data)
    return read


def holds_float(read: Any) -> bool:
    """Whether a value orjson read is, or holds at any depth, a float."""
    kind = type(read)
    if kind is not dict and kind is not list:
        return kind is float
    values = read.values() if kind is dict else read
    kinds = set(map(type, values))
    if float in kinds:
        return True
    return (dict in kinds or list in kinds) and any(holds_float(value) for value in values if type(value) in _NESTED)


def written_json(data: Any) -> bytes:
    """A JSON value as compact JSON bytes."""
    try:
        return orjson.dumps(data)
    except TypeError:  # an integer beyond 64 bits
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
