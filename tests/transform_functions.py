"""Python transforms (``airmirror.transforms.Python``) that the tests' chains name: importable as ``tests.*`` where
the tests run, and on the local Spark's executors (their Python workers start in the repository)."""

from __future__ import annotations

import dataclasses

from airmirror.model import MirroredRecord


def redact_card(record: MirroredRecord) -> MirroredRecord | None:
    """Drops a record whose key is ``drop``; else replaces every digit of the value with ``#`` and records the
    partition in a header."""
    if record.key == b"drop":
        return None
    value = None if record.value is None else bytes(b"#"[0] if 48 <= c <= 57 else c for c in record.value)
    headers = (*record.headers, ("seen-on", b"%d" % record.partition))
    return dataclasses.replace(record, value=value, headers=headers)


def moves_the_timestamp(record: MirroredRecord) -> MirroredRecord:
    return dataclasses.replace(record, timestamp=record.timestamp + 1)


def raises(record: MirroredRecord) -> MirroredRecord:
    raise KeyError("no such customer")


def returns_text(record: MirroredRecord) -> str:
    return "not a record"


NOT_CALLABLE = 42
